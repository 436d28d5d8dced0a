"""The one log-prob kernel of the local backend: body -> LM head on the needed positions -> log-softmax.

Every log-probability the transformers backend computes goes through :class:`LogprobKernel`: packed
scoring (``score``), choice scoring (``score_choices``), greedy and scored decoding, the prompt
log-probabilities of ``ragsense serve``'s echo endpoint (``prompt_logprobs``) and the correctness
perturber (through the :class:`~ragsense.models.SupportsTokenAccess` capability).

What it computes, exactly:

* **Body.** :meth:`LogprobKernel.states` runs the transformer body on token ids and returns its
  *states*: the last hidden states when the head shortcut holds for the architecture (checked once at
  load time: body + head must reproduce the model's own logits within 1e-4), else the model's full
  logits (the head is then the identity). Keyword arguments (attention mask, KV cache) go to the model
  unchanged: the callers pick them, and the same call always gets the same arguments.
* **Head.** :meth:`LogprobKernel.logits` sends states through the LM head (``get_output_embeddings``),
  applies Gemma-style ``final_logit_softcapping`` (``tanh(x / c) * c``) when the config sets it, and
  returns float32. Callers gather the positions they need *before* the head, so the head never runs
  on a position whose next token is not wanted (with Gemma's 262k vocabulary the full logits of a
  sequence cost more than the body).
* **Log-softmax in chunks.** :meth:`LogprobKernel.target_logprobs` gives, for row ``i`` of states,
  ``log p(targets[i]) = logits[i, targets[i]] - logsumexp(logits[i])`` (natural log, float32, over
  the full vocabulary), with the head run on at most :data:`HEAD_CHUNK` rows at a time so the logits
  buffer stays bounded (128 x 262k x 4 bytes = 134 MB for Gemma), and optionally the ``top`` best
  log-probabilities of each row (for an OpenAI ``logprobs`` reply). The chunks are always cut from the
  first row of what the caller passes, so a result depends only on the caller's rows.
  :meth:`LogprobKernel.logprobs_at` scores several candidate tokens at one position (the first
  tokens of a judge's labels) and :meth:`LogprobKernel.next_token_logprobs` returns the full
  log-softmax row at one position (greedy decoding, the perturber's fills).

Tokenization contract (lm-evaluation-harness style, :class:`~ragsense.models.ScoreRequest`): the
kernel works on token ids; the callers tokenize ``prompt + continuation`` once, jointly, with the
tokenizer's special tokens (BOS) added, take as continuation tokens those whose character span ends
after the prompt, and score token ``i`` from the states at position ``i - 1``. A token at position 0
has no left context and is never scored. Because every path (local scoring, choices, echo) uses the
same states, the same head and the same chunked reduction, ``ragsense serve`` echo log-probs equal
local ``score`` results bit for bit.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ragsense.errors import BackendUnavailableError

if TYPE_CHECKING:
    import torch

INSTALL_HINT = "pip install 'ragsense[transformers]' (and torch for your platform)"
# Rows of hidden states sent through the LM head at once: bounds the logits buffer
# (rows x vocab x 4 bytes; 128 x 262k x 4 = 134 MB for Gemma).
HEAD_CHUNK = 128
_PROBE = "The quick brown fox jumps over the lazy dog."


def import_torch() -> Any:
    """torch, with transformers' logging quietened; :class:`BackendUnavailableError` without the extra."""
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BackendUnavailableError(
            f"the transformers backend needs torch and transformers: {INSTALL_HINT}"
        ) from exc
    # set_verbosity_error() is unannotated; this is what it does.
    transformers.logging.set_verbosity(logging.ERROR)
    # A progress bar for a sub-second weight load is noise in a CLI table.
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return torch


class _CudnnAttentionOff:
    """While any thread is inside, torch's cuDNN attention stays off; the last one out restores the
    setting it found. The flag is process-wide, so a plain ``sdpa_kernel`` context leaving one thread
    would turn cuDNN back on under another thread's forward pass (the guard serves several threads
    with one model); hence one counter for the process."""

    _lock = threading.Lock()
    _inside = 0
    _found = True

    def __init__(self, torch: Any) -> None:
        self._cuda = torch.backends.cuda

    def __enter__(self) -> None:
        cls = _CudnnAttentionOff
        with cls._lock:
            if cls._inside == 0:
                cls._found = self._cuda.cudnn_sdp_enabled()
                self._cuda.enable_cudnn_sdp(False)
            cls._inside += 1

    def __exit__(self, *exc: object) -> None:
        cls = _CudnnAttentionOff
        with cls._lock:
            cls._inside -= 1
            if cls._inside == 0:
                self._cuda.enable_cudnn_sdp(cls._found)


