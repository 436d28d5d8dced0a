"""`ragsense vera evaluate|enhance` and `ragsense experiment vera-squad` end to end on real files.

The fake backend keeps these fast; the bundled-model runs are in tests/vera/test_vera_bundled.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main

GOOD = {
    "question": "Who designed the Orvel bridge?",
    "contexts": ["The Orvel bridge was designed by Mara Quint. Slate is grey."],
    "answer": "Mara Quint designed it.",
}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    lines = [
        json.dumps(GOOD),
        json.dumps({**GOOD, "answer": ""}),
        "{not json",
        json.dumps({**GOOD, "contexts": ["", " "]}),
        json.dumps(
            {
                "user_input": GOOD["question"],
                "retrieved_contexts": GOOD["contexts"],
                "response": "Mara Quint.",
            }
        ),
    ]
    src.write_text("\n".join(lines) + "\n")
    return src


def test_evaluate_writes_scores_decisions_and_row_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    cache = tmp_path / "cache"
    args = [
        "vera",
        "evaluate",
        str(_input(tmp_path)),
        "-o",
        str(out),
        "--model",
        "fake",
        "--cache-dir",
        str(cache),
        "--adherence-signal",
        "judge",  # the judge's own labels (the default signal is ConSens)
        "--signals",
        "judge",  # and for steps 1-3 (the default is the offline signals)
    ]
    assert main(args) == 3  # the run finished, but three rows have errors
    rows = _rows(out)
    assert [r["_row"] for r in rows] == [0, 1, 2, 3, 4]
    good, empty_answer, not_json, empty_contexts, ragas = rows
    for row in (good, ragas):
        # The fake judge (deterministic) finds no sentence relevant and the one statement stated.
        assert row["context_relevance"] == 0.0
        assert row["response_relevance"] == 0.0
        assert row["response_adherence"] == 1.0
        assert [d["label"] for d in row["vera"]["context"]["decisions"]] == ["irrelevant", "irrelevant"]
        assert row["vera"]["adherence"]["decisions"][0]["label"] == "stated"
        assert row["errors"] == []
    assert ragas["response"] == "Mara Quint." and "user_input" in ragas  # input names kept
    # The schema of ``ragsense evaluate``: every error in ``errors``, naming its metric and field.
    assert [(e["metric"], e["field"]) for e in empty_answer["errors"]] == [("vera", "answer")]
    assert not_json["errors"][0]["metric"] == "input" and not_json["errors"][0]["message"]
    assert [(e["metric"], e["field"]) for e in empty_contexts["errors"]] == [("input", "contexts")]
    assert all("error" not in r for r in rows)
    out_text, err = capsys.readouterr()
    assert "ctx rel" in out_text
    assert "5 rows: 2 ok, 3 with errors" in err
    assert "  vera: n=2; context_relevance +0.000 [+0.000, +0.000]; " in err and "errors 3" in err
    assert "row 3: input: contexts: " in err and "judge: labels:fake" in err
    # A second run over the same rows is served from the judge cache and gives identical output.
    out2 = tmp_path / "out2.jsonl"
    assert main([*args[:3], "-o", str(out2), *args[5:]]) == 3
    assert _rows(out2) == rows


def test_enhance_writes_edited_contexts_and_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    src = _input(tmp_path)
    assert (
        main(
            [
                *["vera", "enhance", str(src), "-o", str(out), "--model", "fake", "--no-cache"],
                *["--table", "never", "--signals", "judge"],
            ]
        )
        == 3  # rows 1-3 have errors
    )
    rows = _rows(out)
    good = rows[0]
    assert isinstance(good["enhanced_contexts"], list) and isinstance(good["enhanced_answer"], str)
    # The fake judge finds no sentence relevant, so VERA trims every context away and refuses.
    assert good["context_relevance"] == 0.0 and good["enhanced_contexts"] == [""]
    assert good["refused"] is True
    assert good["refusal"] and good["enhanced_answer"] == good["refusal"]
    assert rows[1]["errors"][0]["field"] == "answer" and rows[1].get("enhanced_answer") is None
    err = capsys.readouterr().err
    assert "5 rows: 2 ok, 3 with errors" in err and "  vera_enhance: n=2; " in err
    assert "judge: labels:fake" in err and "refused 2 of 2 rows" in err


def test_enhance_with_generator_accepts_rows_without_answers(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({k: v for k, v in GOOD.items() if k != "answer"}) + "\n")
    out = tmp_path / "out.jsonl"
    args = [
        "vera",
        "enhance",
        str(src),
        "-o",
        str(out),
        "--model",
        "fake",
        "--generator",
        "fake",
        "--no-cache",
        "--signals",
        "judge",
    ]
    assert main(args) == 0
    [row] = _rows(out)
    assert row["errors"] == []
    # The fake judge finds no sentence relevant, so VERA stops before generating (the regeneration
    # itself is tested with a scripted judge in tests/vera/test_vera_steps.py).
    assert row["refused"] is True and row["vera"]["regenerated"] is False


def test_resume_continues_an_interrupted_run(tmp_path: Path) -> None:
    src = _input(tmp_path)
    out = tmp_path / "out.jsonl"
    base = [
        "vera",
        "evaluate",
        str(src),
        "-o",
        str(out),
        "--model",
        "fake",
        "--no-cache",
        "--chunk-size",
        "2",
    ]
    assert main(base) == 3  # rows 1-3 have errors
    full = _rows(out)
    out.write_text("\n".join(json.dumps(r) for r in full[:2]) + "\n")  # as if killed after one chunk
    assert main([*base, "--resume"]) == 3
    assert _rows(out) == full


def test_experiment_vera_squad_runs_on_real_rows(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["experiment", "vera-squad", "--data", str(shared_data / "squad_v2"), "--limit", "4"]
    args += ["--model", "fake", "--generator", "fake", "--no-judge-cache", "--out", str(tmp_path)]
    args += ["--signals", "judge"]  # the fake judge's labels, pinned below
    assert main(args) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["n_items"] == 4 and figures["n_errors"] == 0
    # Fake judge and generator (deterministic): VERA refuses all four questions, so it gets the two
    # unanswerable ones right; without VERA the fake answer is never correct.
    assert figures["accuracy_without"] == 0.0
    assert figures["accuracy_with"] == 0.5  # 2 of 4
    assert figures["unanswerable_refused_with"] == 1.0  # 2 of 2
    assert figures["answerable_refused_with"] == 1.0  # 2 of 2
    assert figures["context_relevance_without"] == 0.0
    assert figures["context_relevance_with"] is None  # every row refused: nothing left to score
    records = _rows(tmp_path / "vera_squad.jsonl")
    assert [r["is_impossible"] for r in records] == [False, True, False, True]


def test_experiment_vera_wikieval_runs_on_real_rows(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["experiment", "vera-wikieval", "--data", str(shared_data / "wikieval"), "--limit", "2"]
    args += ["--model", "fake", "--no-judge-cache", "--out", str(tmp_path), "--signals", "judge"]
    assert main(args) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["n_items"] == 2 and figures["n_errors"] == 0
    # Fake judge (deterministic): ties count one half, so these are ratios over 2 items.
    assert figures["context_relevance_v1_over_v2"] == 0.5
    assert figures["adherence_consens_grounded_over_ungrounded"] == 1.0  # under the default q25 score
    assert figures["statement_consens_grounded_over_ungrounded"] == 1.0
    [first, _] = _rows(tmp_path / "vera_wikieval.jsonl")
    assert set(first) >= {"v1", "v2", "ungrounded", "poor"}
    assert main([*args, "--generator", "fake"]) == 2  # a generator makes no sense here
    assert "no generator" in capsys.readouterr().err
