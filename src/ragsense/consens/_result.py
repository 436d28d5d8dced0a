"""What ConSens gives for one answer, and where its scores become verdicts by default.

:class:`GroundingResult` (with :class:`WordDetail` per scored word and :class:`DocumentAttribution` per
left-out document) is what the scorer returns and what ``GroundingResult.from_dict`` reads back from an
output row; the default bands of each aggregation and the verdict helpers live beside it because a
result draws its own verdict when none was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ragsense.consens._binding import BindingFinding
from ragsense.consens._math import Aggregation
from ragsense.consens._verdicts import Bands, verdict_of
from ragsense.errors import ParameterError

# The default score, "support" (docs/metrics.md): rule 2 of papers/consens/grounding_default.py chose it on
# development halves of five sets (docs/results.md). The paper's ConSens is ARITHMETIC; the old default Q25.
DEFAULT_AGGREGATION = Aggregation.SUPPORT
# Default verdict bands per aggregation, (grounded_at, ungrounded_below): "grounded" at or above the
# first, "ungrounded" below the second, "unsure" in between. The support bands come from rule 2 of
# papers/consens/grounding_default.py (balanced precision 0.9 on the development halves of the
# answer-level sets); the others from papers/consens/consens_aggregates.py (docs/results.md).
_DEFAULT_EDGES: dict[Aggregation, tuple[float, float]] = {
    Aggregation.ARITHMETIC: (0.67, 0.19),
    Aggregation.GEOMETRIC: (0.72, 0.40),
    Aggregation.MIN_WORD: (-0.75, -0.84),
    Aggregation.Q10: (-0.21, -0.37),
    Aggregation.Q25: (0.02, 0.00),
    Aggregation.TAIL25: (-0.23, -0.34),
    Aggregation.MEAN_TAIL: (0.33, 0.25),
    Aggregation.SHARE: (0.50, 0.50),
    Aggregation.SUPPORT: (0.83, -0.23),
    Aggregation.SUPPORT_COUNT: (0.56, -0.61),  # rule 3 of papers/consens/grounding_default.py
    Aggregation.LEARNED: (0.29, -0.67),  # learned_verdict.json's fit.bands
}
DEFAULT_BANDS: dict[Aggregation, Bands] = {
    agg: Bands(agg.value, grounded_at=g, ungrounded_below=u, origin="default")
    for agg, (g, u) in _DEFAULT_EDGES.items()
}
"""The default :class:`Bands` of each aggregation (``--bands FILE`` replaces them)."""
GROUNDED_AT = DEFAULT_BANDS[DEFAULT_AGGREGATION].grounded_at
UNGROUNDED_BELOW = DEFAULT_BANDS[DEFAULT_AGGREGATION].ungrounded_below
# Leave-one-out attribution ranks documents by the geometric mean, whatever the row's aggregation: a
# removed document makes many words a little less likely, which a mean sees and a low quantile does not
# (PubMedQA top-1 94.9% against q25's 63.3%, docs/results.md; chosen on that data, not tested apart).
ATTRIBUTION_AGGREGATION = Aggregation.GEOMETRIC


def default_bands(aggregation: Aggregation | str = DEFAULT_AGGREGATION) -> Bands:
    """The default bands of ``aggregation``.

    >>> b = default_bands()
    >>> (b.score, b.grounded_at) == (DEFAULT_AGGREGATION.value, GROUNDED_AT)
    True
    >>> default_bands("q25").grounded_at
    0.02
    """
    return DEFAULT_BANDS[Aggregation(aggregation)]


def verdict(
    score: float, aggregation: Aggregation | str = DEFAULT_AGGREGATION, *, bands: Bands | None = None
) -> str:
    """``grounded``, ``unsure`` or ``ungrounded``: the band of ``score`` under ``bands`` (by default
    the default bands of ``aggregation``). ``refusal`` is decided from the answer's words, not here.

    >>> [verdict(x) for x in (0.9, 0.01, -0.3)]
    ['grounded', 'unsure', 'ungrounded']
    >>> verdict(0.6, "geometric")
    'unsure'
    """
    return (bands or default_bands(aggregation)).verdict(score)


def check_bands(bands: Bands | None, aggregation: Aggregation) -> Bands:
    """``bands`` (default: the aggregation's defaults), refused when fitted on another score.

    >>> check_bands(Bands("geometric", 0.5, 0.1), Aggregation.Q25)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: bands: the bands were fitted on geometric scores; this score is q25 ...
    """
    if bands is None:
        return default_bands(aggregation)
    if bands.score != aggregation.value:
        raise ParameterError(
            f"the bands were fitted on {bands.score} scores; this score is {aggregation.value} "
            f"(score with --aggregation {bands.score} / aggregation={bands.score!r}, or fit bands on "
            f"{aggregation.value})",
            parameter="bands",
        )
    return bands


LEGACY_RAW_FIELD = "r"
"""``consens_raw``'s name in older output files (read as ``ln(P_empty / P_context)``, which it is not)."""


@dataclass(frozen=True)
class WordDetail:
    """One scored answer word: its span in the answer and its perplexity in each condition."""

    word: str
    start: int
    end: int
    ppl_context: float | None
    ppl_empty: float | None
    nll_context: float
    nll_empty: float
    stated: bool = False  # the context states the word (exact, lemma or number match: text.stated_in_context)


@dataclass(frozen=True)
class DocumentAttribution:
    """What happens to the score when document ``index`` is left out of the context: ``consens_without``
    and ``drop`` use :data:`ATTRIBUTION_AGGREGATION`; ``consens_without_by_aggregation`` has the others
    (``learned`` where the row's has it)."""

    index: int
    consens_without: float
    drop: float  # score(full context) - score(without this document); larger = more relied on
    consens_without_by_aggregation: dict[str, float] = field(default_factory=dict)
    truncated: bool = False


@dataclass(frozen=True)
class GroundingResult:
    """ConSens of one answer. ``consens`` uses ``aggregation``; ``consens_by_aggregation`` has every one
    (``learned`` only where it was asked for: the scorer's ``learned`` option or its aggregation).
    ``consens_raw``: the aggregation's value before it becomes the score (``RAW_SCORE_MEANINGS``; only
    ``arithmetic`` and ``geometric`` make it ``ln(P_empty / P_context)``), ``r`` in older files."""

    consens: float
    consens_raw: float
    ppl_context: float | None
    ppl_empty: float | None
    aggregation: str
    consens_by_aggregation: dict[str, float]
    words: list[WordDetail]
    fallback: str | None = None
    truncated: bool = False
    context_tokens_dropped: int = 0
    kept_documents: list[int] = field(default_factory=list)
    context_selection: str = "all"
    """How the context was fitted: ``all`` (nothing dropped), ``documents`` or ``sentences`` (the most
    relevant ones kept within the budget), ``tail`` (its end cut). ``kept_documents`` are indices
    into the row's contexts; ``truncated`` is set whenever something was dropped."""
    attribution: list[DocumentAttribution] | None = None
    top_document: int | None = None
    """The index (from 0, into the row's contexts) of the document whose removal lowers the score
    most; None without attribution, or when no document's removal lowers it."""
    notes: list[str] = field(default_factory=list)
    refusal: bool = False
    binding: list[BindingFinding] | None = None
    """The binding check's misbound findings, strongest first (``[]``: checked, none found; ``None``:
    not checked, the check being off or the answer a refusal); ``binding_variants`` were scored."""
    binding_variants: int = 0
    verdict: str = ""
    """``refusal`` when the answer declines to answer, else the band of :attr:`consens`; the scorer
    sets it with its bands, and an empty value means the default bands of :attr:`aggregation`."""

    def __post_init__(self) -> None:
        if not self.verdict:
            band = verdict_of(self.consens, self.refusal, default_bands(self.aggregation))
            object.__setattr__(self, "verdict", band)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (no NaN or infinity: overflowing perplexities are ``None``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> GroundingResult:
        """The result back from :meth:`to_dict` output (extra keys such as ``model`` are ignored).

        >>> r = GroundingResult(0.5, 1.1, 2.0, 6.0, "geometric", {"geometric": 0.5}, [])
        >>> GroundingResult.from_dict(r.to_dict()) == r
        True
        >>> old = {k: v for k, v in r.to_dict().items() if k != "consens_raw"} | {"r": 1.1}
        >>> GroundingResult.from_dict(old) == r  # a file written when the field was called ``r``
        True
        """
        attribution = fields.get("attribution")
        binding = fields.get("binding")
        return cls(
            consens=fields["consens"],
            consens_raw=fields["consens_raw"] if "consens_raw" in fields else fields[LEGACY_RAW_FIELD],
            ppl_context=fields["ppl_context"],
            ppl_empty=fields["ppl_empty"],
            aggregation=fields["aggregation"],
            consens_by_aggregation=dict(fields["consens_by_aggregation"]),
            words=[WordDetail(**w) for w in fields["words"]],
            fallback=fields.get("fallback"),
            truncated=bool(fields.get("truncated", False)),
            context_tokens_dropped=int(fields.get("context_tokens_dropped", 0)),
            kept_documents=list(fields.get("kept_documents", [])),
            context_selection=str(fields.get("context_selection", "all")),
            attribution=None if attribution is None else [DocumentAttribution(**a) for a in attribution],
            top_document=fields.get("top_document"),
            notes=list(fields.get("notes", [])),
            refusal=bool(fields.get("refusal", False)),
            binding=None if binding is None else [BindingFinding.from_dict(f) for f in binding],
            binding_variants=int(fields.get("binding_variants", 0)),
            verdict=str(fields.get("verdict") or ""),
        )
