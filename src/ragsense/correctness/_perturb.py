"""Perturbing the context with a perturbation model (PM), the paper's Section 3.2-3.3.

*Where*: ``entropy`` picks the context tokens the PM finds least likely (highest NLL given the text to
their left: "the most confusing"); ``random`` picks them with a seeded generator. *How*: ``single_shot``
picks all K positions from one PM pass and fills them from that pass; ``iterative`` replaces one token at
a time and re-scores before choosing the next. *Fill*: a causal PM cannot see a masked token's right-hand
side, so ``left`` takes the PM's most likely token given the left context, excluding the original token
(the minimum the method needs); ``infill`` takes the PM's top candidates from the left context and keeps
the one that also makes the next few tokens most likely (``log p(candidate | left) + sum log p(right |
left, candidate)``): an infilling score that reads both sides.

Speed: the PM's key/value cache is kept per position. An iterative step re-runs the body only from the
changed token on (the prefix is reused); with ``rescore_window`` set, only that many tokens after the
change are re-scored, and the NLL of tokens further right keeps its earlier value until a later step
reaches it. ``rescore_window=None`` re-scores to the end of the context (exact, slower). A pick right of
the re-scored window first needs the body caught up to it, so that its fill reads every earlier
replacement; ``catch_up=False`` skips that pass and fills it from the states of the last pass that
reached it (stale by the replacements further left, as the NLL beyond the window already is): one
short model call per step instead of one that runs on to the next pick. benchmarks/perturb_window.py
measures what either approximation changes against exact mode.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from ragsense.errors import CapabilityError, InputError, ParameterError
from ragsense.models import LanguageModel, SupportsTokenAccess

if TYPE_CHECKING:
    import torch

Where = Literal["entropy", "random"]
How = Literal["iterative", "single_shot"]
Fill = Literal["left", "infill"]


@dataclass(frozen=True)
class PerturbationSettings:
    """How the context is perturbed. The defaults are the paper's standard setting (15 perturbations,
    iterative, entropy-based) with the left-context fill (the infilling fill costs one more PM pass
    per perturbation; docs/correctness.md compares the two).

    >>> PerturbationSettings(k=5, how="single_shot").label
    'SS-EN k=5 fill=left'
    >>> PerturbationSettings(k=0)
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: k: the number of perturbations must be at least 1, got 0
    """

    k: int = 15
    where: Where = "entropy"
    how: How = "iterative"
    fill: Fill = "left"
    infill_candidates: int = 4
    infill_right_tokens: int = 4
    rescore_window: int | None = 16
    catch_up: bool = True
    max_context_tokens: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ParameterError(
                f"the number of perturbations must be at least 1, got {self.k}", parameter="k"
            )
        for name, allowed in (
            ("where", ("entropy", "random")),
            ("how", ("iterative", "single_shot")),
            ("fill", ("left", "infill")),
        ):
            if getattr(self, name) not in allowed:
                raise ParameterError(
                    f"must be one of {', '.join(allowed)}, got {getattr(self, name)!r}", parameter=name
                )
        for name in ("infill_candidates", "infill_right_tokens", "max_context_tokens"):
            if getattr(self, name) < 1:
                raise ParameterError(f"must be at least 1, got {getattr(self, name)}", parameter=name)
        if self.rescore_window is not None and self.rescore_window < 1:
            raise ParameterError(
                f"must be at least 1 or None, got {self.rescore_window}", parameter="rescore_window"
            )

    @property
    def label(self) -> str:
        """The paper's short name of the setting (IT/SS, EN/RD) with K and the fill."""
        how = "IT" if self.how == "iterative" else "SS"
        where = "EN" if self.where == "entropy" else "RD"
        return f"{how}-{where} k={self.k} fill={self.fill}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerturbationSettings:
        return cls(**data)

    @property
    def key(self) -> str:
        """A stable string for cache keys. ``catch_up`` is left out at its default, so that caches
        written before the setting existed stay valid."""
        data = self.to_dict()
        if data["catch_up"]:
            del data["catch_up"]
        return json.dumps(data, sort_keys=True)


@dataclass(frozen=True)
class Replacement:
    """One perturbed token: its index in the PM's tokenization of the context (special tokens
    excluded), the original and new token strings, and the PM's NLL of the original when it was
    picked (``None`` for random picks)."""

    position: int
    original: str
    replacement: str
    nll: float | None


