"""Two runs side by side: per score, the paired difference on the rows both runs scored.

Rows are paired by their ``id`` (rows without one by position), so runs on different inputs are
compared on the rows they share, and the comparison says how many. The difference is ``B - A``; its
95% interval is a paired percentile bootstrap of the mean difference (:func:`ragsense.stats.mean_ci`
of the per-row differences: rows are resampled as pairs; 2,000 draws, seed 0), so it stays inside the
range of the differences; its p-value is Wilcoxon's signed-rank test (two-sided), and a row counts as
better or worse when its score moved by more than ``tolerance``. A row that is a refusal in either run
is left out of the score comparisons and counted in the verdict changes (the one refusal rule,
:data:`ragsense.contract.REFUSAL`).

>>> a = [{"id": str(i), "consens": 0.1 * i} for i in range(10)]
>>> b = [{"id": str(i), "consens": 0.1 * i + 0.05} for i in range(10)]
>>> c = compare_rows(a, b, ["consens"])
>>> c.n_shared, c.scores[0].n_better, c.scores[0].n_worse, round(c.scores[0].mean_difference, 3)
(10, 10, 0, 0.05)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragsense.contract import is_refusal_row
from ragsense.runs._store import RunStore
from ragsense.stats import MEAN_CI_RESAMPLES, mean_ci, wilcoxon_signed_rank

DEFAULT_TOLERANCE = 1e-9
"""A row is better or worse when its score moved by more than this (float noise is not a change)."""


def score_value(value: Any) -> float | None:
    """A row field as a score: a number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _key(row: Mapping[str, Any], position: int) -> str:
    if row.get("id") is not None:
        return str(row["id"])
    return f"#{row.get('_row', position)}"


@dataclass(frozen=True)
class ScoreComparison:
    """One score field of two runs on their shared rows."""

    score: str
    n: int
    mean_a: float | None
    mean_b: float | None
    mean_difference: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    n_better: int
    n_worse: int
    n_same: int
    higher_is_better: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "n": self.n,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_difference": self.mean_difference,
            "ci95": None if self.ci95 is None else list(self.ci95),
            "p_value": self.p_value,
            "n_better": self.n_better,
            "n_worse": self.n_worse,
            "n_same": self.n_same,
        }


@dataclass(frozen=True)
class VerdictComparison:
    """One verdict field: counts of each verdict in A and in B on the shared rows, and how many rows
    changed verdict."""

    field: str
    counts_a: dict[str, int]
    counts_b: dict[str, int]
    n_changed: int

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "a": self.counts_a, "b": self.counts_b, "n_changed": self.n_changed}


