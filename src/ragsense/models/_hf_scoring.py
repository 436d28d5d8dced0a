"""Packed scoring for the transformers backend: :class:`ScoreRequest` in, :class:`ContinuationScore` out.

* Requests are tokenized by the :class:`ScoreRequest` contract (:func:`encode`), deduplicated, sorted
  by length and packed into right-padded batches under a padded-token budget, so padding stays small
  and every batch has the same composition for the same input (bit-exact repeats).
* Each batch runs the body once; only the positions whose next token is a continuation token go
  through the head (:class:`~ragsense.models._kernel.LogprobKernel`).
* A request whose prompt has at least :data:`~ragsense.models._hf_shared.MIN_SHARED_PROMPT` tokens
  can run as a prompt pass and a continuation pass on its KV state (:mod:`~ragsense.models._hf_shared`),
  and requests of one call with the same prompt tokens then share the prompt pass: VERA's statements
  after one context, the grounded and the ungrounded answer of one row, several systems' answers to
  one question. With one row per pass (``max_batch_size=1``, the CPU default) every such request takes
  that route and each continuation runs alone, so a request's log-probs never depend on the other
  requests of the call. With batching (GPU) only prompts shared by two or more requests take it, their
  continuations batched; the rest go through the padded batches.
* Prompt states outlive the call in a :class:`~ragsense.models._hf_prompt_cache.PromptStateCache`
  (``prompt_cache_tokens``, an LRU keyed by the exact prompt token ids), so a context that returns in
  a later call (the next chunk, the guard's next batch) is not read again; results are bit-identical
  with the cache on or off, or with ``reuse_prompts=False``, which gives every request its own prompt
  pass on the same route (the baseline of benchmarks/bench_reuse.py).
* A request's :attr:`~ragsense.models.ScoreRequest.splits` (ConSens: after each context document)
  become *cuts*, token positions at least :data:`~ragsense.models._hf_shared.MIN_SEGMENT` tokens apart
  (:func:`cuts_of`), and its prompt pass runs one segment at a time, cache or not. A prompt that is not
  kept whole but whose first segments a kept prompt shares (attribution's leave-one-out prompts and the
  full context's, up to the dropped document) starts from that prompt's state cut there, and the
  results stay bit-identical (benchmarks/bench_prefix_reuse.py, docs/speed.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ragsense.models._hf_batched import continuations_batched, prompt_states, select_rows
from ragsense.models._hf_prompt_cache import PromptStateCache, croppable, private_copy
from ragsense.models._hf_shared import (
    MIN_SEGMENT,
    MIN_SHARED_PROMPT,
    SCORE_KV_TOKENS,
    continuations_on_state,
    prompt_state,
)
from ragsense.models._interface import ContinuationScore, PromptLogprobs, ScoreRequest

if TYPE_CHECKING:
    import torch

    from ragsense.models._kernel import LogprobKernel

Request = TypeVar("Request", bound=Hashable)
Plan = TypeVar("Plan")
Result = TypeVar("Result")


class Encoded:
    """One tokenized request: ids, the index of the first continuation token, its offsets, and the
    token positions where its prompt pass is cut (its declared splits that start a token)."""

    __slots__ = ("cuts", "first", "ids", "offsets", "straddles", "tokens")

    def __init__(
        self,
        ids: list[int],
        first: int,
        offsets: list[tuple[int, int]],
        tokens: list[str],
        straddles: bool,
        cuts: tuple[int, ...] = (),
    ) -> None:
        self.ids = ids
        self.first = first
        self.offsets = offsets
        self.tokens = tokens
        self.straddles = straddles
        self.cuts = cuts

    @property
    def prompt_key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The prompt's ids and cuts: requests with the same key have the same prompt pass."""
        return tuple(self.ids[: self.first]), self.cuts


def encode(tokenizer: Any, req: ScoreRequest, context_window: int) -> Encoded:
    """``req`` tokenized by the :class:`ScoreRequest` contract; :class:`ValueError` for an empty
    continuation, a continuation at position 0, or more tokens than ``context_window``."""
    text = req.prompt + req.continuation
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
    boundary = len(req.prompt)
    special = set(tokenizer.all_special_ids)
    first = next(
        (i for i, (s, e) in enumerate(offsets) if e > boundary and not (ids[i] in special and s == e)),
        len(ids),
    )
    if not req.continuation:
        raise ValueError("empty continuation: nothing to score")
    if first == 0:
        raise ValueError(
            "the continuation starts at the first token and this tokenizer adds no BOS token: "
            "give a non-empty prompt"
        )
    if len(ids) > context_window:
        raise ValueError(
            f"prompt + continuation is {len(ids)} tokens, over the context window of "
            f"{context_window}; truncate the context first"
        )
    cont_offsets = [(max(s - boundary, 0), e - boundary) for s, e in offsets[first:]]
    tokens = tokenizer.convert_ids_to_tokens(ids[first:])
    cuts = cuts_of(req, offsets, first)
    return Encoded(ids, first, cont_offsets, list(tokens), offsets[first][0] < boundary, cuts)


