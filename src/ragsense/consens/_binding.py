"""The binding check: does the context make the answer's bindings more likely than their rebindings?

Lexical support (the default score's evidence) counts a word the context states as supported wherever
the answer puts it. The binding check asks the reader instead. For each answer it builds up to
:attr:`BindingCheck.max_variants` *variants* that rebind the spans the context states
(:func:`ragsense.text.binding_variants`: two names or numbers swapped, a span replaced by another of
its kind from the context, a negation added or removed) and scores them as continuations of the
**same prompt** as the answer, so the prompt pass is shared and only the continuations cost:

* ``margin``: ``log p(variant | context) - log p(answer | context)`` from the first changed word to
  the end of the changed sentence (the text before and after is the same, so it cancels), in nats:
  how much the reader, reading the context, prefers the variant;
* ``lift``: ``margin`` minus the same difference without the context: the part of the preference
  that comes from the context (a shorter or more common phrasing is preferred with or without it).

A variant is scored without the context only when it is preferred with it (``margin >=
min_margin``): most variants of a grounded answer lose, so most rows pay for the context condition
only. A variant with ``margin >= min_margin`` and ``lift >= min_lift`` marks its span **misbound**.
The scorer then counts each answer word of a misbound span as unsupported with a contrast of
``-min(margin, lift)`` nats (:func:`misbound_strengths`), so the support score falls in proportion to
how strongly the context prefers the rebinding, on the same scale and bands as before. An answer
with no stated span that could be rebound gets no variant and scores exactly as without the check.

>>> f = BindingFinding("substitute", "ordinal", [[20, 26]], "second", "fourth", 9.14, 7.5, True)
>>> f.reason()
"the context prefers 'fourth' to 'second' here, by 9.1 nats"
>>> BindingFinding("negation", "negation", [[4, 7]], "not", NO_NEGATION, 3.0, 2.0, True).reason()
"the context prefers this without 'not', by 3.0 nats"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ragsense.errors import ParameterError
from ragsense.models import ContinuationScore, ScoreRequest
from ragsense.text import (
    DEFAULT_MAX_VARIANTS,
    NO_NEGATION,
    BindingVariant,
    Word,
    binding_variants,
    checkable_ranks,
)


@dataclass(frozen=True)
class BindingCheck:
    """Settings of the binding check (opt-in: ``ConSens(binding=True)`` runs these defaults).

    ``min_margin`` and ``min_lift`` are in nats; the defaults were fixed before the check was scored
    on any data (papers/consens/binding_check.py, docs/results.md "Binding check").
    ``checkable_only`` scores only the variants :func:`ragsense.text.checkable_ranks` keeps (no
    rebinding of a bare short answer, names rebound within their type, no swap of two mentions of one
    entity: amendment 2, papers/consens/binding_narrow.py). Off by default: by amendment 2's rule it
    loses too much on the recombination sets (bare answers are no longer checked), though it stops the
    check's false alarms on short answers (HaluEval-dev AUROC 0.604 with the check, 0.805 with
    ``checkable_only``, 0.800 without the check).

    >>> BindingCheck(max_variants=-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: max_variants: must be at least 0, got -1
    """

    max_variants: int = DEFAULT_MAX_VARIANTS
    min_margin: float = 0.0
    min_lift: float = 1.0
    checkable_only: bool = False

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_variants, bool)
            or not isinstance(self.max_variants, int)
            or self.max_variants < 0
        ):
            raise ParameterError(f"must be at least 0, got {self.max_variants!r}", parameter="max_variants")
        if not isinstance(self.checkable_only, bool):
            raise ParameterError(
                f"must be true or false, got {self.checkable_only!r}", parameter="checkable_only"
            )
        for name in ("min_margin", "min_lift"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value == value:
                raise ParameterError(f"must be a number, got {value!r}", parameter=name)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a run stores them (``checkable_only`` only when set, so runs stored before
        it existed keep their settings).

        >>> BindingCheck().to_dict()
        {'max_variants': 8, 'min_margin': 0.0, 'min_lift': 1.0}
        """
        fields = asdict(self)
        if not self.checkable_only:
            del fields["checkable_only"]
        return fields


DEFAULT_BINDING = BindingCheck()
"""The binding check's default settings (what ``ConSens(binding=True)`` runs)."""

BINDING_ON_BY_DEFAULT = False
"""Whether ConSens runs the binding check when not told: the rule of papers/consens/binding_check.py
decides it (docs/results.md, "The binding check (issue 46)"). Off: no setting of the grid kept every
development set's AUROC within 0.01 (on their development halves HaluEval lost 0.20 and the summaries
up to 0.17), so the check is opt-in (``ConSens(binding=True)``, ``--binding-check``) until a narrower
check passes."""

DEFAULT_BINDING_SETTING: BindingCheck | None = DEFAULT_BINDING if BINDING_ON_BY_DEFAULT else None
"""What a scorer runs when not told: :data:`DEFAULT_BINDING`, or None when the check is opt-in."""


@dataclass(frozen=True)
class BindingFinding:
    """One variant the reader preferred under the context (kept when ``misbound``).

    ``spans``: the changed ``[start, end]`` character spans in the answer; ``original`` the first
    one's text and ``replacement`` what the variant put there. ``margin`` and ``lift`` in nats (see
    the module docstring).
    """

    kind: str
    span_kind: str
    spans: list[list[int]]
    original: str
    replacement: str
    margin: float
    lift: float
    misbound: bool
    variant: int = 0  # the variant's rank among the answer's (0 = tried first)

    @property
    def strength(self) -> float:
        """How strongly the finding counts against its words: ``min(margin, lift)`` nats (>= 0)."""
        return max(0.0, min(self.margin, self.lift))

    def reason(self) -> str:
        """One line naming the finding, as every verdict explanation shows it."""
        if self.kind == "swap":
            what = f"'{self.original}' and '{self.replacement}' swapped"
            return f"the context prefers {what} here, by {self.margin:.1f} nats"
        if self.kind == "negation" and self.replacement == NO_NEGATION:
            return f"the context prefers this without '{self.original}', by {self.margin:.1f} nats"
        return (
            f"the context prefers '{self.replacement}' to '{self.original}' here, by {self.margin:.1f} nats"
        )

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> BindingFinding:
        return cls(
            kind=str(fields["kind"]),
            span_kind=str(fields["span_kind"]),
            spans=[[int(a), int(b)] for a, b in fields["spans"]],
            original=str(fields["original"]),
            replacement=str(fields["replacement"]),
            margin=float(fields["margin"]),
            lift=float(fields["lift"]),
            misbound=bool(fields["misbound"]),
            variant=int(fields.get("variant", 0)),
        )


@dataclass
class BindingPlan:
    """The variants of one row and the requests that score them.

    A variant is compared with the answer from its first changed word to the end of the sentences it
    changes: both are scored as continuations of the row's prompt followed by the answer's text
    before that word (:func:`stretch`). ``with_context[i]`` and ``originals[i]`` score variant ``i``
    and the answer's same stretch under the context; ``bounds[i]`` is where that stretch lies in the
    answer's own continuation, so its log-probability is read off the answer's own scores
    (:func:`answer_totals`) and ``originals[i]`` is scored only where it cannot be. The scorer sends
    the answer and its variants to the model as one :class:`~ragsense.models.ScoreGroup` per row (one
    packed pass on the row's prompt state); the no-context requests are made only for the variants
    that win under the context.
    """

    variants: list[BindingVariant]
    with_context: list[ScoreRequest]
    originals: list[ScoreRequest]
    ranks: list[int] | None = None  # each variant's rank among the answer's (None: 0, 1, 2...)
    # Where each original stretch lies in the answer's own continuation string ([start, end)
    # characters; empty: unknown, each original then has its own request).
    bounds: list[tuple[int, int]] = field(default_factory=list)
    # Variants built but left out because their request would not fit the model window.
    left_out: int = 0

    def rank(self, index: int) -> int:
        return index if self.ranks is None else self.ranks[index]


def first_change(answer: str, variant: BindingVariant) -> int:
    """Where ``variant`` and ``answer`` start to be compared: before the whitespace that precedes the
    word holding their first difference (at the earliest ``variant.start``, the changed sentence's).

    The text before it is the same in both, so its log-probabilities would cancel in the margin; it
    goes into the shared prompt instead and is run once. Starting at a word's leading whitespace keeps
    the compared text on a token boundary of both (``" 2001"``, ``" 1999"``).

    >>> from ragsense.text import binding_variants
    >>> a = "It is red. It was built in 1999."
    >>> v = binding_variants(a, ["Built in 1999, not 2001; it is red."])[-1]
    >>> a[: first_change(a, v)]
    'It is red. It was built in'
    """
    text, same = variant.text, variant.start
    limit = min(variant.cut, variant.variant_cut)
    while same < limit and text[same] == answer[same]:
        same += 1
    at = same
    while at > variant.start and not answer[at - 1].isspace():
        at -= 1
    while at > variant.start and answer[at - 1].isspace():
        at -= 1
    return at


def stretch(
    prompt: ScoreRequest,
    answer: str,
    variant: BindingVariant,
    continuation: Callable[[str], str],
    at: int | None = None,
) -> tuple[ScoreRequest, ScoreRequest]:
    """``(variant request, answer request)`` comparing ``variant`` with ``answer`` after ``prompt``:
    from :func:`first_change` to the end of the changed sentences (``at``: that place, when known).

    >>> from ragsense.text import binding_variants
    >>> v = binding_variants("It is red. It was built in 1999.", ["Built in 1999, not 2001; it is red."])[-1]
    >>> var, ans = stretch(ScoreRequest("Q:", ""), "It is red. It was built in 1999.", v, lambda a: " " + a)
    >>> var.prompt, var.continuation, ans.continuation
    ('Q: It is red. It was built in', ' 2001.', ' 1999.')
    """
    at = first_change(answer, variant) if at is None else at
    if at == 0:
        # The row's own prompt: the answer's request is then the row's own when the stretch is the
        # whole answer.
        head, splits = prompt.prompt, prompt.splits
        var, orig = continuation(variant.text[: variant.variant_cut]), continuation(answer[: variant.cut])
    else:
        splits = (*prompt.splits, len(prompt.prompt))
        head = prompt.prompt + continuation(answer[:at])
        var, orig = variant.text[at : variant.variant_cut], answer[at : variant.cut]
    return ScoreRequest(head, var, splits), ScoreRequest(head, orig, splits)


def plan_binding(
    answer: str,
    contexts: Sequence[str],
    full: ScoreRequest,
    continuation: Callable[[str], str],
    check: BindingCheck,
    fits: Callable[[ScoreRequest], bool] | None = None,
) -> BindingPlan:
    """The variants of ``answer`` against ``contexts`` (as scored) and their requests under ``full``'s
    prompt; ``continuation`` turns answer text into a continuation (the template's).

    ``fits`` says whether a request fits the model window. The context was cut to fit the answer, so
    a variant longer than the answer (a longer name put in) can pass the window: such a variant is
    left out (counted in ``left_out``, noted on the row) rather than failing the row."""
    variants = binding_variants(answer, contexts, limit=check.max_variants)
    ranks = list(range(len(variants)))
    if check.checkable_only:
        ranks = checkable_ranks(answer, contexts, variants)
    starts = {r: first_change(answer, variants[r]) for r in ranks}
    pairs = {r: stretch(full, answer, variants[r], continuation, starts[r]) for r in ranks}
    kept = [r for r in ranks if fits is None or fits(pairs[r][0])]
    left_out = len(ranks) - len(kept)
    variants_kept = [variants[r] for r in kept]
    # The original's continuation is the answer's from ``at`` (from 0 when at == 0: stretch()).
    bounds = [
        (len(continuation(answer[: starts[r]])) if starts[r] else 0, len(continuation(answer[: v.cut])))
        for r, v in zip(kept, variants_kept, strict=True)
    ]
    return BindingPlan(
        variants_kept,
        [pairs[r][0] for r in kept],
        [pairs[r][1] for r in kept],
        kept,
        bounds,
        left_out,
    )


def answer_totals(plan: BindingPlan, own: ContinuationScore) -> list[float | None]:
    """Each original stretch's log-probability read off the answer's own scores (``own``: the row's
    request under the same prompt, which ConSens scores anyway): its tokens that end inside the
    stretch's bounds. None where a token crosses the stretch's end (the stretch is then not a run of
    the answer's tokens) or the bounds are unknown: that original needs its own request.

    The original request tokenizes the same text up to the stretch's end, so where a token ends
    there its tokens are the answer's own, and their log-probabilities differ from its own request's
    only by the summation order of the passes that computed them.

    >>> from ragsense.models import ContinuationScore
    >>> own = ContinuationScore((" It", " is", " red", "."), ((0, 3), (3, 6), (6, 10), (10, 11)),
    ...                         (-1.0, -0.5, -2.0, -0.25), prompt_tokens=3)
    >>> p = BindingPlan([], [], [], bounds=[(6, 11), (0, 8)])
    >>> answer_totals(p, own)
    [-2.25, None]
    """
    if not plan.bounds:
        return [None] * len(plan.variants)
    totals: list[float | None] = []
    for start, end in plan.bounds:
        picked = [lp for (a, b), lp in zip(own.offsets, own.logprobs, strict=True) if start < b <= end]
        crossed = any(a < end < b for a, b in own.offsets)
        totals.append(None if crossed or not picked else float(sum(picked)))
    return totals


def own_requests(originals: Mapping[int, ScoreRequest], totals: Sequence[float | None]) -> list[ScoreRequest]:
    """The original stretches that :func:`answer_totals` could not read, among ``originals`` (variant
    index -> the answer's stretch request under the step's prompt: every variant's under the context,
    the preferred variants' without it): they are scored as requests.

    >>> from ragsense.models import ScoreRequest
    >>> without = {1: ScoreRequest("Q: It is", " red.")}
    >>> own_requests(without, [None, None, -2.0])  # variant 0 is not asked without the context
    [ScoreRequest(prompt='Q: It is', continuation=' red.', splits=())]
    """
    return [originals[i] for i, total in enumerate(totals) if total is None and i in originals]


def _total(score: ContinuationScore) -> float:
    return float(sum(score.logprobs))


def margins_with_context(
    plan: BindingPlan,
    scored: Mapping[ScoreRequest, ContinuationScore],
    totals: Sequence[float | None],
) -> list[float]:
    """Each variant's ``margin``: its log-probability under the context minus the answer's, from the
    first change to the end of the sentences it changes (``totals``: :func:`answer_totals` under the
    context; a None one is read from ``scored``)."""
    return [
        _total(scored[v]) - (_total(scored[o]) if t is None else t)
        for v, o, t in zip(plan.with_context, plan.originals, totals, strict=True)
    ]


def no_context_requests(
    plan: BindingPlan,
    margins: Sequence[float],
    empty: ScoreRequest,
    answer: str,
    continuation: Callable[[str], str],
    check: BindingCheck,
) -> list[tuple[int, ScoreRequest, ScoreRequest]]:
    """``(variant index, variant request, answer request)`` without the context, for the variants
    preferred under it."""
    return [
        (i, *stretch(empty, answer, v, continuation))
        for i, (v, m) in enumerate(zip(plan.variants, margins, strict=True))
        if m >= check.min_margin
    ]


def findings_of(
    plan: BindingPlan,
    margins: Sequence[float],
    without: Sequence[tuple[int, ScoreRequest, ScoreRequest]],
    scored: Mapping[ScoreRequest, ContinuationScore],
    check: BindingCheck,
    totals: Sequence[float | None] = (),
) -> list[BindingFinding]:
    """The misbound findings, strongest first (ties in variant order); ``totals``: the answer's
    stretches without the context (:func:`answer_totals`; a None or missing one is read from
    ``scored``)."""
    out = []
    for i, variant_req, original_req in without:
        v = plan.variants[i]
        own = totals[i] if i < len(totals) else None
        original = _total(scored[original_req]) if own is None else own
        lift = margins[i] - (_total(scored[variant_req]) - original)
        if lift >= check.min_lift:
            out.append(
                BindingFinding(
                    kind=v.kind,
                    span_kind=v.span_kind,
                    spans=[[a, b] for a, b in v.spans],
                    original=v.original,
                    replacement=v.replacement,
                    margin=margins[i],
                    lift=lift,
                    misbound=True,
                    variant=plan.rank(i),
                )
            )
    return sorted(out, key=lambda f: -f.strength)


def misbound_strengths(words: Sequence[Word], findings: Sequence[BindingFinding]) -> list[float]:
    """For each scored answer word, the strength of the strongest misbound finding on it (0 if none).

    A finding lands on the words that overlap its spans; one whose spans hold no scored word (a
    dropped "not") lands on the next scored word after its first span.

    >>> ws = [Word("paid", 6, 10), Word("second", 20, 26), Word("day", 27, 30)]
    >>> f = BindingFinding("substitute", "ordinal", [[20, 26]], "second", "fourth", 9.0, 7.5, True)
    >>> misbound_strengths(ws, [f])
    [0.0, 7.5, 0.0]
    """
    strengths = [0.0] * len(words)
    for f in findings:
        if not f.misbound:
            continue
        hit = [k for k, w in enumerate(words) if any(w.start < b and a < w.end for a, b in f.spans)]
        if not hit:
            first = min(a for a, _ in f.spans)
            hit = [k for k, w in enumerate(words) if w.start >= first][:1]
        for k in hit:
            strengths[k] = max(strengths[k], f.strength)
    return strengths


def with_misbound(
    nll_empty: Sequence[float],
    nll_context: Sequence[float],
    stated: Sequence[bool],
    strengths: Sequence[float],
) -> tuple[list[float], list[bool]]:
    """The context NLLs and stated flags the support scores read once misbound words count against
    the answer: a word of strength ``m > 0`` is unstated with a contrast of at most ``-m`` nats (its
    ``nll_context`` raised to ``nll_empty + m`` where lower). Words of strength 0 are unchanged, so an
    answer with no misbound word gives the very same inputs.

    >>> with_misbound([2.0, 3.0], [1.0, 1.0], [True, True], [0.0, 4.0])
    ([1.0, 7.0], [True, False])
    """
    nll = [
        c if m <= 0.0 else max(c, e + m) for e, c, m in zip(nll_empty, nll_context, strengths, strict=True)
    ]
    flags = [s and m <= 0.0 for s, m in zip(stated, strengths, strict=True)]
    return nll, flags


def binding_reasons(record: Mapping[str, Any]) -> list[str]:
    """The reasons of a stored row's misbound findings, strongest first (none for a row without).

    Every place that explains a verdict shows these (the terminal table, the report, JUnit rows,
    ``assert_grounded``, the guard, trace annotations), so a misbinding reads the same everywhere.

    >>> binding_reasons({"binding": [{"kind": "substitute", "span_kind": "ordinal", "spans": [[5, 11]],
    ...     "original": "second", "replacement": "fourth", "margin": 9.14, "lift": 8.0, "misbound": True}]})
    ["the context prefers 'fourth' to 'second' here, by 9.1 nats"]
    >>> binding_reasons({"consens": 1.0})
    []
    """
    found = record.get("binding")
    if not isinstance(found, list):
        return []
    out = []
    for item in found:
        try:
            finding = item if isinstance(item, BindingFinding) else BindingFinding.from_dict(item)
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited row: nothing readable to show
        if finding.misbound:
            out.append(finding.reason())
    return out
