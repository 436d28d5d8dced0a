"""``ragsense runs`` (list and show stored runs) and ``ragsense compare A B`` (two runs, paired)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ragsense.cli._numbers import non_negative_int, positive_int
from ragsense.cli._run import UsageExit
from ragsense.consens import bands_note, bands_text
from ragsense.runs import RunStore, StoredRun, compare_runs, format_comparison
from ragsense.tables import echo, render_table, terminal_safe


def _add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", help="run store file (default: $RAGSENSE_STORE or runs.sqlite in the user data directory)"
    )


def add_parser(sub: Any) -> None:
    runs = sub.add_parser(
        "runs",
        help="list the recorded evaluate runs, or show one",
        description=(
            "Every scoring run is recorded in the run store (docs/runs.md). 'ragsense runs' lists them, "
            "newest first; 'ragsense runs show RUN' prints one run's settings and summary. RUN is a run "
            "id, a unique id prefix (4+ characters), a tag (its newest run) or 'latest'."
        ),
    )
    _add_store_option(runs)
    runs.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    runs.add_argument("ref", nargs="?", metavar="RUN", help="show: the run")
    runs.add_argument("--tag", help="list: only runs with this tag")
    runs.add_argument(
        "--limit",
        type=positive_int,
        default=50,
        help="list: at most this many runs (default 50)",
    )
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.set_defaults(run=run_runs)

    compare = sub.add_parser(
        "compare",
        help="compare two runs: paired differences per metric with intervals",
        description=(
            "Per score: each run's mean on the rows both runs scored (paired by row id), the paired "
            "difference B - A with a 95% bootstrap interval, Wilcoxon's signed-rank p-value, and how "
            "many rows got better, worse or stayed the same; per verdict field, the counts in each run."
        ),
    )
    _add_store_option(compare)
    compare.add_argument("a", help="run A (id, prefix, tag or 'latest')")
    compare.add_argument("b", help="run B")
    compare.add_argument("--json", action="store_true", help="print JSON")
    compare.add_argument(
        "--worst", type=non_negative_int, default=5, help="list this many rows that got worse (default 5)"
    )
    compare.set_defaults(run=run_compare)


def _store(args: argparse.Namespace) -> RunStore:
    return RunStore(args.store) if args.store else RunStore()


def _means(run: StoredRun) -> str:
    return ", ".join(f"{k} {v:+.3f}" for k, v in run.means().items()) or "-"


def run_runs(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.action == "show":
        if not args.ref:
            raise UsageExit("ragsense runs show: give a run (id, prefix, tag or 'latest')")
        stored = store.get(args.ref)
        if args.json:
            print(json.dumps(stored.to_dict(), indent=2))
            return 0
        # Tags, notes, commands and dataset names come from users: escaped before they reach a terminal.
        print(terminal_safe(_describe(stored), keep_newlines=True))
        return 0
    if args.ref:
        raise UsageExit("ragsense runs: to see one run, use 'ragsense runs show RUN'")
    listed = store.list_runs(tag=args.tag, limit=args.limit)
    if args.json:
        print(json.dumps([r.to_dict() for r in listed], indent=2))
        return 0
    if not listed:
        echo(f"no runs in {store.path}")
        return 0
    rows = [
        [
            r.id,
            r.created.replace("T", " ").rstrip("Z"),
            r.status,
            r.tag or "",
            _short_dataset(r.dataset),
            ",".join(r.metrics_run),
            str(r.n_rows),
            _means(r),
        ]
        for r in listed
    ]
    headers = ["id", "created (UTC)", "status", "tag", "dataset", "metrics", "n", "means"]
    print(render_table(headers, rows, [12, 19, 10, 12, 24, 22, 6, 40]))
    echo("", f"{len(listed)} run(s) in {store.path}")
    return 0


def _short_dataset(dataset: str | None) -> str:
    if not dataset:
        return ""
    return dataset.rsplit("/", 1)[-1]


def _describe(run: StoredRun) -> str:
    lines = [
        f"run {run.id}  ({run.status}{': ' + run.note if run.note else ''})",
        f"  created   {run.created}" + (f"; finished {run.finished}" if run.finished else ""),
        f"  tag       {run.tag or '-'}",
        f"  command   {run.command or '-'}",
        f"  ragsense  {run.version}",
        f"  dataset   {run.dataset or '-'}",
        f"  input     sha256 {run.input_hash or '- (run not finished)'}",
        f"  rows      {run.n_rows}",
    ]
    for metric in run.metrics:
        stored = metric.get("settings") or {}
        # The template is long and the bands carry their whole fit: each gets a line of its own.
        settings = ", ".join(f"{k}={v}" for k, v in stored.items() if k not in ("template", "bands"))
        lines.append(f"  metric    {metric.get('name')}: {settings}")
        bands = bands_text(stored.get("bands"))
        if bands:
            lines.append(f"            bands: {bands}")
        for role, fingerprint in (metric.get("models") or {}).items():
            lines.append(f"            {role}: {fingerprint}")
    summary = run.summary or {}
    for name, m in summary.get("metrics", {}).items():
        parts = [f"n={m.get('n')}", f"errors={m.get('errors')}"]
        for key, s in m.get("scores", {}).items():
            lo, hi = s["ci95"]
            parts.append(f"{key} {s['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]")
        if m.get("verdicts"):
            parts.append(", ".join(f"{k} {v}" for k, v in m["verdicts"].items()))
        lines.append(f"  summary   {name}: " + "; ".join(parts))
    return "\n".join(lines)


def _run_bands(run: StoredRun) -> Mapping[str, Any] | None:
    """The bands a run's ConSens metric recorded, if any."""
    for metric in run.metrics:
        bands = (metric.get("settings") or {}).get("bands")
        if isinstance(bands, Mapping) and bands_text(bands):
            return dict(bands)
    return None


def run_compare(args: argparse.Namespace) -> int:
    store = _store(args)
    a, b = store.get(args.a), store.get(args.b)
    comparison = compare_runs(store, a.id, b.id)
    if args.json:
        out = {"a": a.id, "b": b.id, **comparison.to_dict()}
        out["worst"] = {
            s.score: [{"id": c.key, "a": c.a, "b": c.b} for c in comparison.worst(s.score, args.worst)]
            for s in comparison.scores
        }
        print(json.dumps(out, indent=2))
        return 0
    print(terminal_safe(f"A = run {a.id}" + (f" ({a.tag})" if a.tag else "")))
    print(terminal_safe(f"B = run {b.id}" + (f" ({b.tag})" if b.tag else "")))
    print(terminal_safe(format_comparison(comparison), keep_newlines=True))
    for s in comparison.scores:
        worst = comparison.worst(s.score, args.worst)
        if worst:
            listed = ", ".join(f"{c.key} ({c.a:+.3f} -> {c.b:+.3f})" for c in worst)  # keys are row ids
            print(terminal_safe(f"worse in {s.score}: {listed}"))
    note = bands_note(_run_bands(a), _run_bands(b))
    if note:
        echo(f"note: {note}")
    if a.input_hash and b.input_hash and a.input_hash != b.input_hash:
        echo("note: the two runs had different input rows (their input hashes differ)")
    return 0
