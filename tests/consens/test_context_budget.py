"""Relevance windows (issue 27): a context over the budget keeps its most relevant documents, in order."""

import asyncio
from typing import Any

import pytest

from ragsense import evaluate
from ragsense.consens import ConSens, GroundingResult, GroundingScorer, attribution_metric
from ragsense.consens._select import select_context, split_sentences, tail_fit
from ragsense.errors import ParameterError
from ragsense.models import load_model

Q = "Who designed the Elm bridge?"
ANSWER = "Maria Keller designed it in 1931."
SUPPORT = "Maria Keller designed the Elm bridge in 1931."
FILLER = [
    "Bananas are yellow fruit grown in warm countries. " * 4,
    "Paris has many museums and a famous tower. " * 4,
    "Rain fell all week over the northern hills. " * 4,
    "Tulips bloom in spring in the Dutch fields. " * 4,
]
# The supporting document last: a tail cut drops it.
DOCS = [*FILLER, SUPPORT]


def _score(docs: list[str], answer: str = ANSWER, **options: Any) -> GroundingResult:
    scorer = GroundingScorer(load_model("fake"), **options)
    [res] = asyncio.run(scorer.score([(Q, docs, answer)], attribution=True))
    assert isinstance(res, GroundingResult)
    return res


def test_budget_keeps_the_relevant_documents_in_order_and_flags_the_row() -> None:
    res = _score(DOCS, context_budget=60)
    assert res.truncated and res.context_selection == "documents"
    kept = res.kept_documents
    assert 4 in kept and kept == sorted(kept) and len(kept) < len(DOCS)
    assert res.context_tokens_dropped > 0
    assert any("not scored" in n for n in res.notes)
    tail = _score(DOCS, context_budget=60, context_policy="tail")
    assert tail.context_selection == "tail" and 4 not in tail.kept_documents
    assert res.consens > tail.consens


def test_context_within_the_budget_is_scored_whole_and_unchanged() -> None:
    whole = _score(DOCS, context_budget="window")  # the model window: these 136 tokens read whole
    assert not whole.truncated and whole.context_selection == "all"
    assert whole.kept_documents == [0, 1, 2, 3, 4]
    big = _score(DOCS, context_budget=4000)
    assert big.to_dict() == whole.to_dict()


def test_selection_is_deterministic_and_indices_name_the_rows_contexts() -> None:
    docs = ["", *DOCS]  # an empty context keeps its place in the numbering
    a, b = _score(docs, context_budget=60), _score(docs, context_budget=60)
    assert a.to_dict() == b.to_dict()
    assert 5 in a.kept_documents and 0 not in a.kept_documents


def test_attribution_scores_only_the_kept_documents() -> None:
    docs = [FILLER[0], SUPPORT, FILLER[1], "Keller studied in 1931 at Zurich.", FILLER[2]]
    res = _score(docs, context_budget=50)
    kept = res.kept_documents
    assert len(kept) >= 2 and len(kept) < len(docs)
    assert res.attribution is not None and [a.index for a in res.attribution] == kept
    assert res.top_document in kept


def test_one_long_document_keeps_its_relevant_sentences() -> None:
    long_doc = " ".join(FILLER[:3]) + " " + SUPPORT + " " + FILLER[3]
    res = _score([long_doc], context_budget=30)
    assert res.context_selection == "sentences" and res.kept_documents == [0]
    assert res.consens > 0.5


def test_select_context_units() -> None:
    count = lambda s: len(s.split())  # noqa: E731
    s = select_context(["a b c", "x y", "a q"], "a", 5, count)
    assert s.kept_documents == [0, 2] and s.dropped_documents == [1]
    assert split_sentences("One. Two?\nThree") == ["One.", "Two?", "Three"]
    assert tail_fit(count, "one two three", 5) == ("one two three", 0)
    # Not one sentence fits: the start of the context is read, as the tail policy would.
    s = select_context(["one two three four five six"], "six", 3, count)
    assert s.unit == "tail" and s.context == "one two three"


def test_lead_keeps_the_best_ranked_document_whole_and_stops_at_the_first_misfit() -> None:
    count = lambda s: len(s.split())  # noqa: E731
    query = "source answer"
    docs = ["filler one two", "source answer source answer and more words go here", "zzz q", "source x"]
    # relevance: the best-ranked document (9 words) is over the budget of 6, so the window is packed
    # from sentences of all documents.
    assert select_context(docs, query, 6, count).unit == "sentences"
    # lead: the best-ranked document whole, over the budget; the next-ranked one no longer fits.
    lead = select_context(docs, query, 6, count, lead_limit=50)
    assert lead.kept_documents == [1] and lead.unit == "documents"
    # Within the budget the next-ranked documents follow in rank order until one does not fit; a
    # short document ranked below it is not read (relevance's greedy packing reads it).
    small = ["source answer", "alpha beta gamma", "source", "x"]
    assert select_context(small, query, 5, count, lead_limit=50).kept_documents == [0, 2]
    assert select_context(small, query, 5, count).kept_documents == [0, 2, 3]
    # Over the model window (lead_limit) the best-ranked document falls back to sentences.
    s = select_context(["source. answer words go on and on.", "other text"], "source", 3, count, lead_limit=4)
    assert s.unit == "sentences" and 0 in s.kept_documents


def test_lead_policy_through_the_scorer_reads_the_support_whole() -> None:
    padded = [*FILLER, SUPPORT + " " + "It spans the river near the old mill and carries two lanes. " * 3]
    lead = _score(padded, context_budget=20, context_policy="lead")
    relevance = _score(padded, context_budget=20)
    assert lead.kept_documents == [4] and lead.context_selection == "documents"
    assert relevance.context_selection == "sentences"  # the supporting document alone is over 20 tokens


def test_metric_options_reach_the_rows_and_the_settings() -> None:
    rows = [{"question": Q, "contexts": DOCS, "answer": ANSWER}]
    metric = attribution_metric(model="fake", context_budget=60)
    assert metric.settings()["context_budget"] == 60
    row = evaluate(rows, [metric], progress=False).rows[0]
    assert row["truncated"] and 4 in row["kept_documents"] and row["context_selection"] == "documents"
    with pytest.raises(ParameterError, match="context_budget"):
        ConSens(model="fake", context_budget=0)
    with pytest.raises(ParameterError, match="context_policy"):
        ConSens(model="fake", context_policy="head")


@pytest.mark.model
def test_bundled_model_reads_the_supporting_document_among_distractors(smollm2) -> None:  # type: ignore[no-untyped-def]
    """SmolLM2 with a 96-token budget: the supporting document, placed last among ten others, is the
    one read, and the score is the clean context's; the tail cut of the same budget reads fillers."""
    support = "David Baker is an American biochemist who designs proteins."
    fillers = [f"{f.strip()} Item {i}." for i, f in enumerate(FILLER * 3)][:10]
    answer = "David Baker is a biochemist."
    question = "What is David Baker known for?"
    rows = [
        {"id": "clean", "question": question, "contexts": [support], "answer": answer},
        {"id": "many", "question": question, "contexts": [*fillers, support], "answer": answer},
    ]
    budget = evaluate(rows, [ConSens(smollm2, context_budget=96)], progress=False).rows
    tail = evaluate(
        rows[1:], [ConSens(smollm2, context_budget=96, context_policy="tail")], progress=False
    ).rows
    assert budget[1]["kept_documents"][-1] == 10 and budget[1]["truncated"]
    assert budget[1]["consens"] == pytest.approx(budget[0]["consens"], abs=0.05)
    assert 10 not in tail[0]["kept_documents"] and tail[0]["consens"] < budget[1]["consens"]
