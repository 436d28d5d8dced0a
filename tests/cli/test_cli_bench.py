"""``ragsense bench kinship`` end to end through the CLI (a user system file, the fake generator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.cli import main

ORACLE = """
import re

def build(documents, k):
    def answer(question):
        m = re.fullmatch(r"Who is the ([\\w-]+) of (\\w+)\\?", question)
        suffix = f" is the {m[1]} of {m[2]}."
        hits = [d for d in documents if d.endswith(suffix)]
        return (hits[0].split()[0] if hits else "unknown"), hits
    return answer
"""


def test_cli_with_a_user_system_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    system = tmp_path / "oracle.py"
    system.write_text(ORACLE)
    out = tmp_path / "run"
    code = main(
        [
            "bench",
            "kinship",
            "--names",
            "12",
            "--generations",
            "3",
            "--k",
            "5,15",
            "--relations",
            "grandfather,uncle",
            "--system",
            f"{system}:build",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Control" in printed and "Grandfather" in printed
    for name in ("table.md", "table.csv", "table.json", "results.json", "answers.jsonl", "run.json"):
        assert (out / name).exists(), name
    assert (out / "source" / "control_documents.csv").exists()
    results = json.loads((out / "results.json").read_text())
    assert {(r["k"], r["condition"]) for r in results} == {
        (k, c) for k in (5, 15) for c in ("control", "grandfather", "uncle")
    }
    control = next(r for r in results if r["condition"] == "control" and r["k"] == 5)
    assert control["accuracy"] == 1.0 and control["retrieval_recall"] == 1.0 and control["n"] == 208
    assert set(results[0]) >= {"k", "condition", "accuracy", "retrieval_recall", "n"}
    assert "| # Retrieved | Control | Grandfather | Uncle |" in (out / "table.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--names", "3"], "names"),
        (["--generations", "1"], "generations"),
        (["--names", "13"], "divisible"),
        (["--k", "5,500"], "k=500 is larger than"),
        (["--relations", "cousin"], "cousin"),
        (["--distractors", "1.0"], "distractor"),  # [0, 1) by the generator; 1.5 argparse refuses
    ],
)
def test_cli_bad_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    system = tmp_path / "oracle.py"
    system.write_text(ORACLE)
    code = main(["bench", "kinship", "--system", f"{system}:build", "--out", str(tmp_path / "o"), *argv])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ragsense: error:") and message in err


def test_cli_bad_system_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "kinship", "--system", "no_such_file.py:build", "--out", str(tmp_path)])
    assert code == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_one_flag_server_generator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--base-url alone: the server's first listed model answers through /chat/completions."""
    pytest.importorskip("httpx")
    from ragsense.models import load_model
    from ragsense.serve import start_in_thread

    server, url = start_in_thread(load_model("fake"), model_name="served-fake", log_requests=False)
    try:
        out = tmp_path / "run"
        code = main(
            [
                "bench",
                "kinship",
                "--names",
                "4",
                "--generations",
                "2",
                "--k",
                "5",
                "--relations",
                "father",
                "--max-queries",
                "2",
                "--base-url",
                url,
                "--out",
                str(out),
                "--no-plot",
            ]
        )
    finally:
        server.close()
    assert code == 0
    run = json.loads((out / "run.json").read_text())["settings"]
    assert run["model"] == "openai:served-fake"
    records = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["errors"] == [] for r in records)
    # The fake answers about the last line it was sent, the question: the chat turn reached the server.
    assert all(r["answer"] == f"fake answer about Question: {r['question']}"[:58] for r in records)
    assert not (out / "accuracy_vs_k.png").exists()


def test_cli_records_retrieval_and_stops_and_writes_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["bench", "kinship", "--names", "4", "--generations", "2", "--k", "5", "--relations", "father"]
    argv += ["--max-queries", "2", "--model", "fake", "--retrieval", "dense", "--stop", "\\n", "--no-plot"]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    answering = json.loads((out / "run.json").read_text())["settings"]["system_settings"]
    assert answering["retrieval"] == "dense" and answering["stop"] == ["\n"]  # the escape decoded
    assert answering["prompt_format"] == "chat" and answering["document_order"] == "best_last"
    markdown = (out / "table.md").read_text()
    assert "## Accuracy (95% Wilson interval)" in markdown and '"retrieval": "dense"' in markdown
    results = json.loads((out / "results.json").read_text())
    assert all(r["accuracy_ci"] is not None and r["n_scored"] == 2 for r in results)
