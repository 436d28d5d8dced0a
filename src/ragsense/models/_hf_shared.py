"""Continuations on one shared prompt: the prompt's body runs once, every continuation on its KV state.

Used by choice scoring (a judge's labels after one prompt) and by packed scoring when several requests
of one call share their prompt tokens (VERA's statements after one question and context, the grounded
and the ungrounded answer of one row, two systems' answers to one question). Scoring ``k`` answers of
``n`` tokens after a ``p``-token prompt then costs ``p + k * n`` token positions instead of
``k * (p + n)``.

A prompt declared in segments (:attr:`ScoreRequest.splits <ragsense.models.ScoreRequest.splits>`)
runs one pass per segment, each on the KV state of the ones before (:func:`prompt_state`), whether or
not a cached state of its first segments exists, so reuse never changes a bit
(:mod:`~ragsense.models._hf_prompt_cache`).

Exactness: with causal attention, position ``i``'s state depends only on tokens ``0..i``, so the
states a continuation gets on the prompt's KV state are those of one pass over prompt + continuation;
the results differ from the padded pass's only by floating-point summation order (about 1e-6 in a
log-probability; up to 4e-5 measured on WikiEval rows), and the same call always computes them the
same way.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragsense.models._hf_prompt_cache import croppable

if TYPE_CHECKING:
    from ragsense.models._kernel import LogprobKernel

# Packed scoring shares a prompt between requests only from this many prompt tokens on: below it the
# extra forward calls cost more than the positions they save.
MIN_SHARED_PROMPT = 32
# A prompt's pass is cut at a declared split only this many tokens after the previous cut (or the
# start): one thread runs an 800-token prompt in segments of 256, 128, 64 and 32 tokens 1.02x, 1.11x,
# 1.24x and 1.52x as long as in one piece (each pass has a fixed cost; benchmarks/bench_prefix_reuse.py
# --segment-sizes). Documents shorter than this share their pass only in groups.
MIN_SEGMENT = 128
# Cached tokens one batched continuation pass of packed scoring may hold (46 KB a token for SmolLM2:
# 8192 tokens are about 380 MB).
SCORE_KV_TOKENS = 8192


def prompt_state(
    kernel: LogprobKernel,
    prompt_ids: Sequence[int],
    cuts: Sequence[int] = (),
    *,
    start: int = 0,
    cache: Any = None,
) -> tuple[Any, Any]:
    """``(KV cache, last state)`` after ``prompt_ids``, run as one pass per segment (the segments cut
    at ``cuts``, token positions). With ``cache`` holding the first ``start`` positions (``start``
    one of ``cuts``) only the later segments run: the same passes as from the start, so the same
    bits. Call under inference mode."""
    torch = kernel.torch
    ends = [c for c in cuts if start < c < len(prompt_ids)] + [len(prompt_ids)]
    states = None
    for end in ends:
        segment = torch.tensor([list(prompt_ids[start:end])], dtype=torch.long)
        states, cache = kernel.forward(segment, cache)
        start = end
    assert states is not None, "an empty prompt has no state"
    return cache, states[0, -1:]


def continuations_on_state(
    kernel: LogprobKernel,
    cache: Any,
    last: Any,
    prompt_len: int,
    continuations: Sequence[Sequence[int]],
    *,
    pad_id: int,
    kv_tokens: int,
    max_rows: int | None = None,
) -> list[list[float]]:
    """Per continuation, the log-probability of each of its tokens after the prompt whose KV ``cache``
    and last state ``last`` are given (``prompt_len`` tokens). Call under ``torch.inference_mode()``.

    The first token of every continuation is scored from ``last`` (one head row per distinct token);
    the later tokens run as right-padded batches on the prompt's cache, each batch holding at most
    ``kv_tokens`` cached tokens (continuations x (prompt + widest continuation)), which bounds memory
    when a long prompt has many continuations, and at most ``max_rows`` continuations (1: each alone,
    so a continuation's log-probs do not depend on the others). Causal attention keeps the padding
    (always to the right) out of the real positions.

    Every batch starts from the prompt's own keys and values. A cache whose layers all keep every
    position (:func:`croppable`: transformers' ``DynamicLayer``, whose ``update`` and batch operations
    bind new tensors and never write into the old ones) is set back to the prompt's tensors after each
    batch, the same tensor objects, so no batch copies the prompt (issue 49: one deep copy of a
    950-token SmolLM2 state per continuation was 44 MB); ``cache`` then comes back holding the prompt.
    Any other cache gives every batch but the last a deep copy, and the last batch extends ``cache``
    in place: pass a copy to keep it. Either way each batch reads the same values, so the log-probs are
    the same bits (tests/models/test_shared_prompt.py).
    """
    torch = kernel.torch
    if any(not c for c in continuations):
        raise ValueError("an empty continuation: nothing to score")
    firsts = torch.tensor([c[0] for c in continuations], dtype=torch.long)
    first_lp = kernel.logprobs_at(last, firsts).cpu().tolist()
    token_lps: list[list[float]] = [[lp] for lp in first_lp]
    multi = [(index, c) for index, c in enumerate(continuations) if len(c) > 1]
    width = max((len(c) - 1 for _, c in multi), default=0)
    per_pass = max(1, kv_tokens // (prompt_len + width)) if multi else 1
    if max_rows is not None:
        per_pass = min(per_pass, max_rows)
    groups = [multi[start : start + per_pass] for start in range(0, len(multi), per_pass)]
    # The prompt's own tensors, put back after each group (see the docstring); None: copy instead.
    prompt_tensors = [(x.keys, x.values) for x in cache.layers] if groups and croppable(cache) else None
    for n, group in enumerate(groups):
        if prompt_tensors is not None:
            group_cache = cache
        else:
            # forward() extends the cache in place: every group but the last gets a copy.
            group_cache = cache if n == len(groups) - 1 else copy.deepcopy(cache)
        if len(group) > 1:
            group_cache.batch_repeat_interleave(len(group))
        # Padded to this group's widest continuation: a continuation run alone is never padded.
        group_width = max(len(c) - 1 for _, c in group)
        batch = torch.full((len(group), group_width), pad_id, dtype=torch.long)
        for row, (_, c) in enumerate(group):
            batch[row, : len(c) - 1] = torch.tensor(list(c[:-1]), dtype=torch.long)
        states, _ = kernel.forward(batch, group_cache)
        rows = torch.cat([states[row, : len(c) - 1] for row, (_, c) in enumerate(group)])
        targets = torch.tensor([t for _, c in group for t in c[1:]], dtype=torch.long)
        flat = kernel.target_logprobs(rows, targets).cpu().tolist()
        if prompt_tensors is not None:
            for layer, (keys, values) in zip(cache.layers, prompt_tensors, strict=True):
                layer.keys, layer.values = keys, values
        pos = 0
        for index, c in group:
            token_lps[index].extend(flat[pos : pos + len(c) - 1])
            pos += len(c) - 1
    return token_lps
