"""VERA's judges, which never fail to parse.

Two ways to get a label from a model, chosen by what the model can do:

- :class:`LabelJudge` scores every allowed label as a continuation of the prompt and takes the most
  likely; the label's probability among the allowed labels is the confidence. There is no free text
  to parse, so it cannot fail to parse. Works with any model that gives log-probabilities: the
  bundled models, ``ragsense serve``, vLLM.
- :class:`ChatJudge` asks a chat model for JSON under a JSON schema (the server's structured output),
  validates it, asks once more on a bad reply, and otherwise returns a failed :class:`Verdict` that
  carries the raw text. A timeout or a server error is a failed verdict too, never an exception that
  stops a batch, and never a NaN.

Every successful verdict is cached on disk under the model's fingerprint, the prompt's fingerprint and
the rendered item, so re-running an evaluation costs nothing and gives identical results. Failed
verdicts are not cached: a later run tries again.
"""

from ragsense.vera.judges._cache import CACHE_FILE
from ragsense.vera.judges._chat_judge import ChatJudge
from ragsense.vera.judges._factory import make_judge
from ragsense.vera.judges._label_judge import LabelJudge
from ragsense.vera.judges._labels import decide_label, label_probabilities, label_scores, score_choices
from ragsense.vera.judges._verdict import (
    DEFAULT_LABEL_SCORING,
    JUDGE_MODES,
    LABEL_SCORINGS,
    PROMPT_FORMATS,
    Judge,
    JudgeMode,
    LabelScoring,
    PromptFormat,
    SplitResult,
    Verdict,
)

__all__ = [
    "CACHE_FILE",
    "DEFAULT_LABEL_SCORING",
    "JUDGE_MODES",
    "LABEL_SCORINGS",
    "PROMPT_FORMATS",
    "ChatJudge",
    "Judge",
    "JudgeMode",
    "LabelJudge",
    "LabelScoring",
    "PromptFormat",
    "SplitResult",
    "Verdict",
    "decide_label",
    "label_probabilities",
    "label_scores",
    "make_judge",
    "score_choices",
]
