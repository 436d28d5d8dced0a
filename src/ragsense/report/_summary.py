"""The report's head: each run's identity, settings and summary, the ConSens bands, score ranges, and
the paired comparison of two runs (from :func:`ragsense.runs.compare_rows`).

>>> from ragsense.runs import StoredRun
>>> run = StoredRun(id="abc", created="2026-01-01T00:00:00Z", finished=None, status="incomplete",
...                 tag=None, command=None, version="0", dataset=None, input_hash=None, n_rows=2,
...                 metrics=[{"name": "consens", "scores": ["consens"], "verdict": "verdict",
...                           "settings": {"aggregation": "q25"}}])
>>> rows = [{"consens": 0.5, "verdict": "grounded", "errors": []},
...         {"consens": None, "verdict": None, "errors": [{"metric": "consens", "message": "x"}]}]
>>> info = run_info(run, rows)
>>> info["summary_source"], info["summary"]["consens"]["n"], info["summary"]["consens"]["errors"]
('rows', 1, 1)
>>> info["bands"]["aggregation"], info["bands"]["origin"]
('q25', 'default')
>>> info["bands"]["grounded_at"] == default_bands("q25").grounded_at
True
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ragsense.consens import Aggregation, Bands, default_bands, edge_text
from ragsense.consens import bands_note as runs_bands_note
from ragsense.contract import is_refusal_row
from ragsense.report._texts import round4
from ragsense.runs import Comparison, StoredRun
from ragsense.stats import mean_ci

KNOWN_RANGES: dict[str, tuple[float, float]] = {
    "consens": (-1.0, 1.0),
    "similarity": (-1.0, 1.0),
    "context_relevance": (0.0, 1.0),
    "response_relevance": (0.0, 1.0),
    "response_adherence": (0.0, 1.0),
}
"""Score fields whose range is known; other scores' histograms span their values."""

SETTING_MAX = 2_000
"""Setting values (a prompt template) are cut to this many characters in the page."""

WORST_LISTED = 20


def number(value: Any) -> float | None:
    """A finite number, else None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def row_key(row: Mapping[str, Any], position: int) -> str:
    """How rows are paired between two runs: the ``id``, else ``#`` and the row's position (the same
    rule as :func:`ragsense.runs.compare_rows`)."""
    if row.get("id") is not None:
        return str(row["id"])
    return f"#{row.get('_row', position)}"


def row_errors(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    errors = row.get("errors")
    if isinstance(errors, list):
        return [e for e in errors if isinstance(e, Mapping)]
    error = row.get("error")
    if isinstance(error, Mapping):
        return [{"metric": None, "field": error.get("field"), "message": error.get("message", "")}]
    return []


def summary_from_rows(run: StoredRun, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per metric n, errors, means with 95% bootstrap intervals and verdict counts, computed from the stored
    rows by the rule ``Evaluation.summary`` uses (for a run that has no stored summary): refusals
    counted in the verdicts and left out of the means (the one refusal rule, ragsense.contract)."""
    per_row = [row_errors(r) for r in rows]
    verdict_fields = [str(m["verdict"]) for m in run.metrics if m.get("verdict")]
    out: dict[str, Any] = {}
    for metric in run.metrics:
        name = str(metric.get("name"))
        failed = [any(e.get("metric") in (name, "input", "output") for e in errs) for errs in per_row]
        scored = [r for r, bad in zip(rows, failed, strict=True) if not bad]
        judged = [r for r in scored if not is_refusal_row(r, verdict_fields)]
        scores: dict[str, Any] = {}
        for key in metric.get("scores", []):
            values = [x for r in judged if (x := number(r.get(key))) is not None]
            if values:
                mean, low, high = mean_ci(values)
                scores[str(key)] = {"n": len(values), "mean": mean, "ci95": [low, high]}
        verdicts: dict[str, int] = {}
        field = metric.get("verdict")
        if field:
            counts = Counter(str(r[field]) for r in scored if r.get(field) is not None)
            verdicts = dict(sorted(counts.items()))
        out[name] = {
            "n": len(scored),
            "errors": sum(failed),
            "refusals": len(scored) - len(judged),
            "scores": scores,
            "verdicts": verdicts,
        }
    return out


def _round_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, m in summary.items():
        scores = {
            key: {
                "n": s.get("n"),
                "mean": round4(s.get("mean")),
                "ci95": [round4(x) for x in (s.get("ci95") or [None, None])],
            }
            for key, s in (m.get("scores") or {}).items()
        }
        out[str(name)] = {
            "n": m.get("n"),
            "errors": m.get("errors"),
            "refusals": m.get("refusals") or 0,
            "scores": scores,
            "verdicts": dict(m.get("verdicts") or {}),
        }
    return out


