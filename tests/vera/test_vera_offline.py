"""VERA's offline signals for steps 1-3 (issue 28): the keep rules, the shipped retrieval-need model,
the committed needs-documents set, and the offline path through evaluate and enhance (fake model for
the likelihoods; the bundled MiniLM for embeddings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.vera import (
    DEFAULT_CONTEXT_RULE,
    RETRIEVAL_NEED_VERSION,
    KeepRule,
    RetrievalNeedModel,
    VeraEnhancement,
    VeraEvaluation,
    VeraEvaluator,
    VeraSettings,
    needs_documents_set,
)

HARROWBY = RagRow(
    id="h",
    question="What is Harrowby known for?",
    contexts=[
        "Harrowby is a small town on the east coast. Harrowby is known for its annual herring festival. "
        "The regional bus company repainted its fleet in 2019. Tickets are sold at the station."
    ],
    answer="Harrowby is known for its herring festival.",
)


def offline_vera() -> VeraEvaluator:
    return VeraEvaluator("fake", VeraSettings(cache=False))


def test_keep_rules_read_ranks_or_margins() -> None:
    scores = {"a": [0.1, 0.9, 0.5, 0.85], "b": [3.0, 2.0, 0.0, 1.0]}
    assert KeepRule(("a",), "top", 2).keep(scores)[0] == [False, True, False, True]
    assert KeepRule(("a",), "margin", 0.1).keep(scores)[0] == [False, True, False, True]
    assert KeepRule(("a",), "margin", 0.45).keep(scores)[0] == [False, True, True, True]
    # Fused by reciprocal rank: sentence 1 is first and second, sentence 0 last and first.
    keep, fused = KeepRule(("a", "b"), "top", 1).keep(scores)
    assert keep == [False, True, False, False] and fused[1] == max(fused)
    assert KeepRule(("a",), "top", 2).keep({"a": []}) == ([], [])


def test_the_committed_needs_documents_set() -> None:
    rows = needs_documents_set()
    need = [r for r in rows if r["needs_documents"]]
    no = [r for r in rows if not r["needs_documents"]]
    assert len(need) >= 100 and len(no) >= 100
    assert {r["kind"] for r in no} == {"greeting", "arithmetic", "knowledge"}
    # SQuAD questions are referenced by id, their text is not copied into the repository.
    squad = [r for r in rows if r["kind"] == "squad"]
    assert squad and all("question" not in r and r["squad_id"] for r in squad)
    assert {r["part"] for r in rows} == {"dev", "report"}
    assert len({r["id"] for r in rows}) == len(rows)


def test_the_shipped_retrieval_need_model_is_json_weights_of_its_version(tmp_path: Path) -> None:
    model = RetrievalNeedModel.load()
    assert len(model.coef) == 384 and 0.0 < model.threshold < 1.0 and model.embedder == "all-minilm-l6-v2"
    data = json.loads(Path(__file__).parents[2].joinpath("src/ragsense/vera/retrieval_need.json").read_text())
    data["version"] = RETRIEVAL_NEED_VERSION + 1
    other = tmp_path / "need.json"
    other.write_text(json.dumps(data))
    with pytest.raises(ParameterError, match="format version"):
        RetrievalNeedModel.load(other)


def test_offline_steps_keep_the_answer_sentence_and_say_why() -> None:
    vera = offline_vera()
    greeting = HARROWBY.model_copy(update={"id": "g", "question": "Hello, how are you today?"})
    ev, hello = vera.evaluate_sync([HARROWBY, greeting])
    assert isinstance(ev, VeraEvaluation) and isinstance(hello, VeraEvaluation)
    kept = [d.text for d in ev.context.decisions if d.keep]
    assert "Harrowby is known for its annual herring festival." in kept
    assert "Tickets are sold at the station." not in kept
    assert ev.context_relevance is not None and 0.0 < ev.context_relevance < 1.0
    assert all(d.reason and d.reason.startswith("offline: rank") for d in ev.context.decisions)
    assert ev.retrieval is not None and ev.retrieval.required
    assert hello.retrieval is not None and not hello.retrieval.required
    assert "P(needs documents)" in (hello.retrieval.reason or "")
    assert ev.relevance.decisions and all(
        (d.reason or "").startswith("offline: the question's likelihood lift") for d in ev.relevance.decisions
    )
    # Deterministic: the same rows give the same records, bit for bit.
    assert vera.evaluate_sync([HARROWBY, greeting]) == [ev, hello]


def test_enhance_refuses_an_answer_that_declines_with_the_reason() -> None:
    declining = HARROWBY.model_copy(update={"answer": "The documents do not say what Harrowby is known for."})
    [en] = offline_vera().enhance_sync([declining])
    assert isinstance(en, VeraEnhancement) and en.refused
    assert en.refusal_reason is not None and "declines" in en.refusal_reason
    assert en.to_record()["vera"]["refusal_reason"] == en.refusal_reason


def test_the_judge_path_stays_selectable() -> None:
    assert VeraSettings().signals == "offline" and DEFAULT_CONTEXT_RULE.signals
    with pytest.raises(ParameterError, match="signals"):
        VeraSettings(signals="magic")
    [ev] = VeraEvaluator("fake", VeraSettings(cache=False, signals="judge")).evaluate_sync([HARROWBY])
    assert isinstance(ev, VeraEvaluation)
    assert not any((d.reason or "").startswith("offline") for d in ev.context.decisions)
