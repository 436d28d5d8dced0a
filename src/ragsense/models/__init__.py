"""The model layer: one narrow interface, backends found through entry points, bundled models.

>>> from ragsense.models import load_model, ScoreRequest
>>> import asyncio
>>> model = load_model("fake")
>>> [s] = asyncio.run(model.score([ScoreRequest("Paris is in France. Answer:", " Paris")]))
>>> s.tokens
(' Paris',)
"""

from ragsense.models._bundled import BUNDLED_MODELS
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    LanguageModel,
    ModelInfo,
    ScoredGeneration,
    ScoreRequest,
    SupportsChat,
    SupportsChoiceScoring,
    SupportsGeneration,
    SupportsLogprobs,
    SupportsScoredGeneration,
    chat_available,
    require,
)
from ragsense.models._pool import ModelPool, ModelSpec, shared_pool
from ragsense.models._registry import DEFAULT_MODEL, available_backends, load_model, resolve_name

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "ChatMessage",
    "ChoiceRequest",
    "ContinuationScore",
    "Generation",
    "GenerationConfig",
    "LanguageModel",
    "ModelInfo",
    "ModelPool",
    "ModelSpec",
    "ScoreRequest",
    "ScoredGeneration",
    "SupportsChat",
    "SupportsChoiceScoring",
    "SupportsGeneration",
    "SupportsLogprobs",
    "SupportsScoredGeneration",
    "available_backends",
    "chat_available",
    "load_model",
    "require",
    "resolve_name",
    "shared_pool",
]
