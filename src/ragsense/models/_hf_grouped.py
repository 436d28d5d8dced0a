"""Group scoring for the transformers backend: the requests of a :class:`ScoreGroup` in one pass.

The binding check (issue 46) scores, for one answer, the answer itself and a few variants, each
after the row's prompt and the answer's text up to the variant's first change. Scored one request at
a time on a CPU, every variant is its own body call, and a call over a few tokens costs about what one
over fifty more does: it reads every weight (docs/speed.md, "Binding check on a CPU"). Here a group
costs one call after its prompt, however many requests it holds:

1. **The group's prompt**, from the prompt cache when a call before left its state there, else one
   pass in its segments (``splits``, as ``score`` runs it, so a cache hit and a miss give the same
   state), then kept there.
2. **One packed pass** on that state. Each request's tokens after the group's prompt are its *part*
   (the rest of its prompt: the answer before the change) and its continuation. One request
   *leads* (the answer itself, whose text every variant's part is a leading part of): its tokens
   (but the last) run first, causally, as the *run*. Every other request whose part is a leading
   part of the run follows as a block of its continuation
   (but the last token): a 4-D attention mask lets the block read the prompt, the run up to its
   part's end (by causal attention the run's states there are those after its part alone) and
   itself, and its position ids carry on from its part's end. A continuation's first token is read
   at its part's end. No padding, no copy of the prompt's keys and values per request.

Requests whose tokens do not extend the group prompt's tokens (a join inside a word) are scored
alone by the packed ``score`` path, as choice scoring does; requests whose parts do not lead the
run form chains of their own, one pass each. A model whose cache does not keep every position (a
sliding window, Gemma 3), or that does not honour a 4-D mask (checked once, on a probe, against the
per-part route), or a chain over :data:`MAX_PACKED_TOKENS`, takes the per-part route: each part on a
copy of the prompt's state, its continuations in one right-padded batch on it.

Exactness: the pass's shapes differ from a lone ``score``'s, so the summation order does, and a
request's log-probs differ from a lone ``score`` of it by about 1e-5 (tests/models/test_grouped.py).
The plan depends on the group alone (its requests, in their order), so the same group gives the same
bits whatever else the call holds, the call history or the prompt cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ragsense.models._hf_scoring import Encoded, PackedScorer, each_once, score_of
from ragsense.models._hf_shared import SCORE_KV_TOKENS, continuations_on_state, prompt_state
from ragsense.models._interface import ContinuationScore, ScoreGroup, ScoreRequest

# Tokens one packed pass may hold (a chain's run and its blocks); a longer chain takes the per-part
# route. The pass's mask has tokens x (prompt + tokens) entries.
MAX_PACKED_TOKENS = 2048
# Largest difference in a log-probability the mask probe accepts between the packed pass and the
# per-part route (the summation order alone moves them by about 1e-5).
PROBE_TOLERANCE = 1e-3
_PROBE_PROMPT = "The bridge was opened in 1932 and rebuilt after the flood."
_PROBE_REQUESTS = (("", " It was closed in 1950 for repairs."), (" It was", " rebuilt twice."), ("", " Yes."))

State = Callable[[], tuple[Any, Any]]  # a fresh (KV cache, last state) of the group's prompt


class GroupPlan:
    """One tokenized group: the prompt's ids and cuts, the indices of the requests whose tokens extend
    them, in chains (each led by the request whose run the others' parts lead), and the others
    (``alone``)."""

    __slots__ = ("alone", "chains", "encoded", "prompt_cuts", "prompt_ids")

    def __init__(
        self,
        encoded: list[Encoded],
        prompt_ids: tuple[int, ...],
        prompt_cuts: tuple[int, ...],
        chains: list[list[int]],
        alone: list[int],
    ) -> None:
        self.encoded = encoded
        self.prompt_ids = prompt_ids
        self.prompt_cuts = prompt_cuts
        self.chains = chains
        self.alone = alone

    def part(self, index: int) -> list[int]:
        """Request ``index``'s tokens between the group's prompt and its continuation."""
        e = self.encoded[index]
        return e.ids[len(self.prompt_ids) : e.first]

    def continuation(self, index: int) -> list[int]:
        e = self.encoded[index]
        return e.ids[e.first :]

    def run(self, chain: Sequence[int]) -> list[int]:
        """The tokens the chain's pass runs first: its leader's after the prompt, but the last."""
        return self.encoded[chain[0]].ids[len(self.prompt_ids) : -1]

    def packed_tokens(self, chain: Sequence[int]) -> int:
        """Tokens in the chain's packed pass: the run, then each other request's block."""
        run = self.run(chain)
        blocks = [self.continuation(i) for i in chain if not _in_run(self.part(i), self.continuation(i), run)]
        return len(run) + sum(len(c) - 1 for c in blocks)


def _in_run(part: Sequence[int], continuation: Sequence[int], run: Sequence[int]) -> bool:
    """Whether a request's tokens (but its last) lie in the run: its states are the run's."""
    whole = [*part, *continuation[:-1]]
    return list(run[: len(whole)]) == whole


def group_plan(encoded: list[Encoded], prompt_ids: tuple[int, ...], cuts: tuple[int, ...]) -> GroupPlan:
    """Chains of the requests (``encoded``) that extend ``prompt_ids``. Each chain is led by the
    request whose run the most of the others' parts lead (ties: more tokens, then the earlier
    request), and holds those; the rest form further chains the same way."""
    n = len(prompt_ids)
    fits = [0 < n <= e.first and tuple(e.ids[:n]) == prompt_ids for e in encoded]
    alone = [i for i, ok in enumerate(fits) if not ok]
    left = [i for i, ok in enumerate(fits) if ok]
    parts = {i: encoded[i].ids[n : encoded[i].first] for i in left}

    def led_by(leader: int) -> list[int]:
        run = encoded[leader].ids[n:-1]
        return [i for i in left if len(parts[i]) <= len(run) and run[: len(parts[i])] == parts[i]]

    chains: list[list[int]] = []
    while left:
        leader = min(left, key=lambda i: (-len(led_by(i)), -len(encoded[i].ids), i))
        members = led_by(leader)
        chains.append([leader, *(i for i in members if i != leader)])
        left = [i for i in left if i not in members]  # the leader leads itself
    return GroupPlan(encoded, prompt_ids, cuts, chains, alone)


class GroupScorer:
    """The ``score_groups`` path of one loaded model (see the module docstring)."""

    def __init__(self, scorer: PackedScorer) -> None:
        self.scorer = scorer
        self.kernel = scorer.kernel
        self._masks_honoured: bool | None = None  # learned once, on the probe

    def score_groups(self, groups: Sequence[ScoreGroup]) -> list[list[ContinuationScore]]:
        """Each group's scores, in request order (identical groups once)."""
        return each_once(groups, self.plan, self.run)

    def plan(self, group: ScoreGroup) -> GroupPlan:
        encoded = [self.scorer.encode(req) for req in group.requests]
        if not encoded:
            return GroupPlan([], (), (), [], [])
        first = group.requests[0]
        rest = first.prompt[len(group.prompt) :] + first.continuation
        prompt_enc = self.scorer.encode(ScoreRequest(group.prompt, rest, group.splits))
        return group_plan(encoded, tuple(prompt_enc.ids[: prompt_enc.first]), prompt_enc.cuts)

    def run(self, plan: GroupPlan) -> list[ContinuationScore]:
        out: list[ContinuationScore | None] = [None] * len(plan.encoded)
        for i in plan.alone:
            [out[i]] = self.scorer.score_encoded([plan.encoded[i]])

        def state() -> tuple[Any, Any]:
            return self.scorer.prompt_state(plan.prompt_ids, plan.prompt_cuts)

        with self.kernel.torch.inference_mode():
            for chain in plan.chains:
                if plan.packed_tokens(chain) <= MAX_PACKED_TOKENS and self.packs():
                    found = self._packed(plan, chain, state)
                else:
                    found = self._parts(plan, chain, state)
                for i, logprobs in zip(chain, found, strict=True):
                    out[i] = score_of(plan.encoded[i], logprobs)
        return [o for o in out if o is not None]

    def packs(self) -> bool:
        """Whether chains run as one packed pass: the model's cache keeps every position and the model
        honours a 4-D mask (a probe's packed log-probs within :data:`PROBE_TOLERANCE` of the per-part
        route's; checked once)."""
        if self._masks_honoured is None:
            self._masks_honoured = self.scorer.can_batch_prompts() and self._probe()
        return self._masks_honoured

    def _probe(self) -> bool:
        requests = tuple(ScoreRequest(_PROBE_PROMPT + part, c) for part, c in _PROBE_REQUESTS)
        encoded = [self.scorer.encode(r) for r in requests]
        prompt_enc = self.scorer.encode(ScoreRequest(_PROBE_PROMPT, requests[0].continuation))
        plan = group_plan(encoded, tuple(prompt_enc.ids[: prompt_enc.first]), ())
        if plan.alone or len(plan.chains) != 1:
            return False  # a tokenizer that merges across the probe's joins: nothing to compare

        def state() -> tuple[Any, Any]:
            return prompt_state(self.kernel, plan.prompt_ids)

        with self.kernel.torch.inference_mode():
            packed = self._packed(plan, plan.chains[0], state)
            per_part = self._parts(plan, plan.chains[0], state)
        return all(
            abs(a - b) <= PROBE_TOLERANCE
            for p, q in zip(packed, per_part, strict=True)
            for a, b in zip(p, q, strict=True)
        )

    def _packed(self, plan: GroupPlan, chain: list[int], state: State) -> list[list[float]]:
        cache, last = state()
        return packed_logprobs(
            self.kernel, cache, last, plan.run(chain), [(plan.part(i), plan.continuation(i)) for i in chain]
        )

    def _parts(self, plan: GroupPlan, chain: list[int], state: State) -> list[list[float]]:
        """Each part on its own copy of the prompt's state, its continuations in right-padded batches
        on it (the route for caches that cannot be read through a 4-D mask)."""
        kernel = self.kernel
        torch = kernel.torch
        by_part: dict[tuple[int, ...], list[int]] = {}
        for i in chain:
            by_part.setdefault(tuple(plan.part(i)), []).append(i)
        found: dict[int, list[float]] = {}
        for part, members in by_part.items():
            cache, last = state()
            if part:
                states, cache = kernel.forward(torch.tensor([list(part)], dtype=torch.long), cache)
                last = states[0, -1:]
            lps = continuations_on_state(
                kernel,
                cache,
                last,
                len(plan.prompt_ids) + len(part),
                [plan.continuation(i) for i in members],
                pad_id=self.scorer.pad_id,
                kv_tokens=SCORE_KV_TOKENS,
            )
            found.update(zip(members, lps, strict=True))
        return [found[i] for i in chain]


