"""The default backend: any causal LM through Hugging Face transformers, on CPU or GPU.

Speed notes (why the code looks the way it does):

* Requests are sorted by length and packed into batches under a padded-token budget, so padding
  stays small and every batch has the same composition for the same input (bit-exact repeats).
* The LM head runs only on the positions whose next token is a continuation token. With Gemma's
  262k-word vocabulary the full-sequence logits would cost more than the transformer body.
* Identical requests inside one call are scored once (the no-context pass of ConSens repeats).
* Choice scoring (label-scoring judges) runs the prompt once and every choice on top of its KV
  state; the KV state of a shared prefix (instructions, few-shot examples) is kept between calls.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsense.errors import BackendUnavailableError, CapabilityError, ModelNotFoundError, ParameterError
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    ScoredGeneration,
    ScoreRequest,
)

if TYPE_CHECKING:
    import torch

_INSTALL_HINT = "pip install 'ragsense[transformers]' (and torch for your platform)"
# Rows of hidden states sent through the LM head at once: bounds the logits buffer
# (rows x vocab x 4 bytes; 128 x 262k x 4 = 134 MB for Gemma).
_HEAD_CHUNK = 128
# Shared-prefix KV states kept between score_choices calls (least recently used goes first).
_PREFIX_CACHE_ENTRIES = 8
# Cached tokens one batched choice pass may hold once the prompt's KV state is expanded to the batch
# (choices x prompt length): bounds memory when a long prompt has many multi-token choices.
_CHOICE_KV_TOKENS = 16384


def _import_torch() -> Any:
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BackendUnavailableError(
            f"the transformers backend needs torch and transformers: {_INSTALL_HINT}"
        ) from exc
    # set_verbosity_error() is unannotated; this is what it does.
    transformers.logging.set_verbosity(logging.ERROR)
    # A progress bar for a sub-second weight load is noise in a CLI table.
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return torch


class _Encoded:
    """One tokenized request: ids, the index of the first continuation token, its offsets."""

    __slots__ = ("first", "ids", "offsets", "straddles", "tokens")

    def __init__(
        self,
        ids: list[int],
        first: int,
        offsets: list[tuple[int, int]],
        tokens: list[str],
        straddles: bool,
    ) -> None:
        self.ids = ids
        self.first = first
        self.offsets = offsets
        self.tokens = tokens
        self.straddles = straddles


class _ChoicePlan:
    """One tokenized choice request.

    ``prompt_ids`` is the prompt tokenized as :class:`ScoreRequest` tokenizes text (special tokens
    added); ``prefix`` is the number of its leading tokens that form the shared prefix (0: none).
    ``fast`` holds the choices whose joint tokenization extends ``prompt_ids`` (index, choice token
    ids), scored on the prompt's KV state; ``slow`` the others (boundary merges), scored through the
    :meth:`TransformersModel.score` path.
    """

    __slots__ = ("fast", "n_choices", "prefix", "prompt_ids", "slow")

    def __init__(
        self,
        prompt_ids: list[int],
        prefix: int,
        fast: list[tuple[int, list[int]]],
        slow: list[tuple[int, _Encoded]],
        n_choices: int,
    ) -> None:
        self.prompt_ids = prompt_ids
        self.prefix = prefix
        self.fast = fast
        self.slow = slow
        self.n_choices = n_choices


class TransformersModel:
    """A causal LM loaded through transformers. Create it with :func:`ragsense.models.load_model`.

    ``max_batch_tokens`` bounds the padded tokens of one forward pass (memory and cache locality).
    """

    # Chat honours GenerationConfig.json_schema (schema-guided decoding), so servers pass it through.
    structured_output = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str,
        fingerprint: str,
        max_batch_tokens: int = 4096,
        max_batch_size: int = 32,
        context_window: int | None = None,
    ) -> None:
        self._torch = _import_torch()
        self._model = model
        self._tokenizer = tokenizer
        self._device = next(model.parameters()).device
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        window = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
        if context_window is not None:
            window = min(window, context_window)
        self._info = ModelInfo(
            name=name,
            backend="transformers",
            context_window=window,
            fingerprint=fingerprint,
            extra={"device": str(self._device), "dtype": str(next(model.parameters()).dtype)},
        )
        self._pad_id = int(
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else (tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0)
        )
        self._softcap = getattr(model.config, "final_logit_softcapping", None)
        self._head_only_ok = self._check_head_shortcut()
        # Shared-prefix token ids -> (KV cache after the prefix, the prefix's last output state).
        self._prefix_cache: OrderedDict[tuple[int, ...], tuple[Any, Any]] = OrderedDict()
        self._prefix_lock = threading.Lock()

    # -- LanguageModel -------------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    async def aclose(self) -> None:
        return None

    # -- SupportsLogprobs ----------------------------------------------------------------------
    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        return self.score_sync(requests)

    def score_sync(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        """Synchronous :meth:`score`, for callers without an event loop."""
        unique: dict[ScoreRequest, int] = {}
        for req in requests:
            unique.setdefault(req, len(unique))
        order = list(unique)
        encoded = [self._encode(req) for req in order]
        results = self._score_encoded(encoded)
        return [results[unique[req]] for req in requests]

    def _encode(self, req: ScoreRequest) -> _Encoded:
        text = req.prompt + req.continuation
        enc = self._tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        ids: list[int] = list(enc["input_ids"])
        offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
        boundary = len(req.prompt)
        special = set(self._tokenizer.all_special_ids)
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
        if len(ids) > self._info.context_window:
            raise ValueError(
                f"prompt + continuation is {len(ids)} tokens, over the context window of "
                f"{self._info.context_window}; truncate the context first"
            )
        cont_offsets = [(max(s - boundary, 0), e - boundary) for s, e in offsets[first:]]
        tokens = self._tokenizer.convert_ids_to_tokens(ids[first:])
        return _Encoded(ids, first, cont_offsets, list(tokens), offsets[first][0] < boundary)

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        # Longest first; ties by original position so the plan depends only on the input.
        order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            width = lengths[current[0]] if current else lengths[i]
            if current and (
                (len(current) + 1) * width > self.max_batch_tokens or len(current) >= self.max_batch_size
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _score_encoded(self, encoded: list[_Encoded]) -> list[ContinuationScore]:
        torch = self._torch
        out: list[ContinuationScore | None] = [None] * len(encoded)
        for batch in self._batches([len(e.ids) for e in encoded]):
            width = max(len(encoded[i].ids) for i in batch)
            ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                seq = encoded[i].ids
                ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                mask[row, : len(seq)] = 1
            logprobs = self._continuation_logprobs(ids, mask, [encoded[i] for i in batch])
            for row, i in enumerate(batch):
                e = encoded[i]
                out[i] = ContinuationScore(
                    tokens=tuple(e.tokens),
                    offsets=tuple(e.offsets),
                    logprobs=tuple(logprobs[row]),
                    prompt_tokens=e.first,
                    straddles_boundary=e.straddles,
                )
        return [o for o in out if o is not None]

    def _continuation_logprobs(
        self, ids: torch.Tensor, mask: torch.Tensor, items: list[_Encoded]
    ) -> list[list[float]]:
        torch = self._torch
        ids = ids.to(self._device)
        mask = mask.to(self._device)
        with torch.inference_mode():
            if self._head_only_ok:
                hidden = self._model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
                rows = torch.cat([hidden[r, e.first - 1 : len(e.ids) - 1] for r, e in enumerate(items)])
                logits_fn = self._head
            else:
                full = self._model(input_ids=ids, attention_mask=mask).logits
                rows = torch.cat([full[r, e.first - 1 : len(e.ids) - 1] for r, e in enumerate(items)])
                logits_fn = None
            targets = torch.tensor([t for e in items for t in e.ids[e.first :]], device=self._device)
            picked = []
            for start in range(0, rows.shape[0], _HEAD_CHUNK):
                chunk = rows[start : start + _HEAD_CHUNK]
                logits = (logits_fn(chunk) if logits_fn else chunk).float()
                target = targets[start : start + _HEAD_CHUNK, None]
                lp = logits.gather(1, target)[:, 0] - torch.logsumexp(logits, dim=-1)
                picked.append(lp)
            flat = torch.cat(picked).cpu().tolist()
        result: list[list[float]] = []
        pos = 0
        for e in items:
            n = len(e.ids) - e.first
            result.append(flat[pos : pos + n])
            pos += n
        return result

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self._model.get_output_embeddings()(hidden)
        if self._softcap:
            logits = self._torch.tanh(logits / self._softcap) * self._softcap
        return logits

    def _check_head_shortcut(self) -> bool:
        """Check once that body + head reproduces the model's own logits (guards odd architectures)."""
        torch = self._torch
        encoded = self._tokenizer("The quick brown fox jumps over the lazy dog.", return_tensors="pt")
        probe = encoded["input_ids"]
        probe = probe.to(self._device)
        try:
            with torch.inference_mode():
                full = self._model(input_ids=probe).logits.float()
                body = self._model.base_model(input_ids=probe).last_hidden_state
                mine = self._head(body).float()
            return bool(torch.allclose(full, mine, atol=1e-4, rtol=1e-4))
        except (AttributeError, TypeError):
            return False

    # -- Token-level access (the correctness perturber) ----------------------------------------
    @property
    def torch_device(self) -> Any:
        return self._device

    def forward_hidden(self, ids: torch.Tensor, cache: Any = None) -> tuple[torch.Tensor, Any]:
        """Run the body on ``ids`` (shape ``[batch, n]``) after an optional KV ``cache``.

        Returns ``(states, cache)``: ``states`` go through :meth:`lm_head` to give logits. They are the
        last hidden states when the head shortcut is valid for this architecture, else the logits
        themselves (and :meth:`lm_head` is then the identity). Call under ``torch.inference_mode()``.
        """
        ids = ids.to(self._device)
        if self._head_only_ok:
            out = self._model.base_model(input_ids=ids, past_key_values=cache, use_cache=True)
            return out.last_hidden_state, out.past_key_values
        out = self._model(input_ids=ids, past_key_values=cache, use_cache=True)
        return out.logits, out.past_key_values

    def lm_head(self, states: torch.Tensor) -> torch.Tensor:
        """float32 logits for states from :meth:`forward_hidden` (softcapping applied)."""
        if self._head_only_ok:
            return self._head(states).float()
        return states.float()

    def token_logprobs(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``log p(targets[i] | states[i])`` for rows of states, in chunks that bound the logits buffer."""
        th = self._torch
        picked = []
        for start in range(0, states.shape[0], _HEAD_CHUNK):
            logits = self.lm_head(states[start : start + _HEAD_CHUNK])
            target = targets[start : start + _HEAD_CHUNK, None].to(logits.device)
            picked.append(logits.gather(1, target)[:, 0] - th.logsumexp(logits, dim=-1))
        result: torch.Tensor = th.cat(picked) if picked else th.zeros(0)
        return result

    # -- SupportsChoiceScoring -----------------------------------------------------------------
    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        return self.score_choices_sync(requests)

    def score_choices_sync(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        """Synchronous :meth:`score_choices`: the summed log-probability of each choice, per request.

        Each choice is tokenized jointly with the prompt, as :meth:`score` does. When its tokens extend
        the prompt's own tokens (the usual case, a choice starting with a space), the prompt runs once:
        the LM head runs on its last position only, which scores the first token of every choice, and
        the other choice tokens go through one batched pass over the prompt's KV state. A choice that
        merges with the end of the prompt is scored by :meth:`score`.

        With ``shared_prefix`` set, and when the prefix's tokens are the leading tokens of the prompt's,
        the prefix always runs as its own pass, with its KV state kept in a small LRU cache, and the rest
        of the prompt on top of it. The computation is the same whether the cache was warm or not, and
        every request is computed alone, so results are bit-identical whatever the call history or the
        other requests of the call.
        """
        unique: dict[ChoiceRequest, int] = {}
        for req in requests:
            unique.setdefault(req, len(unique))
        # Tokenize and validate everything before any forward pass.
        plans = [self._plan_choices(req) for req in unique]
        results = [self._run_choices(plan) for plan in plans]
        return [results[unique[req]] for req in requests]

    def _plan_choices(self, req: ChoiceRequest) -> _ChoicePlan:
        if not req.choices:
            raise ValueError("ChoiceRequest has no choices: give at least one")
        if any(not choice for choice in req.choices):
            raise ValueError("ChoiceRequest has an empty choice: nothing to score")
        tok = self._tokenizer
        prompt_ids: list[int] = list(tok(req.prompt, add_special_tokens=True)["input_ids"])
        fast: list[tuple[int, list[int]]] = []
        slow: list[tuple[int, _Encoded]] = []
        for index, choice in enumerate(req.choices):
            # The ScoreRequest tokenization (raises for a context-window overflow, or an empty prompt
            # without BOS); its continuation tokens are exactly what score() would score.
            enc = self._encode(ScoreRequest(req.prompt, choice))
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
        return _ChoicePlan(prompt_ids, prefix, fast, slow, len(req.choices))

    def _prefix_state(self, prefix_ids: list[int]) -> tuple[Any, Any]:
        """KV cache and last output state of ``prefix_ids``, from the LRU cache or computed (and kept).

        The cached objects are never handed to a forward pass: callers extend a deep copy.
        """
        key = tuple(prefix_ids)
        with self._prefix_lock:
            entry = self._prefix_cache.get(key)
            if entry is not None:
                self._prefix_cache.move_to_end(key)
                return entry
        states, cache = self.forward_hidden(self._torch.tensor([prefix_ids], dtype=self._torch.long))
        entry = (cache, states[0, -1:].clone())
        with self._prefix_lock:
            self._prefix_cache[key] = entry
            self._prefix_cache.move_to_end(key)
            while len(self._prefix_cache) > _PREFIX_CACHE_ENTRIES:
                self._prefix_cache.popitem(last=False)
        return entry

    def _run_choices(self, plan: _ChoicePlan) -> tuple[float, ...]:
        torch = self._torch
        totals: list[float] = [0.0] * plan.n_choices
        for index, enc in plan.slow:
            [score] = self._score_encoded([enc])
            totals[index] = float(sum(score.logprobs))
        if not plan.fast:
            return tuple(totals)
        ids = plan.prompt_ids
        with torch.inference_mode():
            # 1. The prompt: one pass (or the shared prefix's pass, then the rest on a copy of its cache).
            if plan.prefix:
                prefix_cache, prefix_last = self._prefix_state(ids[: plan.prefix])
                cache = copy.deepcopy(prefix_cache)
                rest = ids[plan.prefix :]
                if rest:
                    states, cache = self.forward_hidden(torch.tensor([rest], dtype=torch.long), cache)
                    last = states[0, -1:]
                else:
                    last = prefix_last
            else:
                states, cache = self.forward_hidden(torch.tensor([ids], dtype=torch.long))
                last = states[0, -1:]
            # 2. First choice tokens: the LM head on the prompt's last position only.
            logits = self.lm_head(last)
            firsts = torch.tensor([c[0] for _, c in plan.fast], dtype=torch.long, device=logits.device)
            first_lp = (logits[0, firsts] - torch.logsumexp(logits[0], dim=-1)).cpu().tolist()
            token_lps: dict[int, list[float]] = {
                index: [lp] for (index, _), lp in zip(plan.fast, first_lp, strict=True)
            }
            # 3. Later choice tokens: the multi-token choices as one right-padded batch on the prompt's
            # KV state. Causal attention keeps padding (always to the right) out of the real positions.
            multi = [(index, c) for index, c in plan.fast if len(c) > 1]
            width = max((len(c) - 1 for _, c in multi), default=0)
            per_pass = max(1, _CHOICE_KV_TOKENS // (len(ids) + width)) if multi else 1
            groups = [multi[start : start + per_pass] for start in range(0, len(multi), per_pass)]
            for n, group in enumerate(groups):
                # forward_hidden extends the cache in place: every group but the last gets a copy.
                group_cache = cache if n == len(groups) - 1 else copy.deepcopy(cache)
                if len(group) > 1:
                    group_cache.batch_repeat_interleave(len(group))
                batch = torch.full((len(group), width), self._pad_id, dtype=torch.long)
                for row, (_, c) in enumerate(group):
                    batch[row, : len(c) - 1] = torch.tensor(c[:-1], dtype=torch.long)
                states, _ = self.forward_hidden(batch, group_cache)
                rows = torch.cat([states[row, : len(c) - 1] for row, (_, c) in enumerate(group)])
                targets = torch.tensor([t for _, c in group for t in c[1:]], dtype=torch.long)
                flat = self.token_logprobs(rows, targets).cpu().tolist()
                pos = 0
                for index, c in group:
                    token_lps[index].extend(flat[pos : pos + len(c) - 1])
                    pos += len(c) - 1
        for index, lps in token_lps.items():
            totals[index] = float(sum(lps))
        return tuple(totals)

    # -- SupportsScoredGeneration --------------------------------------------------------------
    async def generate_scored(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        return self.generate_scored_sync(prompts, config)

    def generate_scored_sync(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        """Greedy decoding, one prompt at a time, reusing the prompt pass for the prompt's log-probs.

        The prompt is tokenized as :meth:`generate_sync` tokenizes it (special tokens added); the LM
        head runs over the prompt once (its log-probs are wanted) and then on one position per step.
        """
        if config.temperature > 0:
            raise ParameterError("scored generation is greedy; use temperature 0", parameter="temperature")
        if config.json_schema is not None:
            raise CapabilityError(
                "scored generation decodes free text and cannot honour GenerationConfig.json_schema; "
                "use generate() or chat() for structured output"
            )
        return [self._generate_scored_one(prompt, config) for prompt in prompts]

    def _generate_scored_one(self, prompt: str, config: GenerationConfig) -> ScoredGeneration:
        torch = self._torch
        tok = self._tokenizer
        enc = tok(prompt, add_special_tokens=True, return_offsets_mapping=True)
        ids: list[int] = list(enc["input_ids"])
        offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
        if len(ids) + config.max_new_tokens > self._info.context_window:
            raise ValueError(
                f"prompt is {len(ids)} tokens; with {config.max_new_tokens} new tokens it is over the "
                f"context window of {self._info.context_window}; truncate the context first"
            )
        eos = tok.eos_token_id
        generated: list[int] = []
        out_lp: list[float] = []
        finish = "length"
        with torch.inference_mode():
            states, cache = self.forward_hidden(torch.tensor([ids], dtype=torch.long))
            targets = torch.tensor(ids[1:], dtype=torch.long)
            prompt_lp = self.token_logprobs(states[0, :-1], targets).cpu().tolist()
            last = states[0, -1:]
            for _ in range(config.max_new_tokens):
                logprobs = torch.log_softmax(self.lm_head(last)[0], dim=-1)
                nxt = int(torch.argmax(logprobs))
                generated.append(nxt)
                out_lp.append(float(logprobs[nxt]))
                if nxt == eos:
                    finish = "stop"
                    break
                if config.stop and any(
                    s in tok.decode(generated, skip_special_tokens=True) for s in config.stop
                ):
                    finish = "stop"
                    break
                states, cache = self.forward_hidden(torch.tensor([[nxt]], dtype=torch.long), cache)
                last = states[0, -1:]
        text = tok.decode(generated, skip_special_tokens=True)
        for stop in config.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        special = set(tok.all_special_ids)
        # Position 0 has no left context: it is scored only when it is a special (BOS) token, i.e. never.
        first = 1
        while first < len(ids) and ids[first] in special and offsets[first][0] == offsets[first][1]:
            first += 1
        prompt_score = ContinuationScore(
            tokens=tuple(tok.convert_ids_to_tokens(ids[first:])),
            offsets=tuple(offsets[first:]),
            logprobs=tuple(prompt_lp[first - 1 :]),
            prompt_tokens=first,
        )
        return ScoredGeneration(
            text=text,
            finish_reason=finish,
            prompt=prompt_score,
            output_tokens=tuple(tok.convert_ids_to_tokens(generated)),
            output_logprobs=tuple(out_lp),
        )

    # -- SupportsGeneration --------------------------------------------------------------------
    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        return self.generate_sync(prompts, config)

    def generate_sync(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        """Greedy (or seeded sampling) generation, batched with left padding. With
        ``config.json_schema`` each reply is decoded under the schema (greedy, see
        :mod:`ragsense.models._structured`), as :meth:`chat_sync` does."""
        if config.json_schema is not None:
            from ragsense.models._structured import generate_structured_sync

            return [generate_structured_sync(self, p, config.json_schema, config) for p in prompts]
        return self._generate_texts(prompts, config, add_special_tokens=True)

    # -- SupportsChat --------------------------------------------------------------------------
    @property
    def chat_available(self) -> bool:
        return bool(getattr(self._tokenizer, "chat_template", None))

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        return self.chat_sync(conversations, config)

    def render_chat(self, conversation: Sequence[ChatMessage]) -> str:
        """The conversation in the model's chat template, ending with the assistant's turn opener."""
        if not self.chat_available:
            raise CapabilityError(f"{self._info.name} has no chat template; use a plain prompt")
        messages = [{"role": m.role, "content": m.content} for m in conversation]
        text = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return str(text)

    def chat_sync(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        """Synchronous :meth:`chat`. The template already holds every special token it needs (BOS
        included), so the rendered text is tokenized without adding any. With ``config.json_schema``
        the reply is decoded under the schema (greedy, see :mod:`ragsense.models._structured`)."""
        if config.json_schema is not None:
            from ragsense.models._structured import generate_structured_sync

            return [
                generate_structured_sync(self, self.render_chat(c), config.json_schema, config)
                for c in conversations
            ]
        prompts = [self.render_chat(c) for c in conversations]
        return self._generate_texts(prompts, config, add_special_tokens=False)

    def _generate_texts(
        self, prompts: Sequence[str], config: GenerationConfig, *, add_special_tokens: bool
    ) -> list[Generation]:
        torch = self._torch
        tok = self._tokenizer
        results: list[Generation | None] = [None] * len(prompts)
        lengths = [len(tok(p, add_special_tokens=add_special_tokens)["input_ids"]) for p in prompts]
        for batch in self._batches([n + config.max_new_tokens for n in lengths]):
            texts = [prompts[i] for i in batch]
            old_side = tok.padding_side
            tok.padding_side = "left"
            if tok.pad_token_id is None:
                tok.pad_token = tok.eos_token
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=add_special_tokens).to(
                self._device
            )
            tok.padding_side = old_side
            kwargs: dict[str, Any] = {"max_new_tokens": config.max_new_tokens, "pad_token_id": self._pad_id}
            if config.stop:
                # Stop decoding as soon as a stop string appears instead of running to max_new_tokens;
                # the text is still cut at the stop string below, so results are the same, only sooner.
                kwargs.update(stop_strings=list(config.stop), tokenizer=tok)
            if config.temperature > 0:
                torch.manual_seed(config.seed)
                kwargs.update(do_sample=True, temperature=config.temperature)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            with torch.inference_mode():
                out = self._model.generate(**enc, **kwargs)
            new = out[:, enc["input_ids"].shape[1] :]
            for row, i in enumerate(batch):
                gen_ids = [t for t in new[row].tolist() if t != self._pad_id]
                text = tok.decode(gen_ids, skip_special_tokens=True)
                finish = "length" if len(gen_ids) >= config.max_new_tokens else "stop"
                for stop in config.stop:
                    cut = text.find(stop)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                results[i] = Generation(text=text, finish_reason=finish, n_tokens=len(gen_ids))
        return [r for r in results if r is not None]


def _fingerprint(path: Path, label: str) -> str:
    config = (path / "config.json").read_bytes() if (path / "config.json").exists() else b""
    weights = sorted(path.glob("*.safetensors"))
    sizes = ",".join(f"{p.name}:{p.stat().st_size}" for p in weights)
    digest = hashlib.sha256(config + sizes.encode()).hexdigest()[:16]
    return f"{label}@{digest}"


def create_transformers_model(
    model_id: str,
    *,
    device: str = "auto",
    dtype: str = "float32",
    threads: int | None = None,
    trust_remote_code: bool = False,
    max_batch_tokens: int = 4096,
    max_batch_size: int | None = None,
    context_window: int | None = None,
    **unused: Any,
) -> TransformersModel:
    """Load ``model_id``: a bundled name, a local directory, or a hub id already in the local cache.

    Never downloads (``local_files_only``) and never runs repository code unless
    ``trust_remote_code=True`` is passed explicitly.

    ``max_batch_size`` defaults to 1 on CPU and 32 on GPU. On CPU a prompt of a few hundred tokens
    already fills the matrix units, so batching buys nothing (measured: 364 tok/s unbatched vs 346
    batched with SmolLM2 on 2 cores), and scoring one sequence at a time makes every score
    independent of what else was in the batch: bit-identical across batch plans, chunking and resumes.
    Pass ``max_batch_size`` to force padded multi-row batches on CPU too (tests/models/
    test_padded_batch.py checks them against single rows).
    """
    if unused:
        raise TypeError(f"unknown options for the transformers backend: {', '.join(sorted(unused))}")
    torch = _import_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragsense.models._bundled import BUNDLED_MODELS, converted_path

    if threads is not None:
        torch.set_num_threads(threads)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = getattr(torch, dtype)
    if model_id in BUNDLED_MODELS:
        path = converted_path(model_id)
        label = model_id
    else:
        path = Path(model_id)
        label = model_id
        if not path.exists():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(path), local_files_only=True, trust_remote_code=trust_remote_code
        )
        model = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch_dtype, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except OSError as exc:
        raise ModelNotFoundError(
            f"cannot load {model_id!r} with transformers: not a local model directory and not in the "
            f"local Hugging Face cache (ragsense never downloads at run time): {exc}"
        ) from exc
    # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as an unbound
    # function (self = the first argument), and leaves eval() unannotated.
    model.to(device)  # type: ignore[arg-type]
    model.eval()  # type: ignore[no-untyped-call]
    if max_batch_size is None:
        max_batch_size = 1 if device == "cpu" else 32
    fingerprint = _fingerprint(path, label) if path.exists() else label
    return TransformersModel(
        model,
        tokenizer,
        name=label,
        fingerprint=fingerprint,
        max_batch_tokens=max_batch_tokens,
        max_batch_size=max_batch_size,
        context_window=context_window,
    )
