"""The model layer: one narrow interface, backends found through entry points, bundled models.

>>> from ragsense.models import load_model, ScoreRequest
>>> import asyncio
>>> model = load_model("fake")
>>> [s] = asyncio.run(model.score([ScoreRequest("Paris is in France. Answer:", " Paris")]))
>>> s.tokens
(' Paris',)
"""

from ragsense.models._bundled import BUNDLED_MODELS, converted_path
from ragsense.models._hf_prompt_cache import DEFAULT_PROMPT_CACHE_TOKENS, PromptCacheStats
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    LanguageModel,
    ModelInfo,
    PromptLogprobs,
    ScoredGeneration,
    ScoreGroup,
    ScoreRequest,
    SupportsChat,
    SupportsChatTemplate,
    SupportsChoiceScoring,
    SupportsGeneration,
    SupportsGroupScoring,
    SupportsLogprobs,
    SupportsPromptLogprobs,
    SupportsScoredGeneration,
    SupportsStructuredChat,
    SupportsTokenAccess,
    chat_available,
    require,
    structured_chat,
)
from ragsense.models._openai_server import served_model_ids
from ragsense.models._pool import ModelPool, ModelSpec, shared_pool
from ragsense.models._registry import DEFAULT_MODEL, available_backends, load_model, resolve_name
from ragsense.models._structured import UnsupportedSchemaError, generate_structured
from ragsense.models._transformers import TransformersModel

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "DEFAULT_PROMPT_CACHE_TOKENS",
    "ChatMessage",
    "ChoiceRequest",
    "ContinuationScore",
    "Generation",
    "GenerationConfig",
    "LanguageModel",
    "ModelInfo",
    "ModelPool",
    "ModelSpec",
    "PromptCacheStats",
    "PromptLogprobs",
    "ScoreGroup",
    "ScoreRequest",
    "ScoredGeneration",
    "SupportsChat",
    "SupportsChatTemplate",
    "SupportsChoiceScoring",
    "SupportsGeneration",
    "SupportsGroupScoring",
    "SupportsLogprobs",
    "SupportsPromptLogprobs",
    "SupportsScoredGeneration",
    "SupportsStructuredChat",
    "SupportsTokenAccess",
    "TransformersModel",
    "UnsupportedSchemaError",
    "available_backends",
    "chat_available",
    "converted_path",
    "generate_structured",
    "load_model",
    "require",
    "resolve_name",
    "served_model_ids",
    "shared_pool",
    "structured_chat",
]
