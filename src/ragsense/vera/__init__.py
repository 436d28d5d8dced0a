"""VERA: evaluate and enhance the retrieved context and the generated answer (Birur et al.).

>>> from ragsense.vera import Vera
>>> from ragsense.data import RagRow
>>> vera = Vera("fake", cache=False)
>>> row = RagRow(id="1", question="Who designed the Orvel bridge?",
...              contexts=["The Orvel bridge was designed by Mara Quint."], answer="Mara Quint.")
>>> [result] = vera.enhance_sync([row])
>>> result.refused in (True, False)
True
"""

from ragsense.vera._judge import (
    JUDGE_MODES,
    ChatJudge,
    Judge,
    JudgeMode,
    LabelJudge,
    Verdict,
    make_judge,
    score_choices,
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
from ragsense.vera._vera import (
    ADHERENCE_SIGNALS,
    SCORED_STEPS,
    SPLITTERS,
    AdherenceSignal,
    AnswerFn,
    JudgeFailure,
    SplitterMode,
    Vera,
    default_cache_dir,
)

__all__ = [
    "ADHERENCE_SIGNALS",
    "CONTEXT_RELEVANCE",
    "JUDGE_MODES",
    "PROMPTS",
    "REFUSAL",
    "RESPONSE_ADHERENCE",
    "RETRIEVAL_NEED",
    "SCORED_STEPS",
    "SPLITTERS",
    "SPLIT_STATEMENTS",
    "STATEMENT_RELEVANCE",
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
    "LabelJudge",
    "QuestionInput",
    "RetrievalCheck",
    "Retriever",
    "SplitInput",
    "SplitPrompt",
    "SplitterMode",
    "StatementInput",
    "StepResult",
    "Vera",
    "VeraAnswer",
    "VeraEnhancement",
    "VeraEvaluation",
    "VeraPipeline",
    "Verdict",
    "default_cache_dir",
    "make_judge",
    "score_choices",
]
