"""ConSens on the real bundled models (marked `model`; part of the default suite)."""

import asyncio

import pytest

from ragsense import evaluate, grounding
from ragsense.consens import ConSens, GroundingScorer
from ragsense.models import ScoreRequest, load_model

pytestmark = pytest.mark.model

Q = "What is David Baker known for?"
ANSWER = "David Baker is a biochemist and computational biologist."
SCIENTIST = (
    "David Baker is an American biochemist and computational biologist who has pioneered methods to "
    "design proteins and predict their three-dimensional structures."
)
FOOTBALLER = "David Baker is an English professional footballer who plays as a defender."


def test_table1_shape_with_smollm2(smollm2) -> None:  # type: ignore[no-untyped-def]
    grounded = grounding(Q, [SCIENTIST], ANSWER, model=smollm2)
    conflicting = grounding(Q, [FOOTBALLER], ANSWER, model=smollm2)
    assert [w.word for w in grounded.words] == ["biochemist", "computational", "biologist"]
    assert grounded.consens > 0.5
    assert conflicting.consens < 0.0
    # Perplexities are reported and consistent with the score.
    assert grounded.ppl_context is not None and grounded.ppl_empty is not None
    assert grounded.ppl_context < grounded.ppl_empty


def test_scores_are_bit_identical_across_runs_and_batch_plans(smollm2) -> None:  # type: ignore[no-untyped-def]
    rows = [{"question": Q, "contexts": [c], "answer": ANSWER} for c in (SCIENTIST, FOOTBALLER)]
    first = evaluate(rows, [ConSens(smollm2)], progress=False).rows
    again = evaluate(rows[::-1], [ConSens(smollm2)], chunk_size=1, progress=False).rows[::-1]
    assert [r["consens"] for r in first] == [r["consens"] for r in again]
    assert [r["words"] for r in first] == [r["words"] for r in again]


def test_word_perplexity_sums_subword_tokens(smollm2) -> None:  # type: ignore[no-untyped-def]
    res = grounding(Q, [SCIENTIST], ANSWER, model=smollm2)
    [score] = smollm2.score_sync(
        [ScoreRequest(GroundingScorer(smollm2).template.render(Q, [SCIENTIST]), " " + ANSWER)]
    )
    # "biochemist" is three tokens in SmolLM2's vocabulary: " bi", "ochem", "ist".
    span = [i for i, (s, e) in enumerate(score.offsets) if 17 <= s < 28]
    assert len(span) == 3
    assert res.words[0].nll_context == pytest.approx(-sum(score.logprobs[i] for i in span), abs=1e-9)


def test_attribution_names_the_document_with_the_answer(smollm2) -> None:  # type: ignore[no-untyped-def]
    docs = ["The Nile is a river in Africa.", SCIENTIST, "Bread is baked from flour and water."]
    res = grounding(Q, docs, ANSWER, model=smollm2, attribution=True)
    assert res.top_document == 1
    assert res.attribution is not None and res.attribution[1].drop > 0.3


def test_context_over_the_window_is_truncated_and_flagged() -> None:
    small = load_model("smollm2-135m", context_window=128)
    long_doc = " ".join([SCIENTIST] * 40)
    res = grounding(Q, [long_doc], ANSWER, model=small)
    assert res.truncated and res.context_tokens_dropped > 500
    assert -1.0 <= res.consens <= 1.0


def test_gemma3_scores_the_same_example(gemma3) -> None:  # type: ignore[no-untyped-def]
    grounded = grounding(Q, [SCIENTIST], ANSWER, model=gemma3)
    conflicting = grounding(Q, [FOOTBALLER], ANSWER, model=gemma3)
    assert grounded.consens > conflicting.consens
    assert grounded.consens > 0.3


def test_head_only_logprobs_match_the_full_forward_pass(gemma3, smollm2) -> None:  # type: ignore[no-untyped-def]
    import torch

    for model in (smollm2, gemma3):
        assert model.kernel.head_only
        req = ScoreRequest(
            "Context: Zürich has 1,234.5 km² of naïve tram-lines.\nAnswer:", " Zürich's tram-lines."
        )
        [fast] = asyncio.run(model.score([req]))
        ids = model.tokenizer(req.prompt + req.continuation, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            full = torch.log_softmax(model._model(input_ids=ids).logits.float(), -1)[0]
        ref = [full[i - 1, ids[0, i]].item() for i in range(fast.prompt_tokens, ids.shape[1])]
        # float32 through two code paths; Gemma's large logits give differences near 1e-4.
        assert max(abs(a - b) for a, b in zip(ref, fast.logprobs, strict=True)) < 5e-4
        # The offsets reassemble the continuation.
        assert "".join(req.continuation[s:e] for s, e in fast.offsets).strip() == req.continuation.strip()


def test_inflected_and_question_repeated_verbs_do_not_pull_a_grounded_answer_to_unsure() -> None:
    """Issue 37: "builds on it" pulled a grounded answer to unsure. "builds" repeated the question's
    "build" (scored, contrast near 0, unstated: 0.29 unsure before the fix), or answered a context that
    says "built" (an irregular past the lemma rule did not undo: 0.38 unsure before the fix)."""
    context = (
        "AlphaFold 2 was released by DeepMind in 2020. It was built on the original AlphaFold system and "
        "added an attention-based network."
    )
    rows = [
        {"id": "question", "question": "What does AlphaFold 2 build on?", "contexts": [context],
         "answer": "AlphaFold 2 builds on the original AlphaFold system."},
        {"id": "built", "question": "How is AlphaFold 2 related to AlphaFold?", "contexts": [context],
         "answer": "AlphaFold 2 builds on it and adds an attention-based network."},
    ]  # fmt: skip
    run = evaluate(rows, "consens", progress=False, store=False, model_options={"threads": 1})
    for row in run.rows:
        assert row["verdict"] == "grounded", (row["id"], row["consens"], row["words"])
    words = {w["word"]: w["stated"] for w in run.rows[1]["words"]}
    assert words["builds"] and words["adds"]  # "built" and "added" in the context
    assert "builds" not in {w["word"] for w in run.rows[0]["words"]}  # a question repeat, not scored
