"""The VERA experiments on the runner: an interrupted run resumes to the records and figures of a fresh one.

The fake judge and generator keep these fast; the figures themselves are pinned in
tests/cli/test_cli_vera.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ragsense.experiments._vera as module
from ragsense.experiments._vera import vera_squad
from ragsense.experiments._vera_wikieval import vera_wikieval
from ragsense.models import load_model
from ragsense.vera import VeraEvaluator

KEPT = "kept from the earlier run"


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[dict[str, Any]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def _without_seconds(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if k != "seconds"}


def _check_resume(run: Callable[..., dict[str, Any]], path: Path, batch_size: int, marked: str) -> None:
    """Fresh run; then resume from a partial first chunk (all recomputed), and from a full first chunk
    plus part of the second (the first chunk is read back, not recomputed: its marked value stays)."""
    fresh = _without_seconds(run(resume=False))
    records = _read(path)
    assert len(records) > batch_size and [r["_row"] for r in records] == list(range(len(records)))
    assert all(r["errors"] == [] for r in records)

    _write(path, records[:3], tail=json.dumps(records[3])[:25])  # killed while writing row 3
    assert _without_seconds(run(resume=True)) == fresh
    assert _read(path) == records

    edited = [{**records[0], marked: KEPT}, *records[1 : batch_size + 2]]
    _write(path, edited)
    run(resume=True)
    assert _read(path) == [edited[0], *records[1:]]


def test_vera_squad_resumes_an_interrupted_run(shared_data: Path, tmp_path: Path) -> None:
    judge, generator = load_model("fake"), load_model("fake")

    def run(resume: bool) -> dict[str, Any]:
        return vera_squad(
            judge,
            data=str(shared_data / "squad_v2"),
            limit=12,
            out=str(tmp_path),
            generator=generator,
            vera_options={"cache": False},
            resume=resume,
        )

    _check_resume(run, tmp_path / "vera_squad.jsonl", 8, "raw_answer")


# Slow (kept out of the 15-minute default suite; run with -m slow): test_vera_squad_resumes_an_interrupted_run
# covers the same resume path.
@pytest.mark.slow
def test_vera_wikieval_resumes_an_interrupted_run(shared_data: Path, tmp_path: Path) -> None:
    judge = load_model("fake")

    def run(resume: bool) -> dict[str, Any]:
        return vera_wikieval(
            judge,
            data=str(shared_data / "wikieval"),
            limit=11,
            out=str(tmp_path),
            vera_options={"cache": False},
            resume=resume,
        )

    _check_resume(run, tmp_path / "vera_wikieval.jsonl", 8, "question")


def test_vera_squad_keeps_each_records_keys_and_marks_failed_parts(shared_data: Path) -> None:
    """A failed part keeps its ``error_*`` key (and is listed in ``errors``); keys an item lacks are
    absent rather than null, as the records were before the runner."""
    figures_records: list[dict[str, Any]] = []
    original = module._figures

    def spy(records: list[dict[str, Any]]) -> dict[str, Any]:
        figures_records.extend(records)
        return original(records)

    async def fail(self: Any, rows: Any, generate: Any = None) -> list[Exception]:
        return [RuntimeError("judge down") for _ in rows]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_figures", spy)
        patch.setattr(VeraEvaluator, "enhance", fail)
        figures = vera_squad(
            load_model("fake"),
            data=str(shared_data / "squad_v2"),
            limit=2,
            generator=load_model("fake"),
            vera_options={"cache": False},
        )
    assert figures["n_errors"] == 2 and figures["accuracy_with"] is None
    for record in figures_records:
        assert record["error_with"] == "judge down"
        assert "vera_answer" not in record and "error_without" not in record
        assert record["errors"] == [
            {"metric": "vera_squad", "field": None, "message": "error_with: judge down"}
        ]


def test_cli_resume_needs_out_and_a_resumable_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    from ragsense.cli import main

    assert main(["experiment", "vera-squad", "--model", "fake", "--resume"]) == 2
    assert "give --out" in capsys.readouterr().err
    assert main(["experiment", "consens-wikieval", "--model", "fake", "--resume", "--out", "x"]) == 2
    assert "cannot resume" in capsys.readouterr().err


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
def test_vera_wikieval_adherence_only_keeps_what_every_figure_is_recomputed_from(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = vera_wikieval(
        load_model("fake"),
        data=str(shared_data / "wikieval"),
        limit=4,
        out=str(tmp_path),
        vera_options={"cache": False},
        adherence_only=True,
    )
    assert figures["n_items"] == 4 and figures["n_errors"] == 0
    assert not any("paper" in key for key in figures)  # papers are quoted in docs only
    for key in (
        "adherence_judge",
        "adherence_consens",
        "mean_statement_consens",
        "mean_grounded_probability",
    ):
        low, high = figures[f"{key}_pairwise_ci95"]
        assert low <= figures[f"{key}_pairwise"] <= high and 0.0 <= figures[f"{key}_auroc"] <= 1.0
    records = _read(tmp_path / "vera_wikieval_adherence.jsonl")
    assert len(records) == 4
    for record in records:
        assert set(record) >= {"v1", "ungrounded", "adherence_prior"} and "v2" not in record
        assert set(record["adherence_prior"]) == {"stated", "inferable", "unsupported"}
        for kind in ("v1", "ungrounded"):
            assert record[kind]["context_relevance"] is None  # only the adherence step ran
            for st in record[kind]["statements"]:
                assert set(st["token_logprobs"]) == {"stated", "inferable", "unsupported"}
                assert {"arithmetic", "geometric"} <= set(st["consens_by_aggregation"])
                assert st["consens_word_nll"]

    # The analysis script recomputes every signal from the records alone, without a model.
    import runpy
    import sys

    script = Path(__file__).resolve().parents[2] / "papers" / "vera" / "vera_adherence.py"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            sys, "argv", ["vera_adherence.py", str(tmp_path / "vera_wikieval_adherence.jsonl"), "--json"]
        )
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "4 questions; dev = questions 0-23" in out and "chosen on dev" in out
    summary = json.loads(out.strip().splitlines()[-1])
    # The experiment's own figure (VERA's adherence aggregation) and the script's recomputation agree.
    from ragsense.vera import ADHERENCE_AGGREGATION

    default = f"consens {ADHERENCE_AGGREGATION} share"
    assert summary["measured"][default]["all"]["pairwise"] == figures["adherence_consens_pairwise"]