def cuts_of(req: ScoreRequest, offsets: list[tuple[int, int]], first: int) -> tuple[int, ...]:
    """The token positions where ``req``'s prompt pass is cut: its splits that start a token inside
    the prompt, each at least :data:`MIN_SEGMENT` tokens after the previous cut (a segment shorter
    than that costs more than the positions it could save). Each cut depends only on the tokens
    before it, so prompts with the same leading part have the same cuts in it."""
    wanted = set(req.splits)
    cuts: list[int] = []
    for t in range(MIN_SEGMENT, first):
        start, end = offsets[t]
        if start in wanted and start < end and t - (cuts[-1] if cuts else 0) >= MIN_SEGMENT:
            cuts.append(t)
    return tuple(cuts)


def each_once(
    requests: Sequence[Request], plan: Callable[[Request], Plan], run: Callable[[Plan], Result]
) -> list[Result]:
    """``run(plan(request))`` for each request, identical requests once, every request planned
    (tokenized and validated) before the first one runs: a bad request fails the call before any
    forward pass (choice and group scoring)."""
    unique: dict[Request, int] = {}
    for req in requests:
        unique.setdefault(req, len(unique))
    plans = [plan(req) for req in unique]
    results = [run(p) for p in plans]
    return [results[unique[req]] for req in requests]


