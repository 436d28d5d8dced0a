"""The judge a model can be: label scoring when it gives log-probabilities, else structured output."""

from __future__ import annotations

from pathlib import Path

from ragsense.errors import ParameterError
from ragsense.models import LanguageModel, SupportsChoiceScoring, SupportsLogprobs
from ragsense.vera.judges._chat_judge import ChatJudge
from ragsense.vera.judges._label_judge import LabelJudge
from ragsense.vera.judges._verdict import (
    DEFAULT_LABEL_SCORING,
    JUDGE_MODES,
    JudgeMode,
    LabelScoring,
    PromptFormat,
)


def make_judge(
    model: LanguageModel,
    mode: JudgeMode | str = "auto",
    *,
    cache_dir: str | Path | None = None,
    calibrate: bool = False,
    reasons: bool = False,
    label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
    prompt_format: PromptFormat | str = "plain",
) -> LabelJudge | ChatJudge:
    """The judge for ``model``: ``"labels"`` (log-probabilities), ``"structured"`` (chat + JSON schema),
    or ``"auto"``: labels when the model gives log-probabilities, else structured.

    >>> from ragsense.models import load_model
    >>> make_judge(load_model("fake")).description
    'labels:fake'
    """
    if mode not in JUDGE_MODES:
        raise ParameterError(f"must be one of {', '.join(JUDGE_MODES)}, got {mode!r}", parameter="judge_mode")
    if mode == "labels" or (mode == "auto" and isinstance(model, SupportsChoiceScoring | SupportsLogprobs)):
        return LabelJudge(
            model,
            cache_dir=cache_dir,
            calibrate=calibrate,
            reasons=reasons,
            label_scoring=label_scoring,
            prompt_format=prompt_format,
        )
    return ChatJudge(model, cache_dir=cache_dir)
