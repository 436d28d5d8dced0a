"""ConSens context grounding: the score, leave-one-document-out attribution, the verdict bands, and the
:class:`ConSens` metric (``--metrics consens`` / ``attribution``). Score rows with
``ragsense.evaluate(rows, ["consens"])``; :class:`GroundingScorer` is the method's lower-level scorer,
which the metric uses.

>>> import asyncio
>>> from ragsense.models import load_model
>>> scorer = GroundingScorer(load_model("fake"))
>>> [r] = asyncio.run(scorer.score([("Who?", ["Ada Lovelace wrote the first program."], "Ada Lovelace.")]))
>>> r.consens > 0
True
"""

from ragsense.consens._binding import (
    BINDING_ON_BY_DEFAULT,
    DEFAULT_BINDING,
    BindingCheck,
    BindingFinding,
    binding_reasons,
    misbound_strengths,
    with_misbound,
)
from ragsense.consens._calibrate import (
    DEFAULT_FOLDS,
    DEFAULT_MIN_CALLED,
    DEFAULT_MIN_PER_CLASS,
    DEFAULT_TARGET_PRECISION,
    calibrate_bands,
    check_classes,
    choose_folds,
    grounded_edge,
    stratified_folds,
    supported_precision,
    ungrounded_edge,
)
from ragsense.consens._evidence import FEATURES as EVIDENCE_FEATURES
from ragsense.consens._evidence import floored, row_features
from ragsense.consens._learned import FEATURES as LEARNED_FEATURES
from ragsense.consens._learned import (
    LEARNED_FORMAT,
    LearnedVerdict,
    learned_features,
    learned_score,
    learned_verdict,
)
from ragsense.consens._math import (
    RAW_SCORE_MEANINGS,
    STATED_AGGREGATIONS,
    WORD_AGGREGATIONS,
    Aggregation,
    consens_from_log_ppl,
    consens_from_word_nll,
    expected_unsupported,
    log_mean_perplexity,
    support_r,
)
from ragsense.consens._metric import (
    ATTRIBUTION_FIELDS,
    CONSENS_FIELDS,
    RAW_FIELD,
    ConSens,
    attribution_metric,
    binding_check,
    rederived_row,
)
from ragsense.consens._prompt import PAPER_TEMPLATE, PromptTemplate
from ragsense.consens._result import (
    ATTRIBUTION_AGGREGATION,
    DEFAULT_AGGREGATION,
    DEFAULT_BANDS,
    GROUNDED_AT,
    LEGACY_RAW_FIELD,
    UNGROUNDED_BELOW,
    DocumentAttribution,
    GroundingResult,
    WordDetail,
    check_bands,
    default_bands,
    verdict,
)
from ragsense.consens._scorer import NO_CONTEXT_CACHE, GroundingScorer, NoContextCache
from ragsense.consens._select import (
    AUTO_BUDGET,
    AUTO_MIN_DOCUMENTS,
    AUTO_POLICY,
    CONTEXT_POLICIES,
    DEFAULT_CONTEXT_BUDGET,
    DEFAULT_CONTEXT_POLICY,
    ContextBudget,
    relevance_windows,
    row_budget,
    row_policy,
)
from ragsense.consens._shown import band_rule, bands_note, bands_text, edge_text, explain_row, score_text
from ragsense.consens._verdicts import (
    BANDS_FORMAT,
    VERDICTS,
    Bands,
    resolve_bands,
    verdict_of,
    weakest_words,
)

__all__ = [
    "ATTRIBUTION_AGGREGATION",
    "ATTRIBUTION_FIELDS",
    "AUTO_BUDGET",
    "AUTO_MIN_DOCUMENTS",
    "AUTO_POLICY",
    "BANDS_FORMAT",
    "BINDING_ON_BY_DEFAULT",
    "CONSENS_FIELDS",
    "CONTEXT_POLICIES",
    "DEFAULT_AGGREGATION",
    "DEFAULT_BANDS",
    "DEFAULT_BINDING",
    "DEFAULT_CONTEXT_BUDGET",
    "DEFAULT_CONTEXT_POLICY",
    "DEFAULT_FOLDS",
    "DEFAULT_MIN_CALLED",
    "DEFAULT_MIN_PER_CLASS",
    "DEFAULT_TARGET_PRECISION",
    "EVIDENCE_FEATURES",
    "GROUNDED_AT",
    "LEARNED_FEATURES",
    "LEARNED_FORMAT",
    "LEGACY_RAW_FIELD",
    "NO_CONTEXT_CACHE",
    "PAPER_TEMPLATE",
    "RAW_FIELD",
    "RAW_SCORE_MEANINGS",
    "STATED_AGGREGATIONS",
    "UNGROUNDED_BELOW",
    "VERDICTS",
    "WORD_AGGREGATIONS",
    "Aggregation",
    "Bands",
    "BindingCheck",
    "BindingFinding",
    "ConSens",
    "ContextBudget",
    "DocumentAttribution",
    "GroundingResult",
    "GroundingScorer",
    "LearnedVerdict",
    "NoContextCache",
    "PromptTemplate",
    "WordDetail",
    "attribution_metric",
    "band_rule",
    "bands_note",
    "bands_text",
    "binding_check",
    "binding_reasons",
    "calibrate_bands",
    "check_bands",
    "check_classes",
    "choose_folds",
    "consens_from_log_ppl",
    "consens_from_word_nll",
    "default_bands",
    "edge_text",
    "expected_unsupported",
    "explain_row",
    "floored",
    "grounded_edge",
    "learned_features",
    "learned_score",
    "learned_verdict",
    "log_mean_perplexity",
    "misbound_strengths",
    "rederived_row",
    "relevance_windows",
    "resolve_bands",
    "row_budget",
    "row_features",
    "row_policy",
    "score_text",
    "stratified_folds",
    "support_r",
    "supported_precision",
    "ungrounded_edge",
    "verdict",
    "verdict_of",
    "weakest_words",
    "with_misbound",
]
