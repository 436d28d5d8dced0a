"""Many rows' prompts in one forward pass: the batched prompt route of packed scoring.

With ``max_batch_size > 1`` (the GPU default), requests that share a prompt (ConSens's grounded and
ungrounded answer of one row, its no-context prompt of one question, VERA's statements) used to run
that prompt as a batch-1 pass each, then their continuations on its KV state: on an H200 most of a
row's time was launching the kernels of those small passes (docs/speed.md, "On a GPU"). Here the
prompts of many such groups run together, and then all their continuations:

1. **Prompt pass.** The group prompts are right-padded to the longest and run in one forward with an
   attention mask (:func:`prompt_states`). With causal attention, a real position sees only real
   positions before it, so each prompt's keys, values and last state are those of its own pass, up to
   floating-point summation order.
2. **Continuation pass.** Every continuation of the batch's groups runs on its group's row of that
   KV cache (rows picked with ``index_select``, padded continuations on the right). The prompt's own
   padding sits between its last token and the continuation, so the mask covers prompt (its real
   tokens) + continuation, and the position ids carry on from the prompt's own length.
3. **First tokens.** The first token of each continuation is scored from the last state of its
   prompt, one head pass for the whole batch.

Each prompt's state, cut to its own length, goes into the cross-call prompt cache, so a context that
returns in a later call (the guard's next batch) is served from it on the shared route. Prefix reuse
(a leave-one-out prompt starting from a kept prompt's first documents) does not apply here: it would
run the rest of each prompt as a batch-1 pass again, and a batched pass reads those tokens at a
fraction of the launches.

Exactness: a CPU in float32 gives the unbatched route's scores within 2e-5 in a log-probability
(padding changes the shapes of the matrix products, hence their summation order; measured in
tests/models/test_row_batching.py); the verdicts are the same. Bit-identity is promised only between
two runs of the same computation (same settings, same batch plan, one machine).

Only caches whose layers all keep every position can be batched this way (transformers'
``DynamicLayer``): a sliding-window layer (Gemma 3) keeps the last positions of the padded row. The
scorer checks that once (``PackedScorer.can_batch_prompts``) and otherwise stays on the shared route.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragsense.models._hf_prompt_cache import copy_layers

if TYPE_CHECKING:
    import torch

    from ragsense.models._kernel import LogprobKernel


def select_rows(cache: Any, rows: torch.Tensor, length: int | None = None) -> Any:
    """A copy of ``cache`` holding only batch ``rows`` (a 1-D index tensor) and, with ``length``, only
    its first ``length`` positions (then in tensors of their own, so a kept row does not pin the
    batch's padded width)."""

    def cut(tensor: Any) -> Any:
        picked = tensor.index_select(0, rows.to(tensor.device))
        return picked[..., :length, :].clone() if length is not None else picked

    return copy_layers(cache, cut)


def prompt_states(
    kernel: LogprobKernel, prompts: Sequence[Sequence[int]], pad_id: int
) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """``(KV cache, last states, mask)`` of ``prompts`` right-padded into one forward pass: the cache
    holds every row at the padded width, ``last`` is ``[rows, hidden]`` (each prompt's own last
    position) and ``mask`` is the ``[rows, width]`` attention mask. Call under inference mode."""
    torch = kernel.torch
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, : len(prompt)] = 1
    mask = mask.to(kernel.device)
    states, cache = kernel.states(ids.to(kernel.device), attention_mask=mask, use_cache=True)
    ends = torch.tensor([len(p) - 1 for p in prompts], device=states.device)
    last = states[torch.arange(len(prompts), device=states.device), ends]
    return cache, last, mask


def continuations_batched(
    kernel: LogprobKernel,
    cache: Any,
    last: torch.Tensor,
    mask: torch.Tensor,
    items: Sequence[tuple[int, Sequence[int]]],
    *,
    pad_id: int,
    kv_tokens: int,
    max_rows: int,
) -> list[list[float]]:
    """Per item ``(prompt row, continuation ids)``, the log-probability of each continuation token
    after that row of a :func:`prompt_states` batch. Passes hold at most ``max_rows`` continuations and
    ``kv_tokens`` cached + new positions. Call under inference mode."""
    torch = kernel.torch
    device = last.device
    if any(not c for _, c in items):
        raise ValueError("an empty continuation: nothing to score")
    lengths = mask.sum(dim=1)
    firsts = torch.tensor([c[0] for _, c in items], dtype=torch.long, device=device)
    rows_of = torch.tensor([row for row, _ in items], dtype=torch.long, device=device)
    token_lps: list[list[float]] = [
        [lp] for lp in kernel.target_logprobs(last[rows_of], firsts).cpu().tolist()
    ]
    multi = [(index, row, c) for index, (row, c) in enumerate(items) if len(c) > 1]
    width = mask.shape[1]
    start = 0
    while start < len(multi):
        # As many continuations as the limits allow, at the widest continuation so far.
        end, wide = start, 0
        while end < len(multi) and end - start < max_rows:
            wider = max(wide, len(multi[end][2]) - 1)
            if end > start and (end - start + 1) * (width + wider) > kv_tokens:
                break
            end, wide = end + 1, wider
        group = multi[start:end]
        start = end
        picked = torch.tensor([row for _, row, _ in group], dtype=torch.long, device=device)
        ids = torch.full((len(group), wide), pad_id, dtype=torch.long)
        own = torch.zeros((len(group), wide), dtype=torch.long)
        for r, (_, _, c) in enumerate(group):
            ids[r, : len(c) - 1] = torch.tensor(list(c[:-1]), dtype=torch.long)
            own[r, : len(c) - 1] = 1
        attention = torch.cat([mask.index_select(0, picked), own.to(device)], dim=1)
        positions = lengths.index_select(0, picked)[:, None] + torch.arange(wide, device=device)[None, :]
        states, _ = kernel.states(
            ids.to(device),
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **{kernel.cache_name: select_rows(cache, picked)},
        )
        rows = torch.cat([states[r, : len(c) - 1] for r, (_, _, c) in enumerate(group)])
        targets = torch.tensor([t for _, _, c in group for t in c[1:]], dtype=torch.long, device=device)
        flat = kernel.target_logprobs(rows, targets).cpu().tolist()
        pos = 0
        for index, _, c in group:
            token_lps[index].extend(flat[pos : pos + len(c) - 1])
            pos += len(c) - 1
    return token_lps