def packed_logprobs(
    kernel: Any,
    cache: Any,
    last: Any,
    run: Sequence[int],
    members: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> list[list[float]]:
    """Per member ``(part, continuation)``, its continuation tokens' log-probabilities after the
    prompt (KV ``cache``, last state ``last``) and its part, in one pass: ``run`` (every part must
    lead it), then a block for each member whose tokens do not lie in the run (see the module
    docstring). ``cache`` is extended by the pass. Call under inference mode."""
    torch = kernel.torch
    device = kernel.device
    n = cache.get_seq_length()
    ids = list(run)
    positions = list(range(n, n + len(run)))
    starts = []  # where each member's continuation inputs are in the pass
    for part, c in members:
        if _in_run(part, c, run):
            starts.append(len(part))
            continue
        starts.append(len(ids))
        ids.extend(c[:-1])
        positions.extend(range(n + len(part), n + len(part) + len(c) - 1))
    total = len(ids)
    states = last[None]  # no token to run: every part empty, every continuation one token
    if total:
        allowed = torch.zeros((total, n + total), dtype=torch.bool)
        allowed[:, :n] = True
        allowed[: len(run), n : n + len(run)] = torch.ones(len(run), len(run)).tril().bool()
        for (part, c), start in zip(members, starts, strict=True):
            k = len(c) - 1
            if start >= len(run) and k:
                allowed[start : start + k, n : n + len(part)] = True
                allowed[start : start + k, n + start : n + start + k] = torch.ones(k, k).tril().bool()
        dtype = kernel.model.dtype
        mask = torch.zeros((1, 1, total, n + total), dtype=dtype)
        mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)
        states, _ = kernel.states(
            torch.tensor([ids], dtype=torch.long, device=device),
            attention_mask=mask.to(device),
            position_ids=torch.tensor([positions], dtype=torch.long, device=device),
            use_cache=True,
            **{kernel.cache_name: cache},
        )
    # A continuation's first token is read at its part's end (the prompt's last state for no part),
    # the others from its inputs' states.
    firsts = torch.stack([last[0] if not part else states[0, len(part) - 1] for part, _ in members])
    later = [s + t for (_, c), s in zip(members, starts, strict=True) for t in range(len(c) - 1)]
    picked = [firsts]
    if later:
        picked.append(states[0].index_select(0, torch.tensor(later, dtype=torch.long, device=device)))
    targets = [c[0] for _, c in members] + [t for _, c in members for t in c[1:]]
    flat = kernel.target_logprobs(torch.cat(picked), torch.tensor(targets, dtype=torch.long, device=device))
    values = flat.cpu().tolist()
    out = [[lp] for lp in values[: len(members)]]
    pos = len(members)
    for lps, (_, c) in zip(out, members, strict=True):
        lps.extend(values[pos : pos + len(c) - 1])
        pos += len(c) - 1
    return out
