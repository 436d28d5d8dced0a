"""The vLLM backend (``vllm:MODEL``): log-probabilities, label scoring and generation on a GPU.

vLLM is what teams serve models with on GPUs, and its prompt log-probabilities are exactly what ConSens
and the label judges read. This backend drives vLLM's offline engine (``vllm.LLM``) in process:

* **Scoring** keeps the :class:`~ragsense.models.ScoreRequest` contract: ``prompt + continuation`` is
  tokenized once, jointly, by the model's Hugging Face tokenizer (the same :func:`encode` as the
  transformers backend), and vLLM gets the token ids (``TokensPrompt``), never the text, so both
  backends score the same tokens. Each request is one ``generate`` call item with
  ``SamplingParams(max_tokens=1, prompt_logprobs=0)``: vLLM then returns, for every prompt position
  but the first, the log-probability of the prompt's own token (raw log-softmax of the model's logits).
* **Pitfalls handled.** The first prompt position has no log-probability: the contract already refuses
  a continuation that starts there. vLLM does not count the prompt log-prob buffers (prompt tokens x
  vocabulary floats) in its KV-cache sizing, so requests go to the engine in groups of at most
  ``max_score_tokens`` prompt tokens, and the engine runs with chunked prefill. Prefix caching does not
  serve requests that ask for prompt log-probs, so nothing here relies on it.
* **Label scoring** (:meth:`score_choices`) scores each choice as a :class:`ScoreRequest`, as the
  contract defines it; **generation** and **chat** use vLLM's sampler (greedy by default).

vLLM needs a CUDA GPU; without one the backend says so at load time. Install with
``pip install 'ragsense[vllm]'``. docs/cluster.md shows it under the Ray engine with ``--gpus-per-worker``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.errors import BackendUnavailableError, CapabilityError, ModelCallError, ModelNotFoundError
from ragsense.models._hf_scoring import Encoded, encode
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    ScoreRequest,
)
from ragsense.models._token_counts import TokenCounts

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'ragsense[vllm]' (vLLM needs Linux and a CUDA GPU)"
DEFAULT_SCORE_TOKENS = 8192
"""Prompt tokens per engine call when scoring. The prompt log-prob buffers are not part of vLLM's
memory planning: 8,192 tokens x a 49k vocabulary x 4 bytes is 1.6 GB, safe beside a 0.85 memory
utilization on a 24 GB card; lower it for models with a 256k vocabulary (Gemma)."""


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendUnavailableError(f"the vllm backend needs vLLM: {INSTALL_HINT}") from exc
    return vllm


def _require_gpu() -> None:
    try:
        import torch
    except ImportError as exc:  # vLLM depends on torch; a broken install is reported the same way
        raise BackendUnavailableError(f"the vllm backend needs torch: {INSTALL_HINT}") from exc
    if not torch.cuda.is_available():
        raise BackendUnavailableError(
            "the vllm backend needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); "
            "on a CPU use the transformers backend (e.g. --model smollm2-135m)"
        )


def score_groups(encoded: Sequence[Encoded], max_tokens: int) -> list[list[int]]:
    """Indices of ``encoded`` in input order, cut into groups of at most ``max_tokens`` prompt tokens
    (a request longer than the budget goes alone).

    >>> class E:
    ...     def __init__(self, n): self.ids = [0] * n
    >>> score_groups([E(5), E(5), E(3), E(20), E(1)], max_tokens=10)
    [[0, 1], [2], [3], [4]]
    """
    groups: list[list[int]] = []
    used = 0
    for i, item in enumerate(encoded):
        n = len(item.ids)
        if groups and used + n <= max_tokens:
            groups[-1].append(i)
            used += n
        else:
            groups.append([i])
            used = n
    return groups


def continuation_logprobs(item: Encoded, prompt_logprobs: Sequence[Any] | None) -> list[float]:
    """The continuation's log-probs from one vLLM output's ``prompt_logprobs`` (a list with one entry a
    prompt position: ``None`` for the first, else a mapping ``token id -> Logprob``).

    >>> from types import SimpleNamespace as L
    >>> e = Encoded([1, 7, 8, 9], 2, [(0, 1), (1, 2)], ["a", "b"], False)
    >>> continuation_logprobs(e, [None, {7: L(logprob=-1.0)}, {8: L(logprob=-0.5), 3: L(logprob=-0.1)},
    ...                           {9: L(logprob=-2.0)}])
    [-0.5, -2.0]
    """
    if prompt_logprobs is None or len(prompt_logprobs) != len(item.ids):
        got = None if prompt_logprobs is None else len(prompt_logprobs)
        raise ModelCallError(f"vLLM returned {got} prompt log-probs for a {len(item.ids)}-token prompt")
    out: list[float] = []
    for position in range(item.first, len(item.ids)):
        entry = prompt_logprobs[position]
        token = item.ids[position]
        if entry is None or token not in entry:
            raise ModelCallError(f"vLLM returned no log-prob for prompt position {position} (token {token})")
        out.append(float(entry[token].logprob))
    return out


class VLLMModel:
    """A model served by vLLM's offline engine in this process (capabilities: log-probs, choice scoring,
    generation, chat). Build it with :func:`create_vllm_model` (``load_model("vllm:PATH")``)."""

    backend = "vllm"

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        *,
        name: str,
        fingerprint: str,
        context_window: int,
        max_score_tokens: int = DEFAULT_SCORE_TOKENS,
        extra: dict[str, str] | None = None,
        sampling_params: Any = None,
    ) -> None:
        self._llm = llm
        self._tokenizer = tokenizer
        self._token_counts = TokenCounts(self._count_uncached)
        # vllm.SamplingParams; a test passes a stand-in so the request mapping runs without a GPU.
        self._sampling_params = (
            sampling_params if sampling_params is not None else _import_vllm().SamplingParams
        )
        self._info = ModelInfo(
            name=name,
            backend=self.backend,
            context_window=context_window,
            fingerprint=fingerprint,
            extra=dict(extra or {}),
        )
        self.max_score_tokens = max_score_tokens
        # One engine, one caller at a time: metrics run concurrently on one event loop, and vLLM's
        # offline engine is not re-entrant.
        self._lock = asyncio.Lock()

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return self._token_counts(text)

    def _count_uncached(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    async def aclose(self) -> None:
        self._llm = None

    # -- engine calls ------------------------------------------------------------------------------
    async def _run(self, prompts: list[Any], params: Any) -> list[Any]:
        if self._llm is None:
            raise ModelCallError("the vllm model is closed")
        llm = self._llm
        async with self._lock:
            outputs: list[Any] = await asyncio.to_thread(llm.generate, prompts, params, use_tqdm=False)
        return outputs

    @staticmethod
    def _tokens_prompt(ids: list[int]) -> dict[str, Any]:
        # vllm.inputs.TokensPrompt is a TypedDict: the engine takes the plain dict.
        return {"prompt_token_ids": ids}

    # -- SupportsLogprobs ------------------------------------------------------------------------
    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        encoded = [encode(self._tokenizer, r, self._info.context_window) for r in requests]
        params = self._sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        results: list[ContinuationScore | None] = [None] * len(encoded)
        for group in score_groups(encoded, self.max_score_tokens):
            outputs = await self._run([self._tokens_prompt(encoded[i].ids) for i in group], params)
            if len(outputs) != len(group):
                raise ModelCallError(f"vLLM returned {len(outputs)} outputs for {len(group)} prompts")
            for i, output in zip(group, outputs, strict=True):
                item = encoded[i]
                results[i] = ContinuationScore(
                    tokens=tuple(item.tokens),
                    offsets=tuple(item.offsets),
                    logprobs=tuple(continuation_logprobs(item, output.prompt_logprobs)),
                    prompt_tokens=item.first,
                    straddles_boundary=item.straddles,
                )
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            raise ModelCallError(f"vLLM returned no output for request(s) {missing}")
        return [r for r in results if r is not None]

    # -- SupportsChoiceScoring -------------------------------------------------------------------
    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        flat = [ScoreRequest(r.prompt, choice) for r in requests for choice in r.choices]
        scores = await self.score(flat)
        out: list[tuple[float, ...]] = []
        at = 0
        for r in requests:
            out.append(tuple(s.total for s in scores[at : at + len(r.choices)]))
            at += len(r.choices)
        return out

    # -- SupportsGeneration / SupportsChat -------------------------------------------------------
    def _sampling(self, config: GenerationConfig) -> Any:
        if config.json_schema is not None:
            raise CapabilityError(
                "the vllm backend does not decode to a JSON schema itself; ragsense's schema-guided "
                "decoder takes over for judges (render_chat)"
            )
        return self._sampling_params(
            max_tokens=config.max_new_tokens,
            temperature=config.temperature,
            seed=config.seed,
            stop=list(config.stop) or None,
        )

    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        ids = [list(self._tokenizer(p, add_special_tokens=True)["input_ids"]) for p in prompts]
        outputs = await self._run([self._tokens_prompt(i) for i in ids], self._sampling(config))
        return [_generation(o) for o in outputs]

    @property
    def chat_available(self) -> bool:
        return getattr(self._tokenizer, "chat_template", None) is not None

    def render_chat(self, conversation: Sequence[ChatMessage]) -> str:
        messages = [{"role": m.role, "content": m.content} for m in conversation]
        text: str = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        rendered = [self.render_chat(c) for c in conversations]
        # The chat template writes its own BOS: tokenize without adding another.
        ids = [list(self._tokenizer(t, add_special_tokens=False)["input_ids"]) for t in rendered]
        outputs = await self._run([self._tokens_prompt(i) for i in ids], self._sampling(config))
        return [_generation(o) for o in outputs]


def _generation(output: Any) -> Generation:
    completion = output.outputs[0]
    reason = "length" if completion.finish_reason == "length" else "stop"
    return Generation(text=completion.text, finish_reason=reason, n_tokens=len(completion.token_ids))


def create_vllm_model(
    model_id: str,
    *,
    dtype: str = "bfloat16",
    gpu_memory_utilization: float = 0.85,
    max_model_len: int | None = None,
    max_score_tokens: int = DEFAULT_SCORE_TOKENS,
    max_num_batched_tokens: int | None = None,
    tensor_parallel_size: int = 1,
    seed: int = 0,
    enforce_eager: bool = False,
    trust_remote_code: bool = False,
    **unused: Any,
) -> VLLMModel:
    """Load ``model_id`` (a bundled name such as ``smollm2-135m``, or a local model directory) into
    vLLM's offline engine on the GPU.

    Raises :class:`~ragsense.errors.BackendUnavailableError` without vLLM (naming the extra) or without
    a CUDA GPU. Never downloads and never runs repository code unless ``trust_remote_code=True``.
    ``dtype``: the engine's compute type (``bfloat16``; ``float32`` to compare with the CPU backend).
    ``max_score_tokens``: prompt tokens per scoring call (see :data:`DEFAULT_SCORE_TOKENS`).
    """
    if unused:
        raise TypeError(f"unknown options for the vllm backend: {', '.join(sorted(unused))}")
    vllm = _import_vllm()
    _require_gpu()
    from transformers import AutoTokenizer

    from ragsense.models._bundled import BUNDLED_MODELS, converted_path
    from ragsense.models._hf_loading import fingerprint

    path = converted_path(model_id) if model_id in BUNDLED_MODELS else Path(model_id)
    if not path.is_dir():
        raise ModelNotFoundError(
            f"vllm:{model_id}: not a bundled model name and not a local model directory "
            "(ragsense never downloads at run time)"
        )
    tokenizer = AutoTokenizer.from_pretrained(
        str(path), local_files_only=True, trust_remote_code=trust_remote_code
    )
    options: dict[str, Any] = {
        "model": str(path),
        "tokenizer": str(path),
        "dtype": dtype,
        "seed": seed,
        "gpu_memory_utilization": gpu_memory_utilization,
        "tensor_parallel_size": tensor_parallel_size,
        "enforce_eager": enforce_eager,
        "trust_remote_code": trust_remote_code,
        "enable_chunked_prefill": True,
    }
    if max_model_len is not None:
        options["max_model_len"] = max_model_len
    if max_num_batched_tokens is not None:
        options["max_num_batched_tokens"] = max_num_batched_tokens
    llm = vllm.LLM(**options)
    return VLLMModel(
        llm,
        tokenizer,
        name=model_id,
        fingerprint=f"vllm:{dtype}:" + fingerprint(path, model_id),
        context_window=_context_window(llm, max_model_len, tokenizer),
        max_score_tokens=max_score_tokens,
        extra={"dtype": dtype, "vllm": str(getattr(vllm, "__version__", "?"))},
        sampling_params=vllm.SamplingParams,
    )


def _context_window(llm: Any, asked: int | None, tokenizer: Any) -> int:
    """The engine's maximum sequence length (where this vLLM version exposes it), else what was asked
    for, else the tokenizer's limit."""
    config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    window = getattr(config, "max_model_len", None)
    if isinstance(window, int):
        return window
    return asked if asked is not None else int(tokenizer.model_max_length)