def _attention_context(torch: Any, device: Any, cudnn: bool) -> Callable[[], AbstractContextManager[Any]]:
    """What :meth:`LogprobKernel.states` runs the body under: on CUDA without ``cudnn``, attention kept
    off cuDNN's kernel (torch then takes flash, memory-efficient or math attention, as it allows).
    cuDNN builds an execution plan for each new input shape (hundreds of ms, by its users' reports),
    and scoring meets a new shape at nearly every call: every prompt and continuation has its own
    length (docs/speed.md, "On a GPU": 2.89x ConSens rows/s on an H200). On a CPU, or with ``cudnn``:
    torch's own choice, untouched."""
    if cudnn or getattr(device, "type", str(device)) != "cuda":
        return nullcontext
    return lambda: _CudnnAttentionOff(torch)


class LogprobKernel:
    """Body, head and chunked log-softmax of one causal LM (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any, device: Any, *, cudnn_attention: bool = False) -> None:
        self.torch = import_torch()
        self.model = model
        self.device = device
        self._attention = _attention_context(self.torch, device, cudnn_attention)
        self.softcap = getattr(model.config, "final_logit_softcapping", None)
        # transformers 5.x renamed the KV-cache argument and output from ``past_key_values`` to ``cache``
        # (the old name warns and goes in 5.40); older releases know only the old name.
        self.cache_name = (
            "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )
        self.head_only = self._check_head_shortcut(tokenizer)

    # -- body ---------------------------------------------------------------------------------------
    def states(self, ids: torch.Tensor, **kwargs: Any) -> tuple[torch.Tensor, Any]:
        """``(states, kv_cache)`` of the body on ``ids`` (``[batch, n]``); ``kwargs`` go to the model as
        they are. Call under ``torch.inference_mode()``."""
        with self._attention():
            if self.head_only:
                out = self.model.base_model(input_ids=ids, **kwargs)
                return out.last_hidden_state, getattr(out, self.cache_name, None)
            out = self.model(input_ids=ids, **kwargs)
            return out.logits, getattr(out, self.cache_name, None)

    def forward(self, ids: torch.Tensor, cache: Any = None) -> tuple[torch.Tensor, Any]:
        """:meth:`states` of ``ids`` (moved to the model's device) after an optional KV ``cache``,
        returning the extended cache: the incremental path (decoding, choices, the perturber)."""
        return self.states(ids.to(self.device), **{self.cache_name: cache}, use_cache=True)

    # -- head ---------------------------------------------------------------------------------------
    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model.get_output_embeddings()(hidden)
        if self.softcap:
            logits = self.torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """float32 logits for states from :meth:`states` (softcapping applied)."""
        if self.head_only:
            return self._head(states).float()
        return states.float()

    # -- log-softmax --------------------------------------------------------------------------------
    def target_logprobs(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``log p(targets[i] | states[i])`` for each row, the head run :data:`HEAD_CHUNK` rows at a time."""
        values, _ = self.target_logprobs_top(states, targets, 0)
        return values

    def target_logprobs_top(
        self, states: torch.Tensor, targets: torch.Tensor, top: int
    ) -> tuple[torch.Tensor, list[tuple[list[list[float]], list[list[int]]]]]:
        """:meth:`target_logprobs` plus, when ``top > 0``, each chunk's ``top`` best log-probabilities
        and token ids per row (``[(values, ids)]`` chunk by chunk; empty when ``top`` is 0)."""
        th = self.torch
        picked = []
        best: list[tuple[list[list[float]], list[list[int]]]] = []
        for start in range(0, states.shape[0], HEAD_CHUNK):
            logits = self.logits(states[start : start + HEAD_CHUNK])
            target = targets[start : start + HEAD_CHUNK, None].to(logits.device)
            lse = th.logsumexp(logits, dim=-1)
            picked.append(logits.gather(1, target)[:, 0] - lse)
            if top:
                values, ids = (logits - lse[:, None]).topk(top, dim=-1)
                best.append((values.tolist(), ids.tolist()))
        result: torch.Tensor = th.cat(picked) if picked else th.zeros(0)
        return result, best

    def logprobs_at(self, state: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``log p(ids[j] | state)`` for several tokens at one position (``state``: ``[1, hidden]``)."""
        logits = self.logits(state)
        result: torch.Tensor = logits[0, ids.to(logits.device)] - self.torch.logsumexp(logits[0], dim=-1)
        return result

    def next_token_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """The full log-softmax row (``[vocab]``) at one position (``state``: ``[1, hidden]``)."""
        result: torch.Tensor = self.torch.log_softmax(self.logits(state)[0], dim=-1)
        return result

    # -- the head-shortcut probe --------------------------------------------------------------------
    def _check_head_shortcut(self, tokenizer: Any) -> bool:
        """Check once that body + head reproduces the model's own logits (guards odd architectures)."""
        torch = self.torch
        probe = tokenizer(_PROBE, return_tensors="pt")["input_ids"].to(self.device)
        try:
            with torch.inference_mode():
                full = self.model(input_ids=probe).logits.float()
                body = self.model.base_model(input_ids=probe).last_hidden_state
                mine = self._head(body).float()
            return bool(torch.allclose(full, mine, atol=1e-4, rtol=1e-4))
        except (AttributeError, TypeError):
            return False
