"""VERA's step logic with a scripted judge: scores, kept text, refusals, corrections, failures, bad input."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from ragsense.data import RagRow
from ragsense.errors import InputError, ParameterError
from ragsense.vera import (
    CONTEXT_RELEVANCE,
    REFUSAL,
    RESPONSE_ADHERENCE,
    RETRIEVAL_NEED,
    STATEMENT_RELEVANCE,
    JudgeFailure,
    JudgePrompt,
    SplitInput,
    VeraEnhancement,
    VeraEvaluation,
    VeraEvaluator,
    VeraPipeline,
    VeraSettings,
    Verdict,
)

Rule = Callable[[BaseModel], Verdict]


def judge_vera(judge: Any, **settings: Any) -> VeraEvaluator:
    """These tests script the judge's labels: they use the judge for steps 1-3 and its adherence signal,
    not the offline signals and ConSens (the defaults), unless a test says otherwise."""
    return VeraEvaluator(judge, VeraSettings(**{"adherence_signal": "judge", "signals": "judge", **settings}))


class ScriptedJudge:
    """Labels by keyword rules per prompt; counts calls; can split by a given function."""

    def __init__(self, rules: dict[str, Rule], splitter: Callable[[SplitInput], Any] | None = None) -> None:
        self.rules = rules
        self.calls: list[tuple[str, int]] = []
        self.splitter = splitter

    @property
    def description(self) -> str:
        return "scripted"

    @property
    def can_split(self) -> bool:
        return self.splitter is not None

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        self.calls.append((prompt.name, len(items)))
        return [self.rules[prompt.name](item) for item in items]

    async def split(self, items: Sequence[SplitInput]) -> list[Any]:
        assert self.splitter is not None
        return [self.splitter(item) for item in items]


def keyword_rules(
    relevant_words: tuple[str, ...] = ("Quint", "designed"),
    grounded_words: tuple[str, ...] = ("Quint",),
    correction: str | None = None,
) -> dict[str, Rule]:
    def need(item: Any) -> Verdict:
        return Verdict("no" if "times" in item.question else "yes", confidence=0.9)

    def sentence(item: Any) -> Verdict:
        keep = any(w in item.sentence for w in relevant_words)
        return Verdict("relevant" if keep else "irrelevant", confidence=0.8, reason="scripted")

    def statement(item: Any) -> Verdict:
        keep = any(w in item.statement for w in relevant_words)
        return Verdict("relevant" if keep else "irrelevant", confidence=0.7)

    def adherence(item: Any) -> Verdict:
        if any(w in item.statement for w in grounded_words) and any(
            w in item.context for w in grounded_words
        ):
            return Verdict(
                "stated",
                confidence=0.9,
                probabilities={"stated": 0.9, "inferable": 0.05, "unsupported": 0.05},
            )
        return Verdict(
            "unsupported",
            confidence=0.8,
            probabilities={"stated": 0.1, "inferable": 0.1, "unsupported": 0.8},
            correction=correction,
        )

    return {
        RETRIEVAL_NEED.name: need,
        CONTEXT_RELEVANCE.name: sentence,
        STATEMENT_RELEVANCE.name: statement,
        RESPONSE_ADHERENCE.name: adherence,
    }


CONTEXT = "The Orvel bridge crosses the Lorn. It was designed by Mara Quint. Slate is grey."
ROW = RagRow(
    id="r1",
    question="Who designed the Orvel bridge?",
    contexts=[CONTEXT, "Goats eat grass."],
    answer="Mara Quint designed the bridge. Goats are mammals.",
)


def test_evaluate_scores_and_decisions() -> None:
    judge = ScriptedJudge(keyword_rules())
    [ev] = judge_vera(judge).evaluate_sync([ROW])
    assert isinstance(ev, VeraEvaluation)
    kept = [d.text for d in ev.context.decisions if d.keep]
    assert kept == ["It was designed by Mara Quint."]
    total = sum(len(d.text) for d in ev.context.decisions)
    assert ev.context_relevance == pytest.approx(len(kept[0]) / total)
    assert [d.label for d in ev.relevance.decisions] == ["relevant", "irrelevant"]
    assert ev.response_relevance == 0.5
    # Evaluate judges every statement against the whole context: the goat statement is unsupported.
    assert ev.response_adherence == 0.5
    assert ev.retrieval is not None and ev.retrieval.required
    assert ev.context.decisions[1].document == 0 and ev.context.decisions[3].document == 1
    start, end = ev.context.decisions[1].start, ev.context.decisions[1].end
    assert start is not None and CONTEXT[start:end] == "It was designed by Mara Quint."
    record = ev.to_record()
    assert set(record) >= {"context_relevance", "response_relevance", "response_adherence", "vera"}
    assert record["vera"]["context"]["decisions"][1]["reason"] == "scripted"


def test_evaluate_batches_one_judge_call_per_prompt() -> None:
    judge = ScriptedJudge(keyword_rules())
    rows = [ROW, ROW.model_copy(update={"id": "r2"}), ROW.model_copy(update={"id": "r3"})]
    results = judge_vera(judge).evaluate_sync(rows)
    assert all(isinstance(r, VeraEvaluation) for r in results)
    names = sorted(name for name, _ in judge.calls)
    assert names == sorted(
        [RETRIEVAL_NEED.name, CONTEXT_RELEVANCE.name, STATEMENT_RELEVANCE.name, RESPONSE_ADHERENCE.name]
    )
    assert dict(judge.calls)[CONTEXT_RELEVANCE.name] == 3 * 4  # 3 rows x 4 sentences, one call


def test_enhance_trims_context_and_answer() -> None:
    [en] = judge_vera(ScriptedJudge(keyword_rules())).enhance_sync([ROW])
    assert isinstance(en, VeraEnhancement)
    assert en.contexts == ["It was designed by Mara Quint.", ""]
    assert en.answer == "Mara Quint designed the bridge."
    assert not en.refused
    assert en.relevance is not None and en.relevance.score == 0.5
    assert en.adherence is not None and en.adherence.score == 1.0  # only the relevant statement is checked


def test_enhance_keeps_original_text_between_adjacent_sentences() -> None:
    row = ROW.model_copy(
        update={"contexts": ["Mara Quint was born in Tessaly.  She designed the bridge.\nSlate."]}
    )
    rules = keyword_rules(relevant_words=("Quint", "designed"))
    [en] = judge_vera(ScriptedJudge(rules)).enhance_sync([row])
    assert isinstance(en, VeraEnhancement)
    assert en.contexts == ["Mara Quint was born in Tessaly.  She designed the bridge."]


def test_enhance_refuses_when_no_context_is_relevant() -> None:
    row = ROW.model_copy(update={"question": "What colour is slate?"})
    rules = keyword_rules(relevant_words=("nothing matches",))
    [en] = judge_vera(ScriptedJudge(rules)).enhance_sync([row])
    assert isinstance(en, VeraEnhancement)
    assert en.refused and en.answer == REFUSAL and en.refusal == REFUSAL
    assert en.context.score == 0.0
    assert en.relevance is None and en.adherence is None
    assert en.to_record()["response_relevance"] is None


def test_enhance_refuses_when_no_statement_survives() -> None:
    row = ROW.model_copy(update={"answer": "Goats are mammals."})
    [en] = judge_vera(ScriptedJudge(keyword_rules())).enhance_sync([row])
    assert isinstance(en, VeraEnhancement)
    assert en.refused and en.answer == REFUSAL
    assert en.relevance is not None and en.relevance.score == 0.0


def test_enhance_uses_the_judges_correction() -> None:
    row = ROW.model_copy(update={"answer": "The bridge was designed by Ann Smith."})
    rules = keyword_rules(
        relevant_words=("Quint", "designed"), correction="The bridge was designed by Mara Quint."
    )
    [en] = judge_vera(ScriptedJudge(rules)).enhance_sync([row])
    assert isinstance(en, VeraEnhancement)
    assert en.answer == "The bridge was designed by Mara Quint."
    assert en.adherence is not None and en.adherence.score == 0.0
    decision = en.adherence.decisions[0]
    assert not decision.keep and decision.correction == "The bridge was designed by Mara Quint."
    assert decision.start is not None  # the original statement's place in the answer


def test_enhance_regenerates_from_edited_context() -> None:
    seen: list[list[str]] = []

    async def generate(questions: list[str], documents: list[list[str]]) -> list[str]:
        seen.extend(documents)
        return ["Mara Quint." for _ in questions]

    [en] = judge_vera(ScriptedJudge(keyword_rules())).enhance_sync(
        [ROW.model_copy(update={"answer": ""})], generate
    )
    assert isinstance(en, VeraEnhancement)
    assert seen == [["It was designed by Mara Quint."]]
    assert en.regenerated and en.original_answer == "Mara Quint." and en.answer == "Mara Quint."


def test_retrieval_not_required_answers_without_documents() -> None:
    asked: list[list[str]] = []

    async def generate(questions: list[str], documents: list[list[str]]) -> list[str]:
        asked.extend(documents)
        return ["84." for _ in questions]

    row = RagRow(id="m", question="What is 12 times 7?", contexts=["Slate is grey."], answer="")
    rules = keyword_rules(relevant_words=("84",))
    [en] = judge_vera(ScriptedJudge(rules)).enhance_sync([row], generate)
    assert isinstance(en, VeraEnhancement)
    assert asked == [[]]
    assert en.retrieval is not None and not en.retrieval.required
    assert en.context.score is None and en.adherence is not None and en.adherence.score is None
    assert en.answer == "84."


def test_judge_failure_marks_only_its_row() -> None:
    rules = keyword_rules()
    good_sentence = rules[CONTEXT_RELEVANCE.name]

    def flaky(item: Any) -> Verdict:
        if "Goats" in item.sentence and "broken" in item.question:
            return Verdict(None, error="the judge call failed: timeout", raw='{"label": "relev')
        return good_sentence(item)

    rules[CONTEXT_RELEVANCE.name] = flaky
    bad = ROW.model_copy(update={"id": "bad", "question": "Who designed the broken Orvel bridge?"})
    results = judge_vera(ScriptedJudge(rules)).evaluate_sync([ROW, bad, ROW])
    assert isinstance(results[0], VeraEvaluation) and isinstance(results[2], VeraEvaluation)
    assert isinstance(results[1], JudgeFailure)
    message = str(results[1])
    assert "context relevance" in message and "timeout" in message and "relev" in message


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"question": "  "}, "question"),
        ({"contexts": ["", "  "]}, "contexts"),
        ({"answer": ""}, "answer"),
        ({"answer": " ... "}, "answer"),
    ],
)
def test_bad_rows_get_errors_naming_the_field(update: dict[str, Any], field: str) -> None:
    results = judge_vera(ScriptedJudge(keyword_rules())).evaluate_sync(
        [ROW, ROW.model_copy(update=update), ROW]
    )
    assert isinstance(results[0], VeraEvaluation) and isinstance(results[2], VeraEvaluation)
    error = results[1]
    assert isinstance(error, InputError) and error.field == field and error.row == "r1"


def test_one_huge_sentence_is_cut_into_flagged_pieces() -> None:
    huge = "Mara Quint designed " + ", ".join(f"part {i} of the Orvel bridge" for i in range(400)) + "."
    row = ROW.model_copy(update={"contexts": [huge], "answer": "Mara Quint, " + "very " * 300 + "clearly."})
    [ev] = judge_vera(ScriptedJudge(keyword_rules())).evaluate_sync([row])
    assert isinstance(ev, VeraEvaluation)
    assert len(ev.context.decisions) > 10 and all(d.forced_split for d in ev.context.decisions)
    assert all(len(d.text) <= 600 for d in ev.context.decisions)
    assert 0.0 < ev.context_relevance <= 1.0  # type: ignore[operator]


def test_judge_splitter_and_fallback() -> None:
    def split(item: SplitInput) -> Any:
        if "fail" in item.question:
            return Verdict(None, error="did not validate", raw="[")
        return ["Mara Quint designed the bridge.", "Goats are mammals."]

    judge = ScriptedJudge(keyword_rules(), splitter=split)
    row = ROW.model_copy(update={"answer": "Mara Quint did, and goats are mammals."})
    failing = row.model_copy(update={"id": "f", "question": "Who designed it? fail"})
    ok, fallback = judge_vera(judge).evaluate_sync([row, failing])
    assert isinstance(ok, VeraEvaluation) and isinstance(fallback, VeraEvaluation)
    assert ok.splitter == "judge"
    assert [d.text for d in ok.relevance.decisions] == [
        "Mara Quint designed the bridge.",
        "Goats are mammals.",
    ]
    assert ok.relevance.decisions[0].start is None  # rewritten statements have no offsets
    assert fallback.splitter.startswith("rules (the judge's split failed")


def test_judge_splitter_needs_a_capable_judge() -> None:
    with pytest.raises(ParameterError, match="splitter"):
        judge_vera(ScriptedJudge(keyword_rules()), splitter="judge")


def test_consens_and_combined_adherence_signals() -> None:
    from ragsense.models import load_model

    fake = load_model("fake")  # its log-probs favour words seen in the prompt
    row = ROW.model_copy(update={"answer": "Mara Quint designed it. Zebras juggle flaming torches."})
    [ev] = judge_vera(
        ScriptedJudge(keyword_rules()), adherence_signal="consens", consens_model=fake
    ).evaluate_sync([row])
    assert isinstance(ev, VeraEvaluation)
    first, second = ev.adherence.decisions
    assert first.consens is not None and second.consens is not None and first.consens > second.consens
    assert first.keep and not second.keep and ev.response_adherence == 0.5
    assert first.label == "grounded" and second.label == "unsupported"
    [combined] = VeraEvaluator(
        ScriptedJudge(keyword_rules()),
        VeraSettings(adherence_signal="combined", consens_model=fake, signals="judge"),
    ).evaluate_sync([row])
    assert isinstance(combined, VeraEvaluation)
    p = combined.adherence.decisions[0].grounded_probability
    assert p is not None and p == pytest.approx((0.95 + (1 + first.consens) / 2) / 2)


def test_pipeline_wraps_a_retriever_and_generator() -> None:
    async def generate(questions: list[str], documents: list[list[str]]) -> list[str]:
        return ["Mara Quint designed it. Goats are mammals." if docs else "84" for docs in documents]

    retrieved: list[str] = []

    def retrieve(questions: list[str]) -> list[list[str]]:
        retrieved.extend(questions)
        return [[CONTEXT] for _ in questions]

    pipeline = VeraPipeline(retrieve, generate, judge_vera(ScriptedJudge(keyword_rules())))
    bridge, maths = asyncio.run(pipeline.answer(["Who designed the Orvel bridge?", "What is 12 times 7?"]))
    assert retrieved == ["Who designed the Orvel bridge?"]  # the retrieval check skipped the sum
    assert (
        bridge.answer == "Mara Quint designed it."
        and bridge.raw_answer == "Mara Quint designed it. Goats are mammals."
    )
    assert bridge.scores["response_relevance"] == 0.5
    assert maths.answer == "84" and maths.retrieved == [] and maths.enhancement is None
    assert bridge.to_dict()["context_relevance"] == pytest.approx(bridge.scores["context_relevance"])


def test_parameter_errors() -> None:
    with pytest.raises(ParameterError, match="adherence_signal"):
        judge_vera(ScriptedJudge(keyword_rules()), adherence_signal="vibes")
    with pytest.raises(ParameterError, match="consens_threshold"):
        judge_vera(ScriptedJudge(keyword_rules()), consens_threshold=2.0)


def test_adherence_context_is_cut_to_the_judge_window_and_flagged() -> None:
    from ragsense.models import load_model

    judge = load_model("fake", context_window=400)  # the adherence prompt alone is ~250 fake tokens
    context = " ".join(f"Fact number {i} is about the Orvel bridge." for i in range(60))
    row = ROW.model_copy(update={"contexts": [context], "answer": "Mara Quint designed it."})
    [ev] = judge_vera(judge, cache=False).evaluate_sync([row])
    assert isinstance(ev, VeraEvaluation)
    assert ev.adherence.notes and "cut to its first" in ev.adherence.notes[0]
    assert ev.response_adherence is not None