@dataclass(frozen=True)
class RowChange:
    """One shared row's change in one score (``B - A``)."""

    key: str
    score: str
    a: float
    b: float

    @property
    def difference(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_rows` finds; ``to_dict()`` is JSON-ready."""

    n_a: int
    n_b: int
    n_shared: int
    scores: list[ScoreComparison]
    verdicts: list[VerdictComparison] = field(default_factory=list)
    changes: list[RowChange] = field(default_factory=list)

    def worst(self, score: str, limit: int | None = None) -> list[RowChange]:
        """The shared rows whose ``score`` dropped, most first."""
        dropped = sorted(
            (c for c in self.changes if c.score == score and c.difference < 0),
            key=lambda c: (c.difference, c.key),
        )
        return dropped if limit is None else dropped[:limit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "n_shared": self.n_shared,
            "scores": [s.to_dict() for s in self.scores],
            "verdicts": [v.to_dict() for v in self.verdicts],
        }


def compare_rows(
    rows_a: Sequence[Mapping[str, Any]],
    rows_b: Sequence[Mapping[str, Any]],
    scores: Sequence[str],
    verdicts: Sequence[str] = (),
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    bootstrap: int = MEAN_CI_RESAMPLES,
) -> Comparison:
    """Compare ``scores`` (and ``verdicts``) of two runs' rows, paired by row id.

    >>> a = [{"id": "x", "consens": 0.2, "verdict": "unsure"},
    ...      {"id": "y", "consens": -0.6, "verdict": "refusal"}]
    >>> b = [{"id": k, "consens": 0.9, "verdict": "grounded"} for k in "xy"]
    >>> c = compare_rows(a, b, ["consens"], ["verdict"])
    >>> c.scores[0].n, c.verdicts[0].n_changed
    (1, 2)
    """
    index_a = {_key(r, k): r for k, r in enumerate(rows_a)}
    index_b = {_key(r, k): r for k, r in enumerate(rows_b)}
    shared = [key for key in index_a if key in index_b]
    fields = list(verdicts) or ["verdict"]
    judged = [
        k for k in shared if not (is_refusal_row(index_a[k], fields) or is_refusal_row(index_b[k], fields))
    ]
    out: list[ScoreComparison] = []
    changes: list[RowChange] = []
    for score in scores:
        pairs = [
            (key, x, y)
            for key in judged
            if (x := score_value(index_a[key].get(score))) is not None
            and (y := score_value(index_b[key].get(score))) is not None
        ]
        if not pairs:
            out.append(ScoreComparison(score, 0, None, None, None, None, None, 0, 0, 0))
            continue
        xs = [p[1] for p in pairs]
        ys = [p[2] for p in pairs]
        differences = [y - x for x, y in zip(xs, ys, strict=True)]
        changes.extend(RowChange(key, score, x, y) for key, x, y in pairs)
        nonzero = [d for d in differences if abs(d) > tolerance]
        # Resampling the differences is resampling the pairs: one interval code for every mean.
        mean_difference, low, high = mean_ci(differences, resamples=bootstrap)
        out.append(
            ScoreComparison(
                score=score,
                n=len(pairs),
                mean_a=sum(xs) / len(xs),
                mean_b=sum(ys) / len(ys),
                mean_difference=mean_difference,
                ci95=(low, high),
                p_value=wilcoxon_signed_rank(nonzero) if nonzero else 1.0,
                n_better=sum(d > tolerance for d in differences),
                n_worse=sum(d < -tolerance for d in differences),
                n_same=sum(abs(d) <= tolerance for d in differences),
            )
        )
    verdict_out: list[VerdictComparison] = []
    for name in verdicts:
        both = [
            (index_a[k].get(name), index_b[k].get(name))
            for k in shared
            if index_a[k].get(name) is not None and index_b[k].get(name) is not None
        ]
        counts_a: dict[str, int] = {}
        counts_b: dict[str, int] = {}
        for x, y in both:
            counts_a[str(x)] = counts_a.get(str(x), 0) + 1
            counts_b[str(y)] = counts_b.get(str(y), 0) + 1
        verdict_out.append(
            VerdictComparison(
                name,
                dict(sorted(counts_a.items())),
                dict(sorted(counts_b.items())),
                sum(x != y for x, y in both),
            )
        )
    return Comparison(len(rows_a), len(rows_b), len(shared), out, verdict_out, changes)


def compare_runs(store: RunStore, ref_a: str, ref_b: str) -> Comparison:
    """Compare two stored runs (``B - A``) on every score and verdict field they share."""
    a, b = store.get(ref_a), store.get(ref_b)
    scores = [s for s in a.score_fields() if s in b.score_fields()]
    verdicts = [v for v in a.verdict_fields() if v in b.verdict_fields()]
    return compare_rows(store.rows(a.id), store.rows(b.id), scores, verdicts)


def format_comparison(comparison: Comparison, label_a: str = "A", label_b: str = "B") -> str:
    """A plain-text table of a comparison (what ``ragsense compare`` prints)."""
    from ragsense.tables import render_table

    lines = [
        f"{label_a}: {comparison.n_a} rows; {label_b}: {comparison.n_b} rows; compared on the "
        f"{comparison.n_shared} rows they share by id"
    ]
    table = []
    for s in comparison.scores:
        if s.n == 0:
            table.append([s.score, "0", "-", "-", "-", "-", "-", "-"])
            continue
        ci = "-" if s.ci95 is None else f"[{s.ci95[0]:+.3f}, {s.ci95[1]:+.3f}]"
        table.append(
            [
                s.score,
                str(s.n),
                f"{s.mean_a:+.3f}",
                f"{s.mean_b:+.3f}",
                f"{s.mean_difference:+.3f}",
                ci,
                "-" if s.p_value is None else f"{s.p_value:.3g}",
                f"{s.n_better}/{s.n_worse}/{s.n_same}",
            ]
        )
    headers = [
        "score",
        "n",
        f"mean {label_a}",
        f"mean {label_b}",
        "B - A",
        "95% CI",
        "p",
        "better/worse/same",
    ]
    lines.append(render_table(headers, table, [18, 6, 9, 9, 8, 18, 8, 18]))
    for v in comparison.verdicts:
        a = ", ".join(f"{k} {n}" for k, n in v.counts_a.items())
        b = ", ".join(f"{k} {n}" for k, n in v.counts_b.items())
        lines.append(f"{v.field}: {label_a}: {a}; {label_b}: {b}; {v.n_changed} rows changed {v.field}")
    lines.append(
        "B - A: paired mean difference, 95% paired bootstrap interval (2,000 draws); p: Wilcoxon signed-rank"
    )
    return "\n".join(lines)
