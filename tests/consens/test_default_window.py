"""The default context budget (issue 40): a context of several documents is read through the relevance
window, a single document whole, and every consumer gets that default from ConSens itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragsense import evaluate, grounding
from ragsense.cli import main
from ragsense.consens import (
    AUTO_BUDGET,
    AUTO_POLICY,
    DEFAULT_CONTEXT_BUDGET,
    DEFAULT_CONTEXT_POLICY,
    ConSens,
    GroundingResult,
    GroundingScorer,
    attribution_metric,
    row_budget,
)
from ragsense.errors import ParameterError
from ragsense.models import load_model

Q = "Who designed the Elm bridge?"
ANSWER = "Maria Keller designed the Elm bridge in 1931."
SUPPORT = "Maria Keller designed the Elm bridge in 1931."
TOPICS = ["Bananas grow", "Paris museums open", "Rain falls", "Tulips bloom", "Trains run", "Owls hunt"]
# Eleven retrieved documents, most of them irrelevant, the supporting one in the middle: together
# well over the default window's budget.
FILLERS = [
    f"{TOPICS[i % len(TOPICS)]} in story number {i} of the long weekly report. " * 10 for i in range(10)
]
DOCS = [*FILLERS[:6], SUPPORT, *FILLERS[6:]]
SUPPORTING = 6
# One document as long as all of them: read whole by default.
LONG_DOC = " ".join(DOCS)
ROW = {"id": "r1", "question": Q, "contexts": DOCS, "answer": ANSWER}


def _windowed(record: Any) -> None:
    """What a row read through the default window says about itself."""
    get = record.get if isinstance(record, dict) else lambda k: getattr(record, k)
    assert get("context_selection") == "documents", get("context_selection")
    kept = get("kept_documents")
    assert SUPPORTING in kept and len(kept) < len(DOCS)
    assert get("truncated") and get("context_tokens_dropped") > 0


def test_the_rows_exceed_the_budget_under_the_fake_tokenizer() -> None:
    fake = load_model("fake")
    assert fake.count_tokens("\n\n".join(DOCS)) > 2 * AUTO_BUDGET
    assert fake.count_tokens(LONG_DOC) > 2 * AUTO_BUDGET


def test_the_default_is_auto_and_recorded_in_the_settings() -> None:
    assert DEFAULT_CONTEXT_BUDGET == "auto"
    assert ConSens(model="fake").settings()["context_budget"] == "auto"
    assert attribution_metric(model="fake").settings()["context_budget"] == "auto"
    assert row_budget("auto", 1) is None and row_budget("auto", 2) == AUTO_BUDGET
    assert row_budget("window", 2) is None and row_budget(None, 2) is None
    with pytest.raises(ParameterError, match="'auto', 'window' or None"):
        ConSens(model="fake", context_budget="all")  # type: ignore[arg-type]


def _score(docs: list[str], **options: Any) -> GroundingResult:
    [res] = asyncio.run(GroundingScorer(load_model("fake"), **options).score([(Q, docs, ANSWER)]))
    assert isinstance(res, GroundingResult)
    return res


def test_several_documents_are_read_through_the_window_one_document_whole() -> None:
    _windowed(_score(DOCS))
    single = _score([LONG_DOC])
    assert single.context_selection == "all" and not single.truncated and single.kept_documents == [0]
    # context_budget=None is the model window only (the default before issue 40): all documents read
    whole = _score(DOCS, context_budget=None)
    assert whole.context_selection == "all" and whole.kept_documents == list(range(len(DOCS)))
    # a number applies to every row, a single document included
    assert _score([LONG_DOC], context_budget=AUTO_BUDGET).context_selection == "sentences"
    # the default window is exactly the budget AUTO_BUDGET read with AUTO_POLICY on a multi-document row
    assert (
        _score(DOCS).to_dict()
        == _score(DOCS, context_budget=AUTO_BUDGET, context_policy=AUTO_POLICY).to_dict()
    )


def test_the_default_reads_the_best_ranked_document_whole_a_number_caps_it() -> None:
    # Amendment 3 (docs/results.md): under "auto" the supporting document is read whole even when it
    # is over the budget (lead); an explicit budget is a hard cap (relevance: its best sentences).
    assert DEFAULT_CONTEXT_POLICY == "auto" and AUTO_POLICY == "lead"
    long_support = SUPPORT + " " + "Maria Keller also designed the Elm bridge lamps in 1931. " * 30
    docs = [*FILLERS[:3], long_support, *FILLERS[3:]]
    fake = load_model("fake")
    assert fake.count_tokens(long_support) > AUTO_BUDGET
    default = _score(docs)
    assert default.kept_documents == [3] and default.context_selection == "documents"
    capped = _score(docs, context_budget=AUTO_BUDGET)
    assert capped.context_selection == "sentences"
    assert capped.context_tokens_dropped > default.context_tokens_dropped
    assert ConSens(model="fake").settings()["context_policy"] == "auto"


def test_empty_documents_do_not_count_towards_several() -> None:
    # One document among empty strings is a single document: read whole.
    res = _score(["", LONG_DOC, "  "])
    assert res.context_selection == "all" and res.kept_documents == [1]


# -- every consumer gets the default from ConSens ---------------------------------------------------


def test_evaluate_and_grounding_read_the_window() -> None:
    [row] = evaluate([ROW], "consens", model="fake", progress=False, store=False).rows
    _windowed(row)
    result = grounding(Q, DOCS, ANSWER, model="fake")
    _windowed(result)
    assert result.consens == row["consens"]


def test_the_cli_evaluate_and_grounding_commands_read_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(ROW) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["evaluate", str(rows), "--model", "fake", "-o", str(out), "--no-store"]) == 0
    _windowed(json.loads(out.read_text().splitlines()[0]))
    out2 = tmp_path / "window.jsonl"
    assert (
        main(
            [
                "evaluate",
                str(rows),
                "--model",
                "fake",
                "-o",
                str(out2),
                "--no-store",
                "--context-budget",
                "window",
            ]
        )
        == 0
    )
    assert json.loads(out2.read_text().splitlines()[0])["context_selection"] == "all"
    with pytest.raises(SystemExit):
        main(["evaluate", str(rows), "--model", "fake", "--context-budget", "lots"])
    assert "'auto' or 'window'" in capsys.readouterr().err


def test_the_guard_reads_the_window() -> None:
    from ragsense.guard import Guard
    from ragsense.guard._schema import CheckRow

    guard = Guard("fake")
    asyncio.run(guard.setup())
    [res] = asyncio.run(guard.acheck([CheckRow(question=Q, contexts=DOCS, answer=ANSWER)]))
    _windowed(res)


def test_the_pytest_assertions_read_the_window() -> None:
    from ragsense.testing import assert_grounded

    row = assert_grounded(Q, DOCS, ANSWER, model="fake", min_consens=-1.0)
    _windowed(row)


def test_the_framework_evaluators_read_the_window() -> None:
    from ragsense.integrations._core import Scorer

    [judgement] = Scorer(model="fake").score([ROW])
    _windowed(judgement.record)


def test_trace_scoring_reads_the_window(tmp_path: Path) -> None:
    pytest.importorskip("openinference.semconv.trace")
    from ragsense.traces._exports import CONTENT, DOCUMENTS

    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    trace = "a" * 32
    spans = [
        {
            "traceId": trace,
            "spanId": "a" * 15 + "0",
            "name": "query",
            "startTimeUnixNano": "1",
            "attributes": [attr("openinference.span.kind", "CHAIN"), attr("input.value", Q)],
        },
        {
            "traceId": trace,
            "spanId": "a" * 15 + "1",
            "parentSpanId": "a" * 15 + "0",
            "name": "retrieve",
            "startTimeUnixNano": "2",
            "attributes": [
                attr("openinference.span.kind", "RETRIEVER"),
                attr("input.value", Q),
                *[attr(f"{DOCUMENTS}.{i}.{CONTENT}", d) for i, d in enumerate(DOCS)],
            ],
        },
        {
            "traceId": trace,
            "spanId": "a" * 15 + "2",
            "parentSpanId": "a" * 15 + "0",
            "name": "llm",
            "startTimeUnixNano": "3",
            "attributes": [
                attr("openinference.span.kind", "LLM"),
                attr("input.value", Q),
                attr("output.value", ANSWER),
            ],
        },
    ]
    source = tmp_path / "t.json"
    source.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    out = tmp_path / "out.jsonl"
    code = main(["evaluate", str(source), "--from", "otlp", "--model", "fake", "-o", str(out), "--no-store"])
    assert code == 0
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    _windowed(record)