def plan_batches(lengths: list[int], max_batch_tokens: int, max_batch_size: int) -> list[list[int]]:
    """Indices of ``lengths`` in batches: longest first (ties by position, so the plan depends only on
    the input), a batch closed when its padded tokens or its rows would pass the limits."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and ((len(current) + 1) * width > max_batch_tokens or len(current) >= max_batch_size):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class PackedScorer:
    """The ``score`` path of one loaded model. ``max_batch_tokens`` bounds the padded tokens of one
    forward pass, ``max_batch_size`` its rows. Prompts of at least ``min_shared_prompt`` tokens take
    the prompt + continuation route; with ``reuse_prompts`` requests with the same prompt share its
    pass, within the call and, through ``prompt_cache`` (None: off), across calls."""

    def __init__(
        self,
        kernel: LogprobKernel,
        tokenizer: Any,
        *,
        pad_id: int,
        context_window: int,
        max_batch_tokens: int,
        max_batch_size: int,
        min_shared_prompt: int = MIN_SHARED_PROMPT,
        reuse_prompts: bool = True,
        prompt_cache: PromptStateCache | None = None,
    ) -> None:
        self.kernel = kernel
        self.tokenizer = tokenizer
        self.pad_id = pad_id
        self.context_window = context_window
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.min_shared_prompt = min_shared_prompt
        self.reuse_prompts = reuse_prompts
        self.prompt_cache = prompt_cache if reuse_prompts else None
        # Whether the model's KV cache can hold right-padded rows (learned once, on first use).
        self._batch_prompts: bool | None = None

    def encode(self, req: ScoreRequest) -> Encoded:
        return encode(self.tokenizer, req, self.context_window)

    def batches(self, lengths: list[int]) -> list[list[int]]:
        return plan_batches(lengths, self.max_batch_tokens, self.max_batch_size)

    def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        """Score ``requests`` (identical ones once), in request order."""
        unique: dict[ScoreRequest, int] = {}
        for req in requests:
            unique.setdefault(req, len(unique))
        encoded = [self.encode(req) for req in unique]
        results = self.score_encoded(encoded)
        return [results[unique[req]] for req in requests]

    def score_encoded(self, encoded: list[Encoded]) -> list[ContinuationScore]:
        out: list[ContinuationScore | None] = [None] * len(encoded)
        by_prompt: dict[tuple[tuple[int, ...], tuple[int, ...]] | int, list[int]] = {}
        for i, e in enumerate(encoded):
            if e.first >= self.min_shared_prompt:
                # Without reuse every request is its own group: same route, its own prompt pass.
                key = e.prompt_key if self.reuse_prompts else i
                by_prompt.setdefault(key, []).append(i)
        alone_ok = self.max_batch_size == 1  # one row per pass: the route is the same for every request
        shared = [members for members in by_prompt.values() if len(members) > 1 or alone_ok]
        in_shared = {i for members in shared for i in members}
        if not alone_ok and shared and self.can_batch_prompts():
            # Prompts not kept run together (_hf_batched.py); kept ones go on from their kept state.
            store = self.prompt_cache
            fresh = [m for m in shared if store is None or not store.holds(*encoded[m[0]].prompt_key)]
            groups = [[encoded[i] for i in members] for members in fresh]
            for members, per_member in zip(fresh, self.batched_prompt_logprobs(groups), strict=True):
                for i, lps in zip(members, per_member, strict=True):
                    out[i] = score_of(encoded[i], lps)
            batched = {id(members) for members in fresh}
            shared = [members for members in shared if id(members) not in batched]
        for members in shared:
            items = [encoded[i] for i in members]
            for i, logprobs in zip(members, self.shared_prompt_logprobs(items), strict=True):
                out[i] = score_of(encoded[i], logprobs)
        alone = [i for i in range(len(encoded)) if i not in in_shared]
        for i, score in zip(alone, self._score_padded([encoded[i] for i in alone]), strict=True):
            out[i] = score
        return [o for o in out if o is not None]

    def can_batch_prompts(self) -> bool:
        """Whether several prompts may share one padded prompt pass: the model's KV cache keeps every
        position of every layer (not a sliding window), checked once on a one-token pass."""
        if self._batch_prompts is None:
            torch = self.kernel.torch
            with torch.inference_mode():
                _, cache = self.kernel.forward(torch.tensor([[self.pad_id]], dtype=torch.long))
            self._batch_prompts = croppable(cache)
        return self._batch_prompts

    def batched_prompt_logprobs(self, groups: list[list[Encoded]]) -> list[list[list[float]]]:
        """Per group of requests with the same prompt, their continuation log-probs: the groups'
        prompts in padded batches (by length, under ``max_batch_tokens`` and ``max_batch_size``), the
        continuations on those batches' KV states (:mod:`~ragsense.models._hf_batched`); each prompt's
        state is kept in the prompt cache for later calls."""
        kernel = self.kernel
        torch = kernel.torch
        store = self.prompt_cache
        prompts = [g[0].ids[: g[0].first] for g in groups]
        out: list[list[list[float]]] = [[] for _ in groups]
        kv_tokens = max(SCORE_KV_TOKENS, self.max_batch_tokens)
        with torch.inference_mode():
            for batch in self.batches([len(p) for p in prompts]):
                cache, last, mask = prompt_states(kernel, [prompts[g] for g in batch], self.pad_id)
                if store is not None:
                    for row, g in enumerate(batch):
                        if len(prompts[g]) <= store.max_tokens:
                            kept = select_rows(cache, torch.tensor([row]), len(prompts[g]))
                            ids, cuts = groups[g][0].prompt_key
                            # Not run in segments: no first segments served from it (prefixes=False).
                            store.put(ids, kept, last[row : row + 1].clone(), cuts, prefixes=False)
                items = [(row, e.ids[e.first :]) for row, g in enumerate(batch) for e in groups[g]]
                flat = continuations_batched(
                    kernel,
                    cache,
                    last,
                    mask,
                    items,
                    pad_id=self.pad_id,
                    kv_tokens=kv_tokens,
                    max_rows=self.max_batch_size,
                )
                pos = 0
                for g in batch:
                    out[g] = flat[pos : pos + len(groups[g])]
                    pos += len(groups[g])
        return out

    def shared_prompt_logprobs(self, items: list[Encoded]) -> list[list[float]]:
        """Continuation log-probs of requests whose tokens before ``first`` are the same: the prompt
        once, the continuations on its KV state."""
        kernel = self.kernel
        first = items[0].first
        with kernel.torch.inference_mode():
            cache, last = self.prompt_state(*items[0].prompt_key)
            return continuations_on_state(
                kernel,
                cache,
                last,
                first,
                [e.ids[first:] for e in items],
                pad_id=self.pad_id,
                kv_tokens=SCORE_KV_TOKENS,
                max_rows=self.max_batch_size,
            )

    def prompt_state(self, prompt: tuple[int, ...], cuts: tuple[int, ...] = ()) -> tuple[Any, Any]:
        """``(KV cache, last state)`` after ``prompt`` run in segments cut at ``cuts``, the caller's to
        extend: from the prompt cache when it holds exactly these ids and cuts, else from the segment
        passes, starting after the longest run of first segments a kept prompt shares (then kept
        there). Call under inference mode."""
        store = self.prompt_cache
        start, state = 0, None
        if store is not None:
            hit = store.get(prompt, cuts)
            if hit is not None:
                return hit
            extended = store.get_extended(prompt, cuts) if cuts else None
            if extended is not None:
                # An extension of a kept prompt: run its last segments on that state, keep nothing.
                start, state = extended
                return prompt_state(self.kernel, prompt, cuts, start=start, cache=state)
            prefix = store.get_prefix(prompt, cuts) if cuts else None
            if prefix is not None:
                start, state = prefix
        cache, last = prompt_state(self.kernel, prompt, cuts, start=start, cache=state)
        if store is not None and len(prompt) <= store.max_tokens:
            # The kept copy is never extended (the caller extends its own private copy, which shares
            # the tensors where the layers never write into them); ``last`` is cloned so it does not
            # pin all the states.
            last = last.clone()
            kept = private_copy(cache)
            store.put(prompt, kept, last, cuts, prefixes=croppable(cache))
        return cache, last

    def _score_padded(self, encoded: list[Encoded]) -> list[ContinuationScore]:
        torch = self.kernel.torch
        out: list[ContinuationScore | None] = [None] * len(encoded)
        for batch in self.batches([len(e.ids) for e in encoded]):
            width = max(len(encoded[i].ids) for i in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                seq = encoded[i].ids
                ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                mask[row, : len(seq)] = 1
            logprobs = self.continuation_logprobs(ids, mask, [encoded[i] for i in batch])
            for row, i in enumerate(batch):
                out[i] = score_of(encoded[i], logprobs[row])
        return [o for o in out if o is not None]

    def continuation_logprobs(
        self, ids: torch.Tensor, mask: torch.Tensor, items: list[Encoded]
    ) -> list[list[float]]:
        """One forward pass over a padded batch; each item's continuation log-probs."""
        kernel = self.kernel
        torch = kernel.torch
        ids = ids.to(kernel.device)
        mask = mask.to(kernel.device)
        with torch.inference_mode():
            states, _ = kernel.states(ids, attention_mask=mask)
            rows = torch.cat([states[r, e.first - 1 : len(e.ids) - 1] for r, e in enumerate(items)])
            targets = torch.tensor([t for e in items for t in e.ids[e.first :]], device=kernel.device)
            flat = kernel.target_logprobs(rows, targets).cpu().tolist()
        result: list[list[float]] = []
        pos = 0
        for e in items:
            n = len(e.ids) - e.first
            result.append(flat[pos : pos + n])
            pos += n
        return result


