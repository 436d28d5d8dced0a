"""The binding check inside ConSens: its findings, how they move the score and the verdict, and that an
answer with nothing to rebind scores exactly as before (fake models; the bundled reader in
test_binding_bundled.py)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence

import pytest

from ragsense import evaluate
from ragsense.consens import (
    DEFAULT_BINDING,
    BindingCheck,
    BindingFinding,
    ConSens,
    GroundingResult,
    GroundingScorer,
)
from ragsense.consens._binding import first_change, stretch
from ragsense.models import ContinuationScore, ScoreRequest
from ragsense.models._fake import FakeModel
from ragsense.text import BindingVariant

CONTEXT = ["Sick pay is paid from the fourth consecutive day of illness. The second office is in Lisbon."]
QUESTION = "When is sick pay paid?"
WRONG = "Sick pay is paid from the second consecutive day of illness."
RIGHT = "Sick pay is paid from the fourth consecutive day of illness."


class _Reader(FakeModel):
    """The fake model, plus a reader's sense of binding: after a prompt that says "fourth
    consecutive", the token " second" is 6 nats less likely and " fourth" 1 nat more likely."""

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        out = await super().score(requests)
        adjusted = []
        for req, res in zip(requests, out, strict=True):
            if "fourth consecutive" in req.prompt:
                bonus = {" second": -6.0, " fourth": 1.0}
                lps = tuple(
                    lp + bonus.get(tok, 0.0) for tok, lp in zip(res.tokens, res.logprobs, strict=True)
                )
                res = ContinuationScore(
                    res.tokens, res.offsets, lps, res.prompt_tokens, res.straddles_boundary
                )
            adjusted.append(res)
        return adjusted


def _identity(f: BindingFinding) -> tuple[str, str, str, int]:
    """What a finding rebinds (kind, original, replacement, rank), without its margin and lift."""
    return f.kind, f.original, f.replacement, f.variant


def _score(model: FakeModel, answer: str, binding: BindingCheck | None = DEFAULT_BINDING) -> GroundingResult:
    [res] = asyncio.run(GroundingScorer(model, binding=binding).score([(QUESTION, CONTEXT, answer)]))
    assert isinstance(res, GroundingResult)
    return res


def test_a_rebinding_the_context_prefers_counts_against_the_answer() -> None:
    reader = _Reader()
    wrong, right = _score(reader, WRONG), _score(reader, RIGHT)
    off = _score(reader, WRONG, binding=None)
    assert off.verdict == "grounded" and off.consens == 1.0  # the blind spot, without the check
    [finding] = wrong.binding or []
    assert (finding.kind, finding.original, finding.replacement) == ("substitute", "second", "fourth")
    # 7 nats from the reader's binding, less the fake model's own word noise (" second" vs " fourth").
    assert 6.0 < finding.margin < 7.5 and 6.0 < finding.lift < 8.0
    assert finding.reason() == f"the context prefers 'fourth' to 'second' here, by {finding.margin:.1f} nats"
    assert wrong.verdict != "grounded" and wrong.consens < 0.83
    assert right.binding == [] and right.verdict == "grounded"
    # Only the scores that read stated flags move; the paper's perplexity scores stay as they were.
    assert wrong.consens_by_aggregation["arithmetic"] == off.consens_by_aggregation["arithmetic"]
    assert wrong.words == off.words


def test_the_penalty_grows_with_the_margin() -> None:
    class Stronger(_Reader):
        async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
            out = await super().score(requests)
            return [
                ContinuationScore(
                    r.tokens,
                    r.offsets,
                    tuple(
                        lp - (4.0 if t == " second" and "fourth consecutive" in q.prompt else 0.0)
                        for t, lp in zip(r.tokens, r.logprobs, strict=True)
                    ),
                    r.prompt_tokens,
                    r.straddles_boundary,
                )
                for q, r in zip(requests, out, strict=True)
            ]

    assert _score(Stronger(), WRONG).consens < _score(_Reader(), WRONG).consens


def test_a_preference_without_the_context_is_not_a_misbinding() -> None:
    class Everywhere(FakeModel):
        """Prefers " fourth" to " second" whatever the prompt: no lift from the context."""

        async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
            out = await super().score(requests)
            bonus = {" second": -6.0}
            return [
                ContinuationScore(
                    r.tokens,
                    r.offsets,
                    tuple(lp + bonus.get(t, 0.0) for t, lp in zip(r.tokens, r.logprobs, strict=True)),
                    r.prompt_tokens,
                    r.straddles_boundary,
                )
                for r in out
            ]

    assert _score(Everywhere(), WRONG).binding == []
    loose = _score(Everywhere(), WRONG, BindingCheck(min_lift=-math.inf))
    [finding] = loose.binding or []
    assert finding.margin > 5.0 and abs(finding.lift) < 1.0  # the fake model's own word noise only


