"""Group scoring (``score_groups``): a group's requests in one pass after its prompt, each within
1e-4 of its lone score, the same bits whatever else the call holds, and one body call per chain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import ragsense.models._hf_grouped as grouped
from ragsense.models import ContinuationScore, ScoreGroup, ScoreRequest, SupportsGroupScoring, load_model
from ragsense.models._transformers import TransformersModel

pytestmark = pytest.mark.model

PROMPT = (
    "Context: The Orvel bridge crosses the river Anse at the old mill of Saint-Remy. It was designed by "
    "the engineer Mara Quint in 1931 and opened to traffic two years later. Its three concrete arches "
    "span 212 metres in all.\nQuestion: Who designed the Orvel bridge, and when did it open?\nAnswer:"
)
ANSWER = " Mara Quint designed it in 1931; it opened in 1933. Its arches span 212 metres."
TOLERANCE = 1e-4


def _binding_like(prompt: str = PROMPT) -> ScoreGroup:
    """Variants compared from their first change, as the binding check asks: parts that lead one
    another (the answer up to each change), one with no part at all."""
    cut_1931 = ANSWER.index(" 1931")
    cut_1933 = ANSWER.index(" 1933")
    cut_212 = ANSWER.index(" 212")
    requests = (
        ScoreRequest(prompt, " Gustave Eiffel designed it in 1931;"),
        ScoreRequest(prompt + ANSWER[:cut_1931], " 1933; it opened in 1931."),
        ScoreRequest(prompt + ANSWER[:cut_1931], " 1931; it opened in 1933."),
        ScoreRequest(prompt + ANSWER[:cut_1933], " 1931."),
        ScoreRequest(prompt + ANSWER[:cut_212], " 1933 metres."),
        ScoreRequest(prompt + ANSWER[:cut_212], " 212 metres."),
    )
    return ScoreGroup(prompt, requests)


def _close(a: list[ContinuationScore], b: list[ContinuationScore]) -> float:
    """The largest log-prob difference; the tokens, offsets and counts must be the same."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        assert (x.tokens, x.offsets, x.prompt_tokens, x.straddles_boundary) == (
            y.tokens,
            y.offsets,
            y.prompt_tokens,
            y.straddles_boundary,
        )
        worst = max([worst, *(abs(p - q) for p, q in zip(x.logprobs, y.logprobs, strict=True))])
    return worst


