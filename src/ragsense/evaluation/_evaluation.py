"""What ``evaluate`` returns: the rows, a summary per metric, and ways to look at and keep them."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsense.contract import Metric, is_refusal_row
from ragsense.data import require_module
from ragsense.evaluation._agreement import Agreement, agreement_of
from ragsense.evaluation._outputs import check_output, save_rows
from ragsense.evaluation._runner import RunStats
from ragsense.stats import Share, format_share, mean_ci, shares_of


@dataclass(frozen=True)
class MetricInfo:
    """What a summary needs to know of a metric, kept after the metric object is closed."""

    name: str
    fields: tuple[str, ...]
    scores: tuple[str, ...]
    verdict: str | None
    settings: dict[str, Any]
    models: dict[str, str] = field(default_factory=dict)
    verdict_values: tuple[str, ...] = ()
    """Every value the verdict can take (declared by the metric), so a summary can say "0 of 5
    ungrounded" instead of leaving the verdict out."""

    @classmethod
    def of(cls, metric: Metric) -> MetricInfo:
        """The metric's description; after ``setup`` it includes the fingerprints of the models it
        loaded, from the optional capability hook ``model_fingerprints() -> {role: fingerprint}``."""
        hook = getattr(metric, "model_fingerprints", None)
        models = {str(k): str(v) for k, v in hook().items()} if callable(hook) else {}
        values = tuple(str(v) for v in getattr(metric, "verdict_values", ()) or ())
        return cls(
            metric.name,
            tuple(metric.fields),
            tuple(metric.scores),
            metric.verdict,
            metric.settings(),
            models,
            values if metric.verdict is not None else (),
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> MetricInfo:
        """The info :meth:`to_dict` gave (as a Ray worker sends it, or a shard folder keeps it).

        >>> info = MetricInfo("consens", ("consens",), ("consens",), None, {"k": 1})
        >>> MetricInfo.from_dict(info.to_dict()) == info
        True
        """
        return cls(
            name=str(raw["name"]),
            fields=tuple(raw["fields"]),
            scores=tuple(raw["scores"]),
            verdict=raw.get("verdict"),
            settings=dict(raw["settings"]),
            models=dict(raw.get("models", {})),
            # Every declared verdict, so the summary's shares list the ones no row got, too.
            verdict_values=tuple(raw.get("verdict_values", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the run store keeps it."""
        return {
            "name": self.name,
            "fields": list(self.fields),
            "scores": list(self.scores),
            "verdict": self.verdict,
            "settings": self.settings,
            "models": self.models,
            "verdict_values": list(self.verdict_values),
        }


@dataclass(frozen=True)
class ScoreSummary:
    """A numeric field over the rows that have it: n, mean and its 95% percentile bootstrap interval
    (:func:`ragsense.stats.mean_ci`: inside the range of the scores, never NaN)."""

    n: int
    mean: float
    ci95: tuple[float, float]


@dataclass(frozen=True)
class MetricSummary:
    """One metric over a run: rows scored, rows in error, verdict counts and shares, each score's mean.

    ``verdict_shares``: per verdict value, its share of the scored rows with a verdict and the share's
    95% Wilson interval (``{"share", "low", "high", "n", "count"}``, :func:`ragsense.stats.share_ci`).
    A summary leads with these: a mean can look fine while most rows are ``ungrounded``.

    ``refusals``: scored rows that are refusals (:func:`ragsense.contract.is_refusal_row`): counted in
    the verdict shares, left out of the score means (the one refusal rule, docs/metrics.md).
    """

    name: str
    n: int
    errors: int
    scores: dict[str, ScoreSummary] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)
    verdict_shares: dict[str, Share] = field(default_factory=dict)
    refusals: int = 0
    agreement: Agreement | None = None
    """The verdicts against the rows' own labels (``label``/``expected``), when they carry any."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "n": self.n,
            "errors": self.errors,
            "refusals": self.refusals,
            "verdict_shares": {k: dict(v) for k, v in self.verdict_shares.items()},
            "scores": {k: {"n": s.n, "mean": s.mean, "ci95": list(s.ci95)} for k, s in self.scores.items()},
            "verdicts": dict(self.verdicts),
        }
        if self.agreement is not None:
            out["agreement"] = self.agreement.to_dict()
        return out


@dataclass(frozen=True)
class Summary:
    """The run at a glance: rows, rows with any error, and one :class:`MetricSummary` per metric.

    Printed, each metric with a verdict gets a line of verdict shares (95% Wilson intervals) before
    its line of means (95% bootstrap intervals); :func:`summarize` shows one.
    """

    n_rows: int
    n_resumed: int
    rows_with_errors: int
    seconds: float
    metrics: dict[str, MetricSummary]
    errors: list[tuple[int, str, str | None, str]]  # (row, metric, field, message), the first 20
    n_input_changed: int = 0
    """Rows an earlier run had finished that a resume recomputed because their input changed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_rows": self.n_rows,
            "n_resumed": self.n_resumed,
            "n_input_changed": self.n_input_changed,
            "rows_with_errors": self.rows_with_errors,
            "seconds": round(self.seconds, 3),
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
        }

    def __str__(self) -> str:
        resumed = f", {self.n_resumed} resumed" if self.n_resumed else ""
        if self.n_input_changed:
            resumed += f", {self.n_input_changed} recomputed because their input changed"
        lines = [
            f"{self.n_rows} rows: {self.n_rows - self.rows_with_errors} ok, {self.rows_with_errors} with "
            f"errors{resumed} in {self.seconds:.1f} s"
        ]
        for m in self.metrics.values():
            if m.verdict_shares:
                shares = "; ".join(f"{k} {format_share(v)}" for k, v in m.verdict_shares.items())
                lines.append(f"  {m.name} verdicts: {shares}")
            if m.agreement is not None:
                lines.extend(m.agreement.lines(m.name))
            parts = [f"{m.name}: n={m.n}"]
            for key, s in m.scores.items():
                parts.append(f"{key} {s.mean:+.3f} [{s.ci95[0]:+.3f}, {s.ci95[1]:+.3f}]")
            if m.refusals:
                parts.append(f"{m.refusals} refusal(s) left out of the means")
            if m.errors:
                parts.append(f"errors {m.errors}")
            lines.append("  " + "; ".join(parts))
        for row, metric, field_name, message in self.errors:
            where = f"{metric}: {field_name}" if field_name else str(metric)  # no "-": it reads as stdin
            lines.append(f"  row {row}: {where}: {message}")
        return "\n".join(lines)


def errors_of(record: Mapping[str, Any], default_metric: str) -> list[Mapping[str, Any]]:
    """A record's error entries, from ``errors`` or from the one ``error`` of the older single-metric
    format (whose metric is ``default_metric``)."""
    errors = record.get("errors")
    if isinstance(errors, list):
        return [e for e in errors if isinstance(e, Mapping)]
    error = record.get("error")
    if isinstance(error, Mapping):
        return [{"metric": default_metric, "field": error.get("field"), "message": error.get("message", "")}]
    return []


MAX_LISTED_ERRORS = 20


def summarize(rows: Sequence[Mapping[str, Any]], metrics: Sequence[MetricInfo], stats: RunStats) -> Summary:
    """Per metric: rows it scored, its errors, verdict counts and shares (95% Wilson intervals), each
    score's mean with its 95% bootstrap interval.

    A refusal row counts in the verdict shares and is left out of every score mean (the one refusal
    rule, :data:`ragsense.contract.REFUSAL`). Three of five rows ``ungrounded`` while the mean clears
    0.02, the case a mean gate lets through:

    >>> info = MetricInfo("consens", ("consens", "verdict"), ("consens",), "verdict", {},
    ...                   verdict_values=("grounded", "unsure", "ungrounded", "refusal"))
    >>> rows = [{"consens": c, "verdict": v, "errors": []} for c, v in
    ...         [(0.9, "grounded"), (0.8, "grounded"), (-0.3, "ungrounded"), (-0.2, "ungrounded"),
    ...          (-0.1, "ungrounded")]]
    >>> print(summarize(rows, [info], RunStats(5)))  # doctest: +NORMALIZE_WHITESPACE
    5 rows: 5 ok, 0 with errors in 0.0 s
      consens verdicts: grounded 40% [12%, 77%] (2 of 5); unsure 0% [0%, 43%] (0 of 5);
        ungrounded 60% [23%, 88%] (3 of 5); refusal 0% [0%, 43%] (0 of 5)
      consens: n=5; consens +0.220 [-0.220, +0.660]
    """
    default = metrics[0].name if len(metrics) == 1 else "input"
    per_row_errors = [errors_of(r, default) for r in rows]
    listed: list[tuple[int, str, str | None, str]] = []
    for index, (row, errors) in enumerate(zip(rows, per_row_errors, strict=True)):
        for e in errors:
            if len(listed) < MAX_LISTED_ERRORS:
                listed.append(
                    (int(row.get("_row", index)), str(e.get("metric")), e.get("field"), str(e.get("message")))
                )
    out: dict[str, MetricSummary] = {}
    verdict_fields = [m.verdict for m in metrics if m.verdict]
    for info in metrics:
        failed = [
            any(e.get("metric") in (info.name, "input", "output") for e in errs) for errs in per_row_errors
        ]
        scored = [r for r, bad in zip(rows, failed, strict=True) if not bad]
        judged = [r for r in scored if not is_refusal_row(r, verdict_fields)]
        scores: dict[str, ScoreSummary] = {}
        for key in info.scores:
            values = [
                float(r[key])
                for r in judged
                if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)
            ]
            if values:
                mean, low, high = mean_ci(values)
                scores[key] = ScoreSummary(len(values), mean, (low, high))
        verdicts: dict[str, int] = {}
        shares: dict[str, Share] = {}
        if info.verdict is not None:
            given = [str(r[info.verdict]) for r in scored if r.get(info.verdict) is not None]
            verdicts = dict(sorted(Counter(given).items()))
            shares = shares_of(given, info.verdict_values) if given else {}
        agreement = agreement_of(scored, info.verdict, info.verdict_values) if info.verdict else None
        out[info.name] = MetricSummary(
            info.name,
            len(scored),
            sum(failed),
            scores,
            verdicts,
            shares,
            len(scored) - len(judged),
            agreement,
        )
    return Summary(
        n_rows=len(rows),
        n_resumed=stats.n_resumed,
        rows_with_errors=sum(bool(e) for e in per_row_errors),
        seconds=stats.seconds,
        metrics=out,
        errors=listed,
        n_input_changed=stats.n_input_changed,
    )


class Evaluation:
    """The result of :func:`~ragsense.evaluation.evaluate`: every output row, in input order.

    Each row keeps its input fields, then each metric's fields, then ``errors`` (a list of
    ``{"metric", "field", "message"}``, empty when every metric scored the row) and ``_row`` (its
    0-based input position).
    """

    def __init__(
        self,
        rows: list[dict[str, Any]],
        metrics: Sequence[MetricInfo],
        stats: RunStats,
        run_id: str | None = None,
    ) -> None:
        self.rows = rows
        self.metrics = list(metrics)
        self.stats = stats
        self.run_id = run_id
        """The run's id in the run store, when it was recorded (``store=``)."""

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __repr__(self) -> str:
        names = ", ".join(m.name for m in self.metrics)
        return f"Evaluation({len(self.rows)} rows; metrics: {names})"

    @property
    def has_errors(self) -> bool:
        """Whether any row has an error entry."""
        return any(errors_of(r, "input") for r in self.rows)

    def summary(self) -> Summary:
        """Per metric: n, verdict shares with their 95% Wilson intervals, each score's mean with its
        95% bootstrap interval, verdict counts, errors."""
        return summarize(self.rows, self.metrics, self.stats)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (``pandas`` extra)."""
        pd = require_module("pandas", "pandas", "Evaluation.to_pandas()")
        return pd.DataFrame(self.rows)

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the rows to ``.jsonl``, ``.csv`` or ``.parquet`` (by extension); returns the path.

        An existing file is refused (:class:`FileExistsError`) unless ``overwrite=True``: the same rule
        as ``evaluate(output=...)`` and the CLI's ``-o``, so no results are replaced by accident.
        """
        check_output(path)  # an unknown suffix is named before the existing file is
        if not overwrite and str(path) != "-" and Path(path).exists():
            raise FileExistsError(f"output file {str(path)!r} already exists; replace it with overwrite=True")
        return save_rows(path, self.rows)
