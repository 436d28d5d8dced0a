"""VERA: evaluate and enhance the retrieved context and the generated answer (Birur et al.).

:class:`Vera` is the metric (``ragsense.evaluate(data, [Vera(judge=...)])``), :class:`VeraEnhance` its
enhance step; :class:`VeraEvaluator` runs the steps directly, configured by :class:`VeraSettings`.

>>> from ragsense.vera import VeraEvaluator, VeraSettings
>>> from ragsense.data import RagRow
>>> vera = VeraEvaluator("fake", VeraSettings(cache=False))
>>> row = RagRow(id="1", question="Who designed the Orvel bridge?",
...              contexts=["The Orvel bridge was designed by Mara Quint."], answer="Mara Quint.")
>>> [result] = vera.enhance_sync([row])
>>> result.refused in (True, False)
True
"""

from ragsense.vera._enhance import AnswerFn
from ragsense.vera._evaluator import VeraEvaluator
from ragsense.vera._metric import ENHANCE_FIELDS, VERA_FIELDS, Vera, VeraEnhance
from ragsense.vera._offline import (
    DEFAULT_CONTEXT_RULE,
    RETRIEVAL_NEED_VERSION,
    KeepRule,
    OfflineSignals,
    RetrievalNeedModel,
    needs_documents_set,
    sentence_lift_requests,
)
from ragsense.vera._pipeline import Retriever, VeraAnswer, VeraPipeline
from ragsense.vera._prompts import (
    CONTEXT_RELEVANCE,
    PROMPTS,
    RESPONSE_ADHERENCE,
    RETRIEVAL_NEED,
    SPLIT_STATEMENTS,
    STATEMENT_RELEVANCE,
    AdherenceInput,
    ContextSentenceInput,
    Example,
    JudgePrompt,
    Judgment,
    QuestionInput,
    SplitInput,
    SplitPrompt,
    StatementInput,
)
from ragsense.vera._results import (
    REFUSAL,
    Decision,
    RetrievalCheck,
    StepResult,
    VeraEnhancement,
    VeraEvaluation,
)
from ragsense.vera._settings import (
    ADHERENCE_SIGNALS,
    DEFAULT_ADHERENCE_SIGNAL,
    DEFAULT_STEP_SIGNAL,
    SCORED_STEPS,
    SPLITTERS,
    STEP_SIGNALS,
    AdherenceSignal,
    SplitterMode,
    StepSignal,
    VeraSettings,
    default_cache_dir,
)
from ragsense.vera._signals import ADHERENCE_AGGREGATION
from ragsense.vera._steps import JudgeFailure
from ragsense.vera.judges import (
    DEFAULT_LABEL_SCORING,
    JUDGE_MODES,
    LABEL_SCORINGS,
    PROMPT_FORMATS,
    ChatJudge,
    Judge,
    JudgeMode,
    LabelJudge,
    LabelScoring,
    PromptFormat,
    Verdict,
    decide_label,
    label_probabilities,
    label_scores,
    make_judge,
    score_choices,
)

__all__ = [
    "ADHERENCE_AGGREGATION",
    "ADHERENCE_SIGNALS",
    "CONTEXT_RELEVANCE",
    "DEFAULT_ADHERENCE_SIGNAL",
    "DEFAULT_CONTEXT_RULE",
    "DEFAULT_LABEL_SCORING",
    "DEFAULT_STEP_SIGNAL",
    "ENHANCE_FIELDS",
    "JUDGE_MODES",
    "LABEL_SCORINGS",
    "PROMPTS",
    "PROMPT_FORMATS",
    "REFUSAL",
    "RESPONSE_ADHERENCE",
    "RETRIEVAL_NEED",
    "RETRIEVAL_NEED_VERSION",
    "SCORED_STEPS",
    "SPLITTERS",
    "SPLIT_STATEMENTS",
    "STATEMENT_RELEVANCE",
    "STEP_SIGNALS",
    "VERA_FIELDS",
    "AdherenceInput",
    "AdherenceSignal",
    "AnswerFn",
    "ChatJudge",
    "ContextSentenceInput",
    "Decision",
    "Example",
    "Judge",
    "JudgeFailure",
    "JudgeMode",
    "JudgePrompt",
    "Judgment",
    "KeepRule",
    "LabelJudge",
    "LabelScoring",
    "OfflineSignals",
    "PromptFormat",
    "QuestionInput",
    "RetrievalCheck",
    "RetrievalNeedModel",
    "Retriever",
    "SplitInput",
    "SplitPrompt",
    "SplitterMode",
    "StatementInput",
    "StepResult",
    "StepSignal",
    "Vera",
    "VeraAnswer",
    "VeraEnhance",
    "VeraEnhancement",
    "VeraEvaluation",
    "VeraEvaluator",
    "VeraPipeline",
    "VeraSettings",
    "Verdict",
    "decide_label",
    "default_cache_dir",
    "label_probabilities",
    "label_scores",
    "make_judge",
    "needs_documents_set",
    "score_choices",
    "sentence_lift_requests",
]