def _spy_body(model: TransformersModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Tokens of every body call ``model`` makes from now on."""
    calls: list[int] = []
    original = model.kernel.states

    def spy(ids: Any, **kwargs: Any) -> Any:
        calls.append(int(ids.shape[0] * ids.shape[1]))
        return original(ids, **kwargs)

    monkeypatch.setattr(model.kernel, "states", spy)
    return calls


def test_a_group_scores_as_its_requests_alone(smollm2: TransformersModel) -> None:
    model = smollm2.with_settings()
    group = _binding_like()
    [together] = model.score_groups_sync([group])
    assert _close(together, model.score_sync(list(group.requests))) < TOLERANCE
    assert isinstance(model, SupportsGroupScoring)


def test_the_same_group_gives_the_same_bits_whatever_the_call(smollm2: TransformersModel) -> None:
    model = smollm2.with_settings()
    group = _binding_like()
    [first] = model.score_groups_sync([group])
    other = ScoreGroup(PROMPT, (ScoreRequest(PROMPT, " Quint."), ScoreRequest(PROMPT + " Mara", " Quint.")))
    _, beside, again = model.score_groups_sync([other, group, group])
    model.clear_prompt_cache()
    [cold] = model.score_groups_sync([group])
    uncached = smollm2.with_settings(prompt_cache_tokens=0)
    [no_cache] = uncached.score_groups_sync([group])
    assert first == beside == again == cold == no_cache


def test_a_chain_costs_one_body_call_after_its_prompt(
    smollm2: TransformersModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = smollm2.with_settings()
    group = _binding_like()
    model.score_groups_sync([group])  # the probe, the prompt: now kept
    body_calls = _spy_body(model, monkeypatch)
    model.score_groups_sync([group])
    plan = model._groups.plan(group)
    [chain] = plan.chains
    assert not plan.alone and len(chain) == len(group.requests)
    # The run is the leader's tokens (the longest request: the whole answer with its last variant)
    # less its last; request 2 is the answer's own text, so its states are the run's; every other
    # request adds its continuation less its last token.
    run = len(plan.encoded[chain[0]].ids) - len(plan.prompt_ids) - 1
    blocks = [i for i in chain[1:] if i != 2]
    assert body_calls == [plan.packed_tokens(chain)]
    assert plan.packed_tokens(chain) == run + sum(len(plan.continuation(i)) - 1 for i in blocks)


def test_parts_that_do_not_lead_one_another_make_chains(smollm2: TransformersModel) -> None:
    model = smollm2.with_settings()
    requests = (
        ScoreRequest(PROMPT + " Mara Quint designed it", " in 1931."),
        ScoreRequest(PROMPT + " It was designed by", " Mara Quint."),
        ScoreRequest(PROMPT + " It was designed by Mara", " Quint in 1931."),
    )
    group = ScoreGroup(PROMPT, requests)
    plan = model._groups.plan(group)
    assert sorted(len(chain) for chain in plan.chains) == [1, 2]
    [together] = model.score_groups_sync([group])
    assert _close(together, model.score_sync(list(requests))) < TOLERANCE


def test_a_request_joined_inside_a_word_is_scored_alone(smollm2: TransformersModel) -> None:
    model = smollm2.with_settings()
    prompt = PROMPT[: -len(":")]  # "...\nAnswer"
    requests = (ScoreRequest(prompt, ": Mara Quint."), ScoreRequest(prompt + "s", ": Mara Quint."))
    group = ScoreGroup(prompt, requests)
    plan = model._groups.plan(group)
    assert plan.alone == [1]  # "Answers" is one token: the second request's tokens leave the prompt's
    [together] = model.score_groups_sync([group])
    assert _close(together, model.score_sync(list(requests))) < TOLERANCE


def test_the_per_part_route_agrees(smollm2: TransformersModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches read only through their own rows (a sliding window), and chains over the packed bound,
    take the per-part route; it scores within the same tolerance."""
    model = smollm2.with_settings()
    group = _binding_like()
    alone = model.score_sync(list(group.requests))
    monkeypatch.setattr(grouped, "MAX_PACKED_TOKENS", 1)
    [per_part] = model.score_groups_sync([group])
    assert _close(per_part, alone) < TOLERANCE
    monkeypatch.undo()
    model._groups._masks_honoured = False
    [again] = model.score_groups_sync([group])
    assert again == per_part


def test_a_model_that_ignores_the_mask_is_not_packed(
    smollm2: TransformersModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = smollm2.with_settings()
    original = model.kernel.states

    def without_mask(ids: Any, **kwargs: Any) -> Any:
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 4:
            del kwargs["attention_mask"]  # as a model that builds its own causal mask would
        return original(ids, **kwargs)

    monkeypatch.setattr(model.kernel, "states", without_mask)
    assert model._groups.packs() is False
    [together] = model.score_groups_sync([_binding_like()])
    assert _close(together, model.score_sync(list(_binding_like().requests))) < TOLERANCE


def test_a_sliding_window_model_takes_the_per_part_route(gemma3: TransformersModel) -> None:
    model = gemma3.with_settings()
    group = _binding_like()
    assert model._groups.packs() is False
    [together] = model.score_groups_sync([group])
    assert _close(together, model.score_sync(list(group.requests))) < 1e-3


def test_the_fake_model_scores_groups_as_requests() -> None:
    model = load_model("fake")
    group = _binding_like()
    [together] = asyncio.run(model.score_groups([group]))  # type: ignore[attr-defined]
    assert together == asyncio.run(model.score(list(group.requests)))  # type: ignore[attr-defined]


def test_a_group_must_extend_its_prompt() -> None:
    with pytest.raises(ValueError, match="request 1's prompt does not start"):
        ScoreGroup("Q:", (ScoreRequest("Q: a", " b"), ScoreRequest("R: a", " b")))
    with pytest.raises(ValueError, match="splits must lie in the prompt"):
        ScoreGroup("Q:", (), splits=(9,))
