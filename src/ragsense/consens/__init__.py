"""ConSens context grounding: the score, leave-one-document-out attribution, the similarity baseline.

>>> import asyncio
>>> from ragsense.models import load_model
>>> scorer = GroundingScorer(load_model("fake"))
>>> [r] = asyncio.run(scorer.score([("Who?", ["Ada Lovelace wrote the first program."], "Ada Lovelace.")]))
>>> r.consens > 0
True
"""

from ragsense.consens._math import (
    Aggregation,
    consens_from_log_ppl,
    consens_from_word_nll,
    log_mean_perplexity,
)
from ragsense.consens._prompt import PAPER_TEMPLATE, PromptTemplate
from ragsense.consens._scorer import (
    ATTRIBUTION_AGGREGATION,
    DEFAULT_AGGREGATION,
    GROUNDED_AT,
    NO_CONTEXT_CACHE,
    UNGROUNDED_BELOW,
    VERDICT_BANDS,
    VERDICTS,
    DocumentAttribution,
    GroundingResult,
    GroundingScorer,
    NoContextCache,
    WordDetail,
    verdict,
)
from ragsense.consens._similarity import answer_context_similarity

__all__ = [
    "ATTRIBUTION_AGGREGATION",
    "DEFAULT_AGGREGATION",
    "GROUNDED_AT",
    "NO_CONTEXT_CACHE",
    "PAPER_TEMPLATE",
    "UNGROUNDED_BELOW",
    "VERDICTS",
    "VERDICT_BANDS",
    "Aggregation",
    "DocumentAttribution",
    "GroundingResult",
    "GroundingScorer",
    "NoContextCache",
    "PromptTemplate",
    "WordDetail",
    "answer_context_similarity",
    "consens_from_log_ppl",
    "consens_from_word_nll",
    "log_mean_perplexity",
    "verdict",
]