def test_no_check_and_no_variants_mean_the_same_scores() -> None:
    """The property: an answer with no stated span that could be rebound scores exactly as before."""
    rng = random.Random(46)
    vocabulary = [
        "pay",
        "paid",
        "sick",
        "day",
        "office",
        "illness",
        "leave",
        "staff",
        "rules",
        "apply",
        "during",
        "every",
        "long",
        "week",
    ]
    model = FakeModel()
    for _ in range(60):
        answer = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(2, 14))) + "."
        context = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(5, 40))) + "."
        [on] = asyncio.run(
            GroundingScorer(model, binding=DEFAULT_BINDING).score([("what applies?", [context], answer)])
        )
        [off] = asyncio.run(
            GroundingScorer(model, binding=None).score([("what applies?", [context], answer)])
        )
        assert isinstance(on, GroundingResult) and isinstance(off, GroundingResult)
        assert on.binding == [] and on.binding_variants == 0 and off.binding is None
        same = {k: v for k, v in on.to_dict().items() if not k.startswith("binding")}
        assert same == {k: v for k, v in off.to_dict().items() if not k.startswith("binding")}


def test_rows_without_findings_score_bit_for_bit_as_without_the_check() -> None:
    # Variants are scored (names, years), none preferred: the score is the one without the check.
    context = ["Ana Ruiz founded the firm in 2004. Ben Cole joined it in 1998."]
    row = ("Who founded the firm?", context, "Ana Ruiz founded the firm in 2004.")
    [on] = asyncio.run(GroundingScorer(FakeModel(), binding=DEFAULT_BINDING).score([row]))
    [off] = asyncio.run(GroundingScorer(FakeModel(), binding=None).score([row]))
    assert isinstance(on, GroundingResult) and isinstance(off, GroundingResult)
    assert on.binding_variants > 0 and on.binding == []
    assert on.consens == off.consens and on.consens_by_aggregation == off.consens_by_aggregation


def test_the_finding_travels_through_evaluate_and_back() -> None:
    reader = _Reader()
    run = evaluate(
        [{"question": QUESTION, "contexts": CONTEXT, "answer": WRONG}],
        [ConSens(reader, binding=True)],
        progress=False,
    )
    [row] = run.rows
    assert row["binding"][0]["replacement"] == "fourth" and row["binding_variants"] >= 1
    back = GroundingResult.from_dict(row)
    assert back.binding == [BindingFinding.from_dict(row["binding"][0])]
    assert ConSens(reader, binding=True).settings()["binding"]["max_variants"] == 8
    assert ConSens(reader, binding=False).settings()["binding"] is None


def test_refusals_are_not_checked() -> None:
    [res] = asyncio.run(
        GroundingScorer(_Reader(), binding=DEFAULT_BINDING).score(
            [(QUESTION, CONTEXT, "I cannot answer that from the context.")]
        )
    )
    assert isinstance(res, GroundingResult) and res.binding is None and res.verdict == "refusal"


def test_the_default_follows_the_rule() -> None:
    from ragsense.consens import BINDING_ON_BY_DEFAULT

    assert (ConSens("fake").binding is not None) == BINDING_ON_BY_DEFAULT
    assert (GroundingScorer(FakeModel()).binding is not None) == BINDING_ON_BY_DEFAULT


def test_bad_settings_are_refused() -> None:
    from ragsense.errors import ParameterError

    with pytest.raises(ParameterError, match="max_variants"):
        BindingCheck(max_variants=-2)
    with pytest.raises(ParameterError, match="binding"):
        ConSens("fake", binding="yes")  # type: ignore[arg-type]


def test_checkable_only_skips_bare_answers_and_keeps_ranks() -> None:
    reader = _Reader()
    narrow = BindingCheck(checkable_only=True)
    # A sentence that binds the ordinal: the same finding, at the same rank, as the full check.
    [full] = _score(reader, WRONG).binding or []
    [kept] = _score(reader, WRONG, binding=narrow).binding or []
    assert kept == full
    # A bare answer holds no relation: its variants exist but none is scored.
    bare = "The second."
    assert _score(reader, bare).binding_variants > 0
    narrowed = _score(reader, bare, binding=narrow)
    assert narrowed.binding_variants == 0 and narrowed.binding == []
    assert narrowed.consens == _score(reader, bare, binding=None).consens
    assert narrow.to_dict()["checkable_only"] is True and "checkable_only" not in DEFAULT_BINDING.to_dict()