def score_of(e: Encoded, logprobs: list[float]) -> ContinuationScore:
    """The :class:`ContinuationScore` of a tokenized request from its continuation log-probs."""
    return ContinuationScore(
        tokens=tuple(e.tokens),
        offsets=tuple(e.offsets),
        logprobs=tuple(logprobs),
        prompt_tokens=e.first,
        straddles_boundary=e.straddles,
    )


def prompt_logprobs(
    kernel: LogprobKernel, tokenizer: Any, text: str, top: int, context_window: int
) -> PromptLogprobs:
    """Every token of ``text`` scored from one forward pass (see :class:`PromptLogprobs`)."""
    torch = kernel.torch
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets = [(int(s), int(e)) for s, e in enc["offset_mapping"]]
    if not ids:
        raise ValueError("the prompt is empty: nothing to score")
    if len(ids) > context_window:
        raise ValueError(f"the prompt is {len(ids)} tokens, over the context window of {context_window}")
    special = set(tokenizer.all_special_ids)
    lead = 0
    while lead < len(ids) - 1 and ids[lead] in special and offsets[lead][0] == offsets[lead][1]:
        lead += 1
    values: list[float | None] = [None] * len(ids)
    tops: list[dict[str, float] | None] = [None] * len(ids)
    if len(ids) > 1:
        inp = torch.tensor([ids], dtype=torch.long, device=kernel.device)
        with torch.inference_mode():
            states, _ = kernel.states(inp)
            picked, best = kernel.target_logprobs_top(states[0, :-1], inp[0, 1:], top)
        values[1:] = picked.cpu().tolist()
        row = 1
        for chunk_values, chunk_ids in best:
            for vs, ix in zip(chunk_values, chunk_ids, strict=True):
                tops[row] = dict(zip(tokenizer.convert_ids_to_tokens(ix), vs, strict=True))
                row += 1
    return PromptLogprobs(
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids[lead:])),
        logprobs=tuple(values[lead:]),
        offsets=tuple(offsets[lead:]),
        top=tuple(tops[lead:]) if top else None,
    )
