"""Context grounding: the ConSens score, document attribution and the similarity baseline.

>>> from ragsense.grounding import grounding
>>> grounding("Who?", ["Ada Lovelace wrote the first program."], "Ada Lovelace.", model="fake").consens > 0
True
"""

from ragsense.grounding._api import get_model, grounding, grounding_batch, score_rows
from ragsense.grounding._consens import (
    Aggregation,
    consens_from_log_ppl,
    consens_from_word_nll,
    log_mean_perplexity,
)
from ragsense.grounding._prompt import PAPER_TEMPLATE, PromptTemplate
from ragsense.grounding._scorer import (
    DEFAULT_AGGREGATION,
    DocumentAttribution,
    GroundingResult,
    GroundingScorer,
    WordDetail,
)

__all__ = [
    "DEFAULT_AGGREGATION",
    "PAPER_TEMPLATE",
    "Aggregation",
    "DocumentAttribution",
    "GroundingResult",
    "GroundingScorer",
    "PromptTemplate",
    "WordDetail",
    "consens_from_log_ppl",
    "consens_from_word_nll",
    "get_model",
    "grounding",
    "grounding_batch",
    "log_mean_perplexity",
    "score_rows",
]
