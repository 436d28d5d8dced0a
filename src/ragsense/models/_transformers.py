"""The default backend: any causal LM through Hugging Face transformers, on CPU or GPU.

:class:`TransformersModel` is a thin class that composes the rooms of the backend:

* :mod:`~ragsense.models._hf_loading`: loading, fingerprinting;
* :mod:`~ragsense.models._kernel`: the one log-prob kernel (body, LM head on the needed positions
  only, log-softmax in chunks) every log-probability below goes through;
* :mod:`~ragsense.models._hf_scoring`: packed scoring (``score``) and prompt log-probs (``echo``);
* :mod:`~ragsense.models._hf_choices`: choice scoring on one prompt pass, shared prefixes in the prompt cache;
* :mod:`~ragsense.models._hf_grouped`: group scoring (the binding check's variants of one answer as
  one batch);
* :mod:`~ragsense.models._decoding`: greedy and scored decoding, sampling, structured dispatch;
* :mod:`~ragsense.models._chat`: the chat template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragsense.errors import ParameterError
from ragsense.models._chat import has_chat_template, render_chat
from ragsense.models._decoding import (
    check_scored_config,
    eos_ids,
    generate_greedy_one,
    generate_scored_one,
    hf_generate,
)
from ragsense.models._hf_choices import ChoiceScorer
from ragsense.models._hf_grouped import GroupScorer
from ragsense.models._hf_loading import load_hf_model
from ragsense.models._hf_prompt_cache import (
    DEFAULT_PROMPT_CACHE_TOKENS,
    PromptCacheStats,
    PromptStateCache,
)
from ragsense.models._hf_scoring import PackedScorer, prompt_logprobs
from ragsense.models._hf_shared import MIN_SHARED_PROMPT
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    PromptLogprobs,
    ScoredGeneration,
    ScoreGroup,
    ScoreRequest,
)
from ragsense.models._kernel import LogprobKernel, import_torch
from ragsense.models._token_counts import TokenCounts

if TYPE_CHECKING:
    import torch


class TransformersModel:
    """A causal LM loaded through transformers. Create it with :func:`ragsense.models.load_model`.

    ``max_batch_tokens`` bounds the padded tokens of one forward pass (memory and cache locality).
    ``min_shared_prompt``, ``reuse_prompts`` and ``prompt_cache_tokens`` set how prompts are shared
    (see :func:`create_transformers_model`).
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
        min_shared_prompt: int = MIN_SHARED_PROMPT,
        reuse_prompts: bool = True,
        prompt_cache_tokens: int = DEFAULT_PROMPT_CACHE_TOKENS,
        cudnn_attention: bool = False,
    ) -> None:
        if min_shared_prompt < 1:
            raise ParameterError(f"must be 1 or more, got {min_shared_prompt}", parameter="min_shared_prompt")
        self._settings: dict[str, Any] = {
            "max_batch_tokens": max_batch_tokens,
            "max_batch_size": max_batch_size,
            "context_window": context_window,
            "min_shared_prompt": min_shared_prompt,
            "reuse_prompts": reuse_prompts,
            "prompt_cache_tokens": prompt_cache_tokens,
            "cudnn_attention": cudnn_attention,
        }
        self._torch = import_torch()
        self._model = model
        self._tokenizer = tokenizer
        self._token_counts = TokenCounts(self._count_uncached)
        self._device = next(model.parameters()).device
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
        self.kernel = LogprobKernel(model, tokenizer, self._device, cudnn_attention=cudnn_attention)
        self._scorer = PackedScorer(
            self.kernel,
            tokenizer,
            pad_id=self._pad_id,
            context_window=window,
            max_batch_tokens=max_batch_tokens,
            max_batch_size=max_batch_size,
            min_shared_prompt=min_shared_prompt,
            reuse_prompts=reuse_prompts,
            prompt_cache=PromptStateCache(prompt_cache_tokens) if prompt_cache_tokens else None,
        )
        self._choices = ChoiceScorer(self._scorer)
        self._groups = GroupScorer(self._scorer)

    # -- LanguageModel -------------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_batch_tokens(self) -> int:
        return self._scorer.max_batch_tokens

    @property
    def max_batch_size(self) -> int:
        return self._scorer.max_batch_size

    def with_settings(self, **settings: Any) -> TransformersModel:
        """A model on the same weights and tokenizer (no second copy) with other scoring settings:
        ``max_batch_tokens``, ``max_batch_size``, ``context_window``, ``min_shared_prompt``,
        ``reuse_prompts``, ``prompt_cache_tokens``, ``cudnn_attention``; it has its own prompt
        cache. What benchmarks use to
        time one setting against another in one process."""
        unknown = sorted(set(settings) - set(self._settings))
        if unknown:
            raise ParameterError(f"unknown: {', '.join(unknown)}", parameter="settings")
        return TransformersModel(
            self._model,
            self._tokenizer,
            name=self._info.name,
            fingerprint=self._info.fingerprint,
            **(self._settings | settings),
        )

    def prompt_cache_stats(self) -> PromptCacheStats | None:
        """What the cross-call prompt cache holds (entries, tokens, bytes) and its hits and misses;
        None when it is off (``prompt_cache_tokens=0`` or ``reuse_prompts=False``)."""
        store = self._scorer.prompt_cache
        return store.stats() if store is not None else None

    def clear_prompt_cache(self) -> None:
        """Drop every kept prompt state (the memory goes back at once; counters stay)."""
        if self._scorer.prompt_cache is not None:
            self._scorer.prompt_cache.clear()

    def count_tokens(self, text: str) -> int:
        return self._token_counts(text)

    def _count_uncached(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    async def aclose(self) -> None:
        return None

    # -- SupportsLogprobs ----------------------------------------------------------------------
    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        return self.score_sync(requests)

    def score_sync(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        """Synchronous :meth:`score`, for callers without an event loop."""
        return self._scorer.score(requests)

    # -- SupportsPromptLogprobs ----------------------------------------------------------------
    async def prompt_logprobs(self, texts: Sequence[str], top: int = 0) -> list[PromptLogprobs]:
        return self.prompt_logprobs_sync(texts, top)

    def prompt_logprobs_sync(self, texts: Sequence[str], top: int = 0) -> list[PromptLogprobs]:
        """Synchronous :meth:`prompt_logprobs`: each text scored alone, one forward pass each."""
        window = self._info.context_window
        return [prompt_logprobs(self.kernel, self._tokenizer, t, top, window) for t in texts]

    # -- SupportsTokenAccess (the correctness perturber) ---------------------------------------
    @property
    def torch_device(self) -> Any:
        return self._device

    def forward_hidden(self, ids: torch.Tensor, cache: Any = None) -> tuple[torch.Tensor, Any]:
        """Run the body on ``ids`` (shape ``[batch, n]``) after an optional KV ``cache``.

        Returns ``(states, cache)``: ``states`` go through :meth:`lm_head` to give logits. They are the
        last hidden states when the head shortcut is valid for this architecture, else the logits
        themselves (and :meth:`lm_head` is then the identity). Call under ``torch.inference_mode()``.
        """
        return self.kernel.forward(ids, cache)

    def lm_head(self, states: torch.Tensor) -> torch.Tensor:
        """float32 logits for states from :meth:`forward_hidden` (softcapping applied)."""
        return self.kernel.logits(states)

    def token_logprobs(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``log p(targets[i] | states[i])`` for rows of states, in chunks that bound the logits buffer."""
        return self.kernel.target_logprobs(states, targets)

    def next_token_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """The full log-softmax row of one state (``[1, hidden]``)."""
        return self.kernel.next_token_logprobs(state)

    # -- SupportsGroupScoring ------------------------------------------------------------------
    async def score_groups(self, groups: Sequence[ScoreGroup]) -> list[list[ContinuationScore]]:
        return self.score_groups_sync(groups)

    def score_groups_sync(self, groups: Sequence[ScoreGroup]) -> list[list[ContinuationScore]]:
        """Synchronous :meth:`score_groups` (see :mod:`ragsense.models._hf_grouped`)."""
        return self._groups.score_groups(groups)

    # -- SupportsChoiceScoring -----------------------------------------------------------------
    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        return self.score_choices_sync(requests)

    def score_choices_sync(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        """Synchronous :meth:`score_choices` (see :mod:`ragsense.models._hf_choices`)."""
        return self._choices.score_choices(requests)

    # -- SupportsScoredGeneration --------------------------------------------------------------
    async def generate_scored(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        return self.generate_scored_sync(prompts, config)

    def generate_scored_sync(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        """Greedy decoding, one prompt at a time, reusing the prompt pass for the prompt's log-probs."""
        check_scored_config(config)
        window = self._info.context_window
        return [generate_scored_one(self.kernel, self._tokenizer, p, config, window) for p in prompts]

    # -- SupportsGeneration --------------------------------------------------------------------
    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        return self.generate_sync(prompts, config)

    def generate_sync(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        """Greedy (or seeded sampling) generation (see :mod:`ragsense.models._decoding`). With
        ``config.json_schema`` each reply is decoded under the schema (greedy, see
        :mod:`ragsense.models._structured`), as :meth:`chat_sync` does."""
        if config.json_schema is not None:
            from ragsense.models._structured import generate_structured_sync

            return [generate_structured_sync(self, p, config.json_schema, config) for p in prompts]
        return self._generate_texts(prompts, config, add_special_tokens=True)

    # -- SupportsChat --------------------------------------------------------------------------
    @property
    def chat_available(self) -> bool:
        return has_chat_template(self._tokenizer)

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        return self.chat_sync(conversations, config)

    def render_chat(self, conversation: Sequence[ChatMessage]) -> str:
        """The conversation in the model's chat template, ending with the assistant's turn opener."""
        return render_chat(self._tokenizer, self._info.name, conversation)

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
        """Greedy decoding (temperature 0) through the kernel, one prompt at a time; seeded sampling
        through Hugging Face ``generate``."""
        if config.temperature <= 0:
            eos = eos_ids(self._model, self._tokenizer)
            return [
                generate_greedy_one(
                    self.kernel,
                    self._tokenizer,
                    p,
                    config,
                    add_special_tokens=add_special_tokens,
                    eos=eos,
                    pad_id=self._pad_id,
                )
                for p in prompts
            ]
        return hf_generate(
            self._model,
            self._tokenizer,
            self._device,
            self._pad_id,
            self._scorer.batches,
            prompts,
            config,
            add_special_tokens=add_special_tokens,
        )


def create_transformers_model(
    model_id: str,
    *,
    device: str = "auto",
    dtype: str = "float32",
    threads: int | None = None,
    trust_remote_code: bool = False,
    max_batch_tokens: int | None = None,
    max_batch_size: int | None = None,
    context_window: int | None = None,
    min_shared_prompt: int = MIN_SHARED_PROMPT,
    reuse_prompts: bool = True,
    prompt_cache_tokens: int = DEFAULT_PROMPT_CACHE_TOKENS,
    cudnn_attention: bool = False,
    **unused: Any,
) -> TransformersModel:
    """Load ``model_id``: a bundled name, a local directory, or a hub id already in the local cache.

    Never downloads (``local_files_only``) and never runs repository code unless
    ``trust_remote_code=True`` is passed explicitly.

    ``max_batch_size`` defaults to 1 on CPU and 32 on GPU, ``max_batch_tokens`` (padded tokens of one
    forward pass) to 4,096 on CPU and 32,768 on GPU. On CPU a prompt of a few hundred tokens
    already fills the matrix units, so batching buys nothing (measured: 364 tok/s unbatched vs 346
    batched with SmolLM2 on 2 cores), and scoring one sequence at a time makes every score
    independent of what else was in the batch: bit-identical across batch plans, chunking and resumes.
    Pass ``max_batch_size`` to force padded multi-row batches on CPU too (tests/models/
    test_padded_batch.py and test_row_batching.py check them against single rows). With more than one
    row per pass, requests that share a prompt have the prompts of many rows run in one padded pass
    and their continuations in another (:mod:`~ragsense.models._hf_batched`): the unbatched scores
    within float noise (2.3e-5 in a log-probability on CPU in float32), not bit for bit.

    Reading each context once: a request whose prompt has at least ``min_shared_prompt`` tokens
    (default 32) runs its prompt, then its continuation on the prompt's KV state; with
    ``reuse_prompts`` (default) requests of one call with the same prompt tokens share that pass,
    and the states of recent prompts are kept across calls in an LRU of at most
    ``prompt_cache_tokens`` prompt tokens (default 16,384, about 720 MiB for SmolLM2-135M; 0 turns it
    off), so a context that returns a chunk later is not read again. Scores are bit-identical with or
    without any of this reuse on CPU (``reuse_prompts=False`` gives every request its own prompt pass
    on the same route). A very large ``min_shared_prompt`` sends every request through the padded
    full pass instead (the code before the shared route).

    On CUDA, attention runs on torch's flash, memory-efficient or math kernels, not cuDNN's, unless
    ``cudnn_attention=True``: cuDNN plans each new input shape anew, and scoring sees a new shape at
    nearly every call (docs/speed.md, "On a GPU").
    """
    if unused:
        raise TypeError(f"unknown options for the transformers backend: {', '.join(sorted(unused))}")
    loaded = load_hf_model(
        model_id, device=device, dtype=dtype, threads=threads, trust_remote_code=trust_remote_code
    )
    if max_batch_size is None:
        max_batch_size = 1 if loaded.device == "cpu" else 32
    if max_batch_tokens is None:
        # A GPU batch of 32 rows of WikiEval's ~1,000-token prompts needs 32k; a CPU gains nothing.
        max_batch_tokens = 4096 if loaded.device == "cpu" else 32_768
    return TransformersModel(
        loaded.model,
        loaded.tokenizer,
        name=loaded.label,
        fingerprint=loaded.fingerprint,
        max_batch_tokens=max_batch_tokens,
        max_batch_size=max_batch_size,
        context_window=context_window,
        min_shared_prompt=min_shared_prompt,
        reuse_prompts=reuse_prompts,
        prompt_cache_tokens=prompt_cache_tokens,
        cudnn_attention=cudnn_attention,
    )
