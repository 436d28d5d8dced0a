"""Choice scoring for the transformers backend: one prompt pass serves every choice of a request.

Each choice is tokenized jointly with the prompt, as ``score`` does. When its tokens extend the
prompt's own tokens (the usual case, a choice starting with a space), the prompt runs once: the LM head
runs on its last position only, which scores the first token of every choice, and the other choice
tokens go through one batched pass over the prompt's KV state. A choice that merges with the end of the
prompt is scored by the packed ``score`` path.

With ``shared_prefix`` set, and when the prefix's tokens are the leading tokens of the prompt's, the
prefix always runs as its own pass and the rest of the prompt on top of it. The prefix's KV state is
kept in the model's prompt cache (:mod:`~ragsense.models._hf_prompt_cache`, bounded by
``prompt_cache_tokens`` together with the contexts ``score`` keeps; with the cache off every call runs
the prefix again). The computation is the same whether the cache was warm or not, and every request is
computed alone, so results are bit-identical whatever the call history or the other requests of the call.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsense.models._hf_scoring import Encoded, PackedScorer, each_once
from ragsense.models._hf_shared import continuations_on_state, prompt_state
from ragsense.models._interface import ChoiceRequest, ScoreRequest

# Cached tokens one batched choice pass may hold once the prompt's KV state is expanded to the batch
# (choices x prompt length): bounds memory when a long prompt has many multi-token choices.
CHOICE_KV_TOKENS = 16384


class ChoicePlan:
    """One tokenized choice request.

    ``prompt_ids`` is the prompt tokenized as :class:`ScoreRequest` tokenizes text (special tokens
    added); ``prefix`` is the number of its leading tokens that form the shared prefix (0: none).
    ``fast`` holds the choices whose joint tokenization extends ``prompt_ids`` (index, choice token
    ids), scored on the prompt's KV state; ``slow`` the others (boundary merges), scored through the
    packed ``score`` path.
    """

    __slots__ = ("fast", "n_choices", "prefix", "prompt_ids", "slow")

    def __init__(
        self,
        prompt_ids: list[int],
        prefix: int,
        fast: list[tuple[int, list[int]]],
        slow: list[tuple[int, Encoded]],
        n_choices: int,
    ) -> None:
        self.prompt_ids = prompt_ids
        self.prefix = prefix
        self.fast = fast
        self.slow = slow
        self.n_choices = n_choices


class ChoiceScorer:
    """The ``score_choices`` path of one loaded model; shared prefixes use the model's prompt cache."""

    def __init__(self, scorer: PackedScorer) -> None:
        self.scorer = scorer
        self.kernel = scorer.kernel

    def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        """The summed log-probability of each choice, per request (identical requests once)."""
        return each_once(requests, self.plan, self.run)

    def plan(self, req: ChoiceRequest) -> ChoicePlan:
        if not req.choices:
            raise ValueError("ChoiceRequest has no choices: give at least one")
        if any(not choice for choice in req.choices):
            raise ValueError("ChoiceRequest has an empty choice: nothing to score")
        tok = self.scorer.tokenizer
        prompt_ids: list[int] = list(tok(req.prompt, add_special_tokens=True)["input_ids"])
        fast: list[tuple[int, list[int]]] = []
        slow: list[tuple[int, Encoded]] = []
        for index, choice in enumerate(req.choices):
            # The ScoreRequest tokenization (raises for a context-window overflow, or an empty prompt
            # without BOS); its continuation tokens are exactly what score() would score.
            enc = self.scorer.encode(ScoreRequest(req.prompt, choice))
            if enc.first == len(prompt_ids) and enc.ids[: enc.first] == prompt_ids:
                fast.append((index, enc.ids[enc.first :]))
            else:
                slow.append((index, enc))
        prefix = 0
        if req.shared_prefix > 0 and fast:
            prefix_ids: list[int] = list(
                tok(req.prompt[: req.shared_prefix], add_special_tokens=True)["input_ids"]
            )
            if 0 < len(prefix_ids) <= len(prompt_ids) and prompt_ids[: len(prefix_ids)] == prefix_ids:
                prefix = len(prefix_ids)
        return ChoicePlan(prompt_ids, prefix, fast, slow, len(req.choices))

    def run(self, plan: ChoicePlan) -> tuple[float, ...]:
        kernel = self.kernel
        torch = kernel.torch
        totals: list[float] = [0.0] * plan.n_choices
        for index, enc in plan.slow:
            [score] = self.scorer.score_encoded([enc])
            totals[index] = float(sum(score.logprobs))
        if not plan.fast:
            return tuple(totals)
        ids = plan.prompt_ids
        with torch.inference_mode():
            # 1. The prompt: one pass (or the shared prefix's pass, then the rest on a copy of its cache).
            if plan.prefix:
                # The model's prompt cache (a copy, the caller's to extend), or a fresh pass.
                cache, prefix_last = self.scorer.prompt_state(tuple(ids[: plan.prefix]))
                rest = ids[plan.prefix :]
                if rest:
                    states, cache = kernel.forward(torch.tensor([rest], dtype=torch.long), cache)
                    last = states[0, -1:]
                else:
                    last = prefix_last
            else:
                cache, last = prompt_state(kernel, ids)
            # 2. Every choice's tokens on the prompt's KV state.
            per_choice = continuations_on_state(
                kernel,
                cache,
                last,
                len(ids),
                [c for _, c in plan.fast],
                pad_id=self.scorer.pad_id,
                kv_tokens=CHOICE_KV_TOKENS,
            )
        token_lps = {index: lps for (index, _), lps in zip(plan.fast, per_choice, strict=True)}
        for index, lps in token_lps.items():
            totals[index] = float(sum(lps))
        return tuple(totals)