@dataclass(frozen=True)
class PerturbedContext:
    """The perturbed context text, what changed, and whether the PM saw only a prefix of the context
    (``truncated``: the tokens past ``max_context_tokens`` are kept verbatim and never perturbed)."""

    text: str
    replacements: tuple[Replacement, ...]
    n_tokens: int
    truncated: bool

    def to_record(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "n_tokens": self.n_tokens,
            "truncated": self.truncated,
            "replacements": [asdict(r) for r in self.replacements],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PerturbedContext:
        return cls(
            text=record["text"],
            n_tokens=record["n_tokens"],
            truncated=record["truncated"],
            replacements=tuple(Replacement(**r) for r in record["replacements"]),
        )


class Perturber:
    """Perturbs contexts with a local transformers PM. Deterministic: the same context, PM and settings
    give the same perturbed text (random picks are seeded by ``settings.seed`` and the context).

    The PM can be any causal LM, of the base model's family or not: it only rewrites text.
    """

    def __init__(self, model: LanguageModel, settings: PerturbationSettings | None = None) -> None:
        if not isinstance(model, SupportsTokenAccess):
            raise CapabilityError(
                "the perturbation model needs token-level access (SupportsTokenAccess: key/value cache, "
                f"logits over the vocabulary): use a local transformers model, not {model.info.name!r} "
                f"({model.info.backend} backend)"
            )
        self.model: SupportsTokenAccess = model
        self.settings = settings or PerturbationSettings()
        self._special = sorted(set(model.tokenizer.all_special_ids))

    def perturb(self, context: str) -> PerturbedContext:
        """Perturb ``context``; raises :class:`InputError` (field ``contexts``) when it is empty or has
        fewer perturbable tokens than ``k``."""
        import torch

        if not context.strip():
            raise InputError("the context is empty: there is nothing to perturb", field="contexts")
        run = _Run(self, context)
        with torch.inference_mode():
            return run.perturb()


class _Run:
    """The state of one context's perturbation: token ids, per-position output states and KV cache."""

    def __init__(self, perturber: Perturber, context: str) -> None:
        self.model = perturber.model
        self.settings = perturber.settings
        self.special = perturber._special
        tok = self.model.tokenizer
        enc = tok(context, add_special_tokens=True, return_offsets_mapping=True)
        ids: list[int] = list(enc["input_ids"])
        offsets = [tuple(o) for o in enc["offset_mapping"]]
        special = set(self.special)
        self.lead = 0
        while self.lead < len(ids) and ids[self.lead] in special:
            self.lead += 1
        limit = self.lead + self.settings.max_context_tokens
        self.tail = ""
        self.truncated = False
        if len(ids) > limit:
            self.truncated = True
            self.tail = context[offsets[limit][0] :]
            ids = ids[:limit]
        # Drop special tokens the tokenizer appends (EOS): they are not context text.
        while len(ids) > self.lead and ids[-1] in special:
            ids.pop()
        self.ids = ids
        self.context = context
        # Position 0 has no left context, so it can be neither scored nor filled.
        self.candidates = [p for p in range(max(1, self.lead), len(ids)) if ids[p] not in special]
        k = self.settings.k
        if len(self.candidates) < k:
            raise InputError(
                f"the context has {len(self.candidates)} perturbable tokens under {self.model.info.name}, "
                f"fewer than the {k} perturbations asked for (lower k)",
                field="contexts",
            )
        # Filled by the first pass over the whole context (_run_body(0, n)).
        self.states: Any = None
        self.kv: list[tuple[Any, Any]] = []
        digest = hashlib.sha256(context.encode()).hexdigest()
        self.rng = random.Random(f"{self.settings.seed}:{digest}")

    # -- the body, with a per-position KV cache ---------------------------------------------------
    def _run_body(self, start: int, end: int) -> None:
        """Recompute output states and KV entries for positions ``[start, end)`` from the current ids,
        reusing the cache of ``[0, start)``."""
        import torch
        from transformers import DynamicCache

        cache: Any
        if start == 0:
            cache = DynamicCache()
        else:
            cache = DynamicCache(ddp_cache_data=[(k[:, :, :start], v[:, :, :start]) for k, v in self.kv])
        ids = torch.tensor([self.ids[start:end]], dtype=torch.long)
        states, cache = self.model.forward_hidden(ids, cache)
        if start == 0:
            self.states = states[0].clone()
            self.kv = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
            return
        self.states[start:end] = states[0]
        for (k, v), layer in zip(self.kv, cache.layers, strict=True):
            k[:, :, start:end] = layer.keys[:, :, start:end]
            v[:, :, start:end] = layer.values[:, :, start:end]

    def _nll(self, positions: list[int]) -> dict[int, float]:
        """The PM's NLL of the current token at each position, from the (current) states to its left."""
        import torch

        if not positions:
            return {}
        rows = self.states[[p - 1 for p in positions]]
        targets = torch.tensor([self.ids[p] for p in positions], dtype=torch.long)
        lp = self.model.token_logprobs(rows, targets).cpu().tolist()
        return {p: -float(v) for p, v in zip(positions, lp, strict=True)}

    # -- fills --------------------------------------------------------------------------------------
    def _fill(self, p: int) -> int:
        """The replacement for position ``p``; needs fresh states at ``p - 1`` and KV for ``[0, p)``."""
        import torch

        logprobs = self.model.next_token_logprobs(self.states[p - 1 : p])
        banned = torch.tensor([*self.special, self.ids[p]], dtype=torch.long, device=logprobs.device)
        logprobs[banned] = float("-inf")
        right = self.ids[p + 1 : p + 1 + self.settings.infill_right_tokens]
        if self.settings.fill == "left" or not right:
            return int(torch.argmax(logprobs))
        m = self.settings.infill_candidates
        top = torch.topk(logprobs, m)
        candidates: list[int] = top.indices.tolist()
        return candidates[int(torch.argmax(top.values.cpu() + self._right_logprob(p, candidates, right)))]

    def _right_logprob(self, p: int, candidates: list[int], right: list[int]) -> torch.Tensor:
        """``sum log p(right | left, candidate)`` for each candidate, in one batched pass on the cache."""
        import torch
        from transformers import DynamicCache

        m = len(candidates)
        cache = DynamicCache(
            ddp_cache_data=[
                (k[:, :, :p].expand(m, -1, -1, -1), v[:, :, :p].expand(m, -1, -1, -1)) for k, v in self.kv
            ]
        )
        ids = torch.tensor([[c, *right[:-1]] for c in candidates], dtype=torch.long)
        states, _ = self.model.forward_hidden(ids, cache)
        targets = torch.tensor(right * m, dtype=torch.long)
        lp: torch.Tensor = self.model.token_logprobs(states.reshape(-1, states.shape[-1]), targets)
        return lp.reshape(m, len(right)).sum(dim=1).cpu()

    # -- the two procedures ---------------------------------------------------------------------------
    def perturb(self) -> PerturbedContext:
        settings = self.settings
        tok = self.model.tokenizer
        original = list(self.ids)
        n = len(self.ids)
        self._run_body(0, n)
        nll: dict[int, float] = {}
        if settings.where == "entropy":
            nll = self._nll(self.candidates)
        picks: list[tuple[int, float | None]] = []
        if settings.how == "single_shot":
            if settings.where == "entropy":
                ranked = sorted(self.candidates, key=lambda p: (-nll[p], p))[: settings.k]
                picks = [(p, nll[p]) for p in sorted(ranked)]
            else:
                picks = [(p, None) for p in sorted(self.rng.sample(self.candidates, settings.k))]
            # Every fill reads the original context: all K are chosen and filled from one pass.
            fills = [self._fill(p) for p, _ in picks]
            for (p, _), new in zip(picks, fills, strict=True):
                self.ids[p] = new
        else:
            self._iterate(picks, nll, n)
        replacements = tuple(
            Replacement(
                position=p - self.lead,
                original=str(tok.convert_ids_to_tokens(original[p])),
                replacement=str(tok.convert_ids_to_tokens(self.ids[p])),
                nll=None if score is None else round(score, 6),
            )
            for p, score in sorted(picks)
        )
        body = tok.decode(self.ids[self.lead :], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return PerturbedContext(
            text=body + self.tail,
            replacements=replacements,
            n_tokens=n - self.lead,
            truncated=self.truncated,
        )

    def _iterate(self, picks: list[tuple[int, float | None]], nll: dict[int, float], n: int) -> None:
        settings = self.settings
        valid_end = n  # states and KV are current for positions [0, valid_end)
        order = sorted(self.rng.sample(self.candidates, settings.k)) if settings.where == "random" else []
        done: set[int] = set()
        for step in range(settings.k):
            if settings.where == "entropy":
                p = min((q for q in self.candidates if q not in done), key=lambda q: (-nll[q], q))
                picks.append((p, nll[p]))
            else:
                # Left to right, so each fill sees every earlier replacement with one incremental pass.
                p = order[step]
                picks.append((p, None))
            if p > valid_end and settings.catch_up:
                self._run_body(valid_end, p)
                valid_end = p
            self.ids[p] = self._fill(p)
            done.add(p)
            if settings.where == "random":
                valid_end = p  # states from p on are stale; the next step catches up from here
                continue
            end = n if settings.rescore_window is None else min(n, p + 1 + settings.rescore_window)
            self._run_body(p, end)
            valid_end = end
            nll.update(self._nll([q for q in range(p + 1, min(end + 1, n)) if q not in done and q in nll]))
