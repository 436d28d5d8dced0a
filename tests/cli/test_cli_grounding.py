"""The `ragsense grounding` command end to end: real files, the bundled model, resume, bad rows."""

import json
import math
from pathlib import Path

import pytest

from ragsense.cli import main

pytestmark = pytest.mark.model

GOOD = {
    "question": "What is David Baker known for?",
    "contexts": ["David Baker is an American biochemist who designs proteins."],
    "answer": "David Baker is a biochemist who designs proteins.",
}


def _rows(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sample_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grounding", "--sample"]) == 0
    out, err = capsys.readouterr()
    assert "consens" in out and "verdict" in out
    assert len([ln for ln in out.splitlines() if ln.strip()]) >= 2 + 8
    assert "10 rows: 10 ok" in err and "consens: n=10; consens " in err


def test_bad_rows_are_marked_and_the_batch_goes_on(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({**GOOD, "answer": ""}),
        json.dumps({**GOOD, "contexts": "a plain string where a list belongs"}),
        json.dumps(
            {
                "user_input": GOOD["question"],
                "retrieved_contexts": GOOD["contexts"],
                "response": GOOD["answer"],
            }
        ),
        json.dumps({**GOOD, "question": None}),
    ]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["grounding", str(src), "-o", str(out), "--table", "never"]) == 3  # finished, rows errored
    rows = _rows(out)
    assert [r["_row"] for r in rows] == list(range(6))
    errors = {r["_row"]: r["errors"][0] for r in rows if r["errors"]}
    assert set(errors) == {1, 2, 3, 5}
    assert errors[2]["field"] == "answer" and errors[5]["field"] == "question"
    assert errors[3]["field"] == "contexts" and "context" in errors[3]["message"]
    ok = [r for r in rows if not r["errors"]]
    assert all(math.isfinite(r["consens"]) and -1 <= r["consens"] <= 1 for r in ok)
    assert ok[0]["consens"] == ok[1]["consens"]  # RAGAS names, same row
    assert {"ppl_context", "ppl_empty", "words", "consens_by_aggregation"} <= set(ok[0])
    assert ok[0]["words"][0]["ppl_context"] > 0


def test_resume_continues_without_recomputing(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({**GOOD, "id": f"r{i}", "answer": GOOD["answer"] + f" {i}"}) + "\n" for i in range(5)
        )
    )
    full = tmp_path / "full.jsonl"
    assert main(["grounding", str(src), "-o", str(full), "--chunk-size", "2", "--table", "never"]) == 0
    # Simulate a crash after the first chunk plus half a line of the second.
    part = tmp_path / "part.jsonl"
    lines = full.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:2]) + lines[2][:25])
    assert (
        main(["grounding", str(src), "-o", str(part), "--chunk-size", "2", "--resume", "--table", "never"])
        == 0
    )
    assert part.read_text() == full.read_text()
    with pytest.raises(SystemExit):
        main(["grounding", str(src), "--resume"])
    assert main(["grounding", str(src), "-o", str(full), "--table", "never"]) == 2  # exists: needs --resume


def test_csv_input_and_attribution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        "id,question,contexts,answer\n"
        "a,What is David Baker known for?,"
        '"[""Bread is baked."", ""David Baker designs proteins."", ""Rivers flow.""]",'
        "David Baker designs proteins.\n"
    )
    out = tmp_path / "out.jsonl"
    assert main(["grounding", str(src), "-o", str(out), "--attribution"]) == 0
    [row] = _rows(out)
    assert len(row["attribution"]) == 3 and row["top_document"] == 1
    assert "top doc" in capsys.readouterr().out


def test_unknown_model_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grounding", "--sample", "--model", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


@pytest.mark.parametrize("port", [9])
def test_unreachable_server_marks_rows_and_exits_non_zero(tmp_path: Path, port: int) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "id": "second"}) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(
        [
            "grounding",
            str(src),
            "-o",
            str(out),
            "--table",
            "never",
            "--model",
            "openai:smol",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
        ]
    )
    assert code == 3
    rows = _rows(out)
    assert len(rows) == 2
    assert all("cannot reach the server at http://127.0.0.1:9/v1" in r["errors"][0]["message"] for r in rows)