def test_the_comparison_starts_before_the_first_changed_word() -> None:
    """Text before the first change is the same in the answer and the variant, so it goes into the
    shared prompt; the compared text starts with the changed word's leading space and runs to the end
    of the changed sentence."""
    answer = "The office opened in 2012. Sick pay is paid from the fourth day."
    second = answer.index(" Sick")
    full = ScoreRequest("Q:", " " + answer)
    cases = [  # (variant text, changed sentence's start, its end, compared variant, compared answer)
        (answer.replace("fourth", "second"), second, len(answer), " second day.", " fourth day."),
        (
            answer.replace("is paid", "is not paid"),
            second,
            len(answer),
            " not paid from the fourth day.",
            " paid from the fourth day.",
        ),
        (answer.replace("2012", "2016"), 0, second, " 2016.", " 2012."),
        (
            answer.replace("The office", "A office"),
            0,
            second,
            " A office opened in 2012.",
            " The office opened in 2012.",
        ),
    ]
    for text, start, cut, compared, own in cases:
        shift = len(text) - len(answer)
        v = BindingVariant(text, "substitute", "number", ((0, 1),), "", "", start, cut, cut + shift)
        var, orig = stretch(full, answer, v, lambda a: " " + a)
        assert (var.continuation, orig.continuation) == (compared, own)
        at = first_change(answer, v)
        assert var.prompt == orig.prompt == ("Q:" if at == 0 else "Q: " + answer[:at])


def test_a_variant_past_the_model_window_is_left_out_and_noted() -> None:
    # The context is cut to fit the answer; a variant that puts a longer name in would pass the
    # window. It is left out (and said so), and the row is scored instead of failing.
    context = [
        "Bo Li founded Acme in 2004. Maximilian Alexander Fitzgerald Worthington Montgomery Smythe"
        " Hale Ivo Jan Kurt Lem chaired Zeta in 1990."
    ]
    answer = "Bo Li founded Acme in 2004."
    loose = BindingCheck(min_margin=-math.inf, min_lift=-math.inf)

    def scored(window: int) -> GroundingResult:
        scorer = GroundingScorer(FakeModel(context_window=window), binding=loose)
        [res] = asyncio.run(scorer.score([("Who founded Acme?", context, answer)]))
        assert isinstance(res, GroundingResult), res
        return res

    roomy, tight = scored(200), scored(50)
    assert roomy.binding_variants == 8 and not any("left out" in n for n in roomy.notes)
    assert 0 < tight.binding_variants < 8 and not tight.truncated
    [note] = [n for n in tight.notes if n.startswith("binding check:")]
    assert f"{8 - tight.binding_variants} variant(s) left out" in note
    # The variants kept keep their ranks: each finding is the roomy run's finding of that rank.
    by_rank = {f.variant: f for f in roomy.binding or []}
    assert tight.binding and all(_identity(f) == _identity(by_rank[f.variant]) for f in tight.binding)
    long_name = "Maximilian Alexander Fitzgerald Worthington Montgomery Smythe Hale Ivo Jan Kurt Lem"
    assert any(f.replacement == long_name for f in roomy.binding or [])
    assert not any(f.replacement == long_name for f in tight.binding)


def test_stretches_read_from_their_own_requests_give_the_same_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A token across a stretch's end (Qwen's ".\n\n") makes the answer's own scores unable to give
    # that stretch: it is then scored as its own request, under the context in the first step and
    # without it in the second (a WikiEval row once sent the context's request to the no-context
    # group). Forcing every stretch down that path gives the same findings.
    import ragsense.consens._scorer as scorer_module

    reader = _Reader()
    read_off = _score(reader, WRONG).binding
    monkeypatch.setattr(scorer_module, "answer_totals", lambda plan, own: [None] * len(plan.variants))
    own_requests = _score(reader, WRONG).binding
    assert read_off and own_requests and len(read_off) == len(own_requests)
    for a, b in zip(read_off, own_requests, strict=True):
        assert _identity(a) == _identity(b)
        assert abs(a.margin - b.margin) <= 1e-9 and abs(a.lift - b.lift) <= 1e-9
