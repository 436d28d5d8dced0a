"""ConSens context grounding: the score, leave-one-document-out attribution, the similarity baseline.

>>> from ragsense.consens import grounding
>>> grounding("Who?", ["Ada Lovelace wrote the first program."], "Ada Lovelace.", model="fake").consens > 0
True
"""

from ragsense.consens._api import get_model, grounding, grounding_batch, score_rows
from ragsense.consens._math import (
    Aggregation,
    consens_from_log_ppl,
    consens_from_word_nll,
    log_mean_perplexity,
)
from ragsense.consens._prompt import PAPER_TEMPLATE, PromptTemplate
from ragsense.consens._scorer import (
    DEFAULT_AGGREGATION,
    DocumentAttribution,
    GroundingResult,
    GroundingScorer,
    WordDetail,
)
from ragsense.consens._similarity import answer_context_similarity

__all__ = [
    "DEFAULT_AGGREGATION",
    "PAPER_TEMPLATE",
    "Aggregation",
    "DocumentAttribution",
    "GroundingResult",
    "GroundingScorer",
    "PromptTemplate",
    "WordDetail",
    "answer_context_similarity",
    "consens_from_log_ppl",
    "consens_from_word_nll",
    "get_model",
    "grounding",
    "grounding_batch",
    "log_mean_perplexity",
    "score_rows",
]
