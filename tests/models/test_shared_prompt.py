"""Packed scoring on a shared prompt: requests with the same prompt run it once, with the same results.

The prompt pass is shared only where the prompt has at least ``MIN_SHARED_PROMPT`` tokens; on CPU
(one row per pass) every such request takes the prompt + continuation route, so a request's
log-probs are bit-identical whether it is scored alone or beside others with its prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ragsense.models._hf_scoring as scoring
import ragsense.models._hf_shared as shared
from ragsense.models import ScoreRequest
from ragsense.models._hf_shared import MIN_SHARED_PROMPT, continuations_on_state, prompt_state
from ragsense.models._transformers import TransformersModel

pytestmark = pytest.mark.model

CONTEXT = (
    "Context: The Orvel bridge crosses the river Anse at the old mill of Saint-Remy. It was designed by "
    "the engineer Mara Quint in 1931 and opened to traffic two years later. Its three concrete arches "
    "span 212 metres in all.\nQuestion: Who designed the Orvel bridge, and when did it open?\nAnswer:"
)
ANSWERS = (
    " Mara Quint designed it; it opened in 1933.",
    " It was designed by Gustave Eiffel in 1889.",
    " Quint.",
    " The bridge, three concrete arches over the Anse, was designed by the engineer Mara Quint.",
)


def _requests() -> list[ScoreRequest]:
    return [ScoreRequest(CONTEXT, a) for a in ANSWERS] + [ScoreRequest("Hi", " there")]


def _with(model: TransformersModel, **options: Any) -> TransformersModel:
    return model.with_settings(**options)


@pytest.fixture
def prompt_passes(smollm2: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Token counts of every prompt pass of the shared route."""
    calls: list[int] = []
    original = scoring.prompt_state

    def spy(kernel: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(ids))
        return original(kernel, ids, *args, **kwargs)

    monkeypatch.setattr(scoring, "prompt_state", spy)
    yield calls


def test_alone_and_together_are_bit_identical_on_cpu(smollm2: Any, prompt_passes: list[int]) -> None:
    assert smollm2.max_batch_size == 1  # the CPU default
    model = _with(smollm2, prompt_cache_tokens=0)  # no cross-call cache: each call reads its prompt
    requests = _requests()
    alone = [model.score_sync([r])[0] for r in requests]
    assert len(prompt_passes) == len(ANSWERS)  # "Hi" is too short a prompt to take the route
    assert all(n >= MIN_SHARED_PROMPT for n in prompt_passes)
    prompt_passes.clear()
    together = model.score_sync(requests)
    assert len(prompt_passes) == 1  # one prompt pass serves the four answers
    assert together == alone


def test_shared_route_agrees_with_the_padded_full_pass(smollm2: Any) -> None:
    requests = _requests()
    shared = smollm2.score_sync(requests)
    # max_batch_size=4: requests that share no prompt go through the padded full pass.
    full = [_with(smollm2, max_batch_size=4).score_sync([r])[0] for r in requests]
    for s, f in zip(shared, full, strict=True):
        assert (s.tokens, s.offsets, s.prompt_tokens) == (f.tokens, f.offsets, f.prompt_tokens)
        assert list(s.logprobs) == pytest.approx(list(f.logprobs), abs=1e-4)


def test_batched_continuations_and_the_kv_budget(
    smollm2: Any, prompt_passes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _requests()
    reference = smollm2.score_sync(requests)
    batched = _with(smollm2, max_batch_size=4)
    padded_prompts: list[int] = []
    original = scoring.prompt_states
    monkeypatch.setattr(
        scoring, "prompt_states", lambda k, p, pad: padded_prompts.append(len(p)) or original(k, p, pad)
    )
    prompt_passes.clear()
    together = batched.score_sync(requests)
    # With batching the shared prompt runs on the batched route (models/_hf_batched.py): one pass.
    assert prompt_passes == [] and padded_prompts == [1]
    # Again: the prompt is kept, so its state goes on on the shared route. A budget of one cached
    # token: each continuation gets its own copy of the prompt's KV state.
    monkeypatch.setattr(scoring, "SCORE_KV_TOKENS", 1)
    split = batched.score_sync(requests)
    for t, s, r in zip(together, split, reference, strict=True):
        assert list(t.logprobs) == pytest.approx(list(r.logprobs), abs=1e-4)
        assert list(s.logprobs) == pytest.approx(list(r.logprobs), abs=1e-4)
    # With batching, a prompt no other request shares takes the padded pass.
    prompt_passes.clear()
    batched.score_sync(requests[:1])
    assert prompt_passes == []


def test_a_straddling_continuation_keeps_its_own_group(smollm2: Any) -> None:
    # "Par" + "is" merges across the boundary: the merged token belongs to the continuation, so the
    # prompt tokens before it differ from those of " Paris" and the two do not share a group.
    prompt = CONTEXT.replace("Answer:", "Answer: Par")
    requests = [ScoreRequest(prompt, "is."), ScoreRequest(prompt, "agraph three.")]
    got = smollm2.score_sync(requests)
    full = [_with(smollm2, max_batch_size=4).score_sync([r])[0] for r in requests]
    for g, f in zip(got, full, strict=True):
        assert g.tokens == f.tokens and g.straddles_boundary == f.straddles_boundary
        assert list(g.logprobs) == pytest.approx(list(f.logprobs), abs=1e-4)


def _on_state(model: TransformersModel, continuations: list[list[int]], max_rows: int | None) -> Any:
    """Every continuation on one fresh prompt state of CONTEXT; also the prompt's tensors before."""
    kernel = model._scorer.kernel
    prompt = model._tokenizer(CONTEXT)["input_ids"]
    with kernel.torch.inference_mode():
        cache, last = prompt_state(kernel, prompt)
        before = [(x.keys, x.values) for x in cache.layers]
        lps = continuations_on_state(
            kernel,
            cache,
            last,
            len(prompt),
            continuations,
            pad_id=model._pad_id,
            kv_tokens=1 << 20,
            max_rows=max_rows,
        )
    return lps, before, cache


@pytest.mark.parametrize("max_rows", [1, None])
def test_continuations_reuse_the_prompt_state_bit_for_bit(
    smollm2: Any, monkeypatch: pytest.MonkeyPatch, max_rows: int | None
) -> None:
    """Issue 49: on a DynamicLayer cache every group of continuations runs on the prompt's own tensors,
    set back after it, instead of a deep copy each. The log-probs are those of the deep-copy route,
    and (one row per pass) those of each continuation scored alone on its own fresh prompt state,
    exactly; the cache comes back holding the prompt's very tensors."""
    conts = [smollm2._tokenizer(a)["input_ids"] for a in (*ANSWERS, " Yes", " It was designed in 1931.")]
    assert len({len(c) for c in conts}) >= 5 and min(len(c) for c in conts) == 1
    reused, before, cache = _on_state(smollm2, conts, max_rows)
    assert all(x.keys is k and x.values is v for x, (k, v) in zip(cache.layers, before, strict=True))
    if max_rows == 1:
        alone = [_on_state(smollm2, [c], 1)[0][0] for c in conts]
        assert reused == alone
    monkeypatch.setattr(shared, "croppable", lambda cache: False)  # the deep copy per group
    copied, _, _ = _on_state(smollm2, conts, max_rows)
    assert reused == copied