def consens_bands(run: StoredRun, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """ConSens's verdict thresholds and where they came from (``origin``): the bands the run used (its
    settings, e.g. a ``--bands`` file), else the defaults of its aggregation (its settings, else its
    rows; a run stored before bands were recorded)."""
    aggregation: Any = None
    for metric in run.metrics:
        if metric.get("name") in ("consens", "attribution"):
            settings = metric.get("settings") or {}
            aggregation = settings.get("aggregation")
            used = settings.get("bands")
            if isinstance(used, dict) and {"grounded_at", "ungrounded_below"} <= used.keys():
                return _shown_bands(
                    {
                        "aggregation": str(used.get("score", aggregation)),
                        "grounded_at": used["grounded_at"],
                        "ungrounded_below": used["ungrounded_below"],
                        "origin": str(used.get("origin", "file")),
                    }
                )
    if aggregation is None:
        aggregation = next((r["aggregation"] for r in rows if r.get("aggregation")), None)
    if aggregation is None:
        if "consens" not in run.score_fields():
            return None
        aggregation = Aggregation.Q25.value
    try:
        bands = default_bands(str(aggregation))
    except ValueError:
        return None
    return _shown_bands(
        {
            "aggregation": str(aggregation),
            "grounded_at": bands.grounded_at,
            "ungrounded_below": bands.ungrounded_below,
            "origin": bands.origin,
        }
    )


def _shown_bands(bands: dict[str, Any]) -> dict[str, Any]:
    """``bands`` with ``text``: the edges as every other view writes them (:func:`edge_text`, every
    digit an edge has), so the page never rounds an edge onto a score it does not reach."""
    low, high = edge_text(float(bands["ungrounded_below"])), edge_text(float(bands["grounded_at"]))
    return {**bands, "text": f"ungrounded < {low} ≤ unsure < {high} ≤ grounded"}


def bands_of_run(run: StoredRun, rows: Sequence[Mapping[str, Any]]) -> Bands | None:
    """The bands the run's verdicts were read under (:func:`consens_bands`), as :class:`Bands`."""
    shown = consens_bands(run, rows)
    if shown is None:
        return None
    return Bands(shown["aggregation"], float(shown["grounded_at"]), float(shown["ungrounded_below"]))


def bands_note(pairs: Sequence[tuple[StoredRun, Sequence[Mapping[str, Any]]]]) -> str | None:
    """A two-run report's note when the runs used different bands (``ragsense compare``'s note)."""
    if len(pairs) < 2:
        return None
    a, b = (consens_bands(run, rows) for run, rows in pairs[:2])
    return runs_bands_note(a, b)


def _setting(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SETTING_MAX:
        return value[:SETTING_MAX] + f"… ({len(value) - SETTING_MAX} more characters)"
    if isinstance(value, float):
        return round4(value) if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_setting(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _setting(v) for k, v in value.items()}
    return value if value is None or isinstance(value, str | int | bool) else str(value)


def run_info(run: StoredRun, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the page shows of one run besides its rows."""
    stored = (run.summary or {}).get("metrics")
    summary = stored if isinstance(stored, Mapping) and stored else summary_from_rows(run, rows)
    meta = run.summary or {}
    return {
        "id": run.id,
        "tag": run.tag,
        "status": run.status,
        "note": run.note,
        "created": run.created,
        "finished": run.finished,
        "command": run.command,
        "version": run.version,
        "dataset": run.dataset,
        "input_hash": run.input_hash,
        "n_rows": run.n_rows,
        "n_rows_embedded": len(rows),
        "seconds": round4(meta.get("seconds")),
        "n_resumed": meta.get("n_resumed"),
        "rows_with_errors": sum(bool(row_errors(r)) for r in rows),
        "metrics": [
            {
                "name": str(m.get("name")),
                "scores": [str(s) for s in m.get("scores", [])],
                "verdict": m.get("verdict"),
                "settings": _setting(dict(m.get("settings") or {})),
                "models": _setting(dict(m.get("models") or {})),
            }
            for m in run.metrics
        ],
        "summary": _round_summary(summary),
        "summary_source": "stored" if summary is stored else "rows",
        "bands": consens_bands(run, rows),
    }


def score_columns(runs: Sequence[tuple[StoredRun, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """The score fields the table shows (in both runs, for a comparison) with their histogram range."""
    names = runs[0][0].score_fields()
    for other, _ in runs[1:]:
        names = [n for n in names if n in other.score_fields()]
    metric_of = {str(s): str(m.get("name")) for m in runs[0][0].metrics for s in m.get("scores", [])}
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys(names):
        if name in KNOWN_RANGES:
            lo, hi = KNOWN_RANGES[name]
        else:
            values = [x for _, rows in runs for r in rows if (x := number(r.get(name))) is not None]
            lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        out.append({"name": name, "metric": metric_of.get(name), "lo": round4(lo), "hi": round4(hi)})
    return out


def verdict_columns(runs: Sequence[tuple[StoredRun, Sequence[Mapping[str, Any]]]]) -> list[str]:
    names = runs[0][0].verdict_fields()
    for other, _ in runs[1:]:
        names = [n for n in names if n in other.verdict_fields()]
    return list(dict.fromkeys(names))


def comparison_info(comparison: Comparison) -> dict[str, Any]:
    """The comparison as the page shows it: per score the paired difference with its interval and
    p-value, per verdict field the counts, and the rows that dropped most per score."""
    scores = []
    for s in comparison.scores:
        scores.append(
            {
                "score": s.score,
                "n": s.n,
                "mean_a": round4(s.mean_a),
                "mean_b": round4(s.mean_b),
                "difference": round4(s.mean_difference),
                "ci95": None if s.ci95 is None else [round4(x) for x in s.ci95],
                "p": round4(s.p_value),
                "better": s.n_better,
                "worse": s.n_worse,
                "same": s.n_same,
            }
        )
    return {
        "n_a": comparison.n_a,
        "n_b": comparison.n_b,
        "n_shared": comparison.n_shared,
        "scores": scores,
        "verdicts": [v.to_dict() for v in comparison.verdicts],
        "worst": {
            s.score: [[c.key, round4(c.a), round4(c.b)] for c in comparison.worst(s.score, WORST_LISTED)]
            for s in comparison.scores
        },
    }
