"""Print kinship runs as Markdown tables with 95% Wilson intervals on every cell (docs/results.md).

    python -m papers.kinship.kinship_ci_tables docs/results/kinship/smollm2-135m-6names ...
    python -m papers.kinship.kinship_ci_tables --rerender docs/results/kinship/smollm2-135m-6names

For each run directory it prints an accuracy table and a retrieval-recall table, each cell
"share (low–high)", the queries per condition and the number of empty answers.

Where the counts come from:

- A run with its per-answer output (``answers.jsonl``) is re-aggregated from it, with the benchmark's
  own :func:`ragsense.bench.kinship.aggregate`: correct answers of the questions scored, and needed
  documents retrieved of those needed (one trial per document of the shortest chain).
- A run without it (the older committed runs kept only ``results.json``) is read from
  ``results.json``: correct answers = accuracy x n (those runs had no failed questions, checked), and
  documents = recall x n x hops where every question of the cell needs the same number of documents
  (otherwise the recall interval is left out, "—"). The output says which source each table used.

``--rerender`` rewrites a run's report files (table.md, table.csv, table.json, results.json, the PNG)
from its ``answers.jsonl`` and ``run.json``, keeping the metadata in its ``table.json`` (the command
that made it, its seconds). It re-runs no model: it adds intervals to tables written before they
existed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ragsense.bench.kinship import aggregate, generate_kinship_source, write_kinship_report
from ragsense.stats import wilson_ci

COLUMNS = ["control", "grandfather", "grandmother", "sibling", "uncle", "aunt"]


def _answers(run_dir: Path) -> list[dict[str, Any]] | None:
    path = run_dir / "answers.jsonl"
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _settings(run_dir: Path) -> dict[str, Any]:
    settings: dict[str, Any] = json.loads((run_dir / "run.json").read_text())["settings"]
    return settings


def results_with_counts(run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    """Every (k, condition) record with its counts and intervals, and where the counts came from."""
    settings = _settings(run_dir)
    answers = _answers(run_dir)
    if answers is not None:
        expected = len(answers)
        records = aggregate(answers, settings["ks"], settings["conditions"])
        if sum(r["n"] for r in records) != expected:
            raise SystemExit(f"{run_dir}: answers.jsonl has rows outside the run's ks and conditions")
        return records, "answers.jsonl"
    results: list[dict[str, Any]] = json.loads((run_dir / "results.json").read_text())
    for r in results:
        if r.get("n_errors"):
            raise SystemExit(
                f"{run_dir}: k={r['k']} {r['condition']} has failed questions; need answers.jsonl"
            )
        n = r["n"]
        if r["accuracy"] is not None:
            correct = round(r["accuracy"] * n)
            r["n_correct"], r["n_scored"] = correct, n
            r["accuracy_ci"] = list(wilson_ci(correct, n))
        hops = r.get("mean_hops")
        recall = r.get("retrieval_recall")
        if (
            recall is not None
            and hops is not None
            and float(hops).is_integer()
            and not r.get("n_unanswerable")
        ):
            needed = n * int(hops)
            r["documents_found"], r["documents_needed"] = round(recall * needed), needed
            r["retrieval_recall_ci"] = list(wilson_ci(r["documents_found"], needed))
    return results, "results.json (counts = share x n)"


def expected_queries(settings: dict[str, Any]) -> dict[str, int]:
    """Questions per condition and k that the run asks (its source, hold-out and sample size)."""
    src = settings["source"]
    source = generate_kinship_source(
        src["names"], src["generations"], seed=src["seed"], distractor_share=src["distractor_share"]
    )
    relations = [c for c in settings["conditions"] if c != "control"]
    limit = settings.get("max_queries")
    return {
        c.name: len(c.queries) if limit is None else min(limit, len(c.queries))
        for c in source.conditions(relations, hold_out=settings["hold_out"])
    }


def _two(x: float) -> str:
    return f"{x:.2f}"


def _cell(record: dict[str, Any] | None, field: str) -> str:
    if record is None or record.get(field) is None:
        return "—"
    interval = record.get(f"{field}_ci")
    if interval is None:
        return _two(record[field])
    return f"{_two(record[field])} ({_two(interval[0])}–{_two(interval[1])})"


def tables(run_dir: Path) -> str:
    settings = _settings(run_dir)
    records, origin = results_with_counts(run_dir)
    by = {(r["k"], r["condition"]): r for r in records}
    columns = [c for c in COLUMNS if any(r["condition"] == c for r in records)]
    ks = sorted({r["k"] for r in records})
    head = "| k | " + " | ".join(c.title() for c in columns) + " |"
    sep = "|---" * (len(columns) + 1) + "|"
    answering = settings.get("system_settings", {})

    def setting(key: str) -> str:
        """As run.json recorded it: resolved by the system, else as asked for; else not recorded."""
        value = answering.get(key, settings.get(key))
        return "not recorded" if value is None else json.dumps(value) if key == "stop" else str(value)

    name = settings.get("model", settings.get("system"))
    out = [
        f"`{run_dir}` ({name}, {settings['source']['names']} names per list; counts from {origin})",
        "",
        f"run.json: retrieval {setting('retrieval')}; stop {setting('stop')}; prompt "
        f"{setting('prompt_format')}, {setting('document_order')}; "
        f"max_new_tokens {setting('max_new_tokens')}",
    ]
    for field, heading in (("accuracy", "Accuracy"), ("retrieval_recall", "Retrieval recall")):
        out += ["", f"{heading} (95% Wilson interval)", "", head, sep]
        out += [f"| {k} | " + " | ".join(_cell(by.get((k, c)), field) for c in columns) + " |" for k in ks]
    n = expected_queries(settings)
    out += ["", "Queries per condition (each k): " + ", ".join(f"{c} {v}" for c, v in n.items()) + "."]
    unanswered = [f"k={k} {c}" for k in ks for c in columns if by[(k, c)]["n"] < n[c]]
    for k in ks:
        for c in columns:
            if by[(k, c)]["n"] > n[c]:
                raise SystemExit(f"{run_dir}: k={k} {c} has more answers than the run asks")
    if unanswered:
        out.append(
            f"Partial run: {len(unanswered)} cells not (fully) answered yet (—): " + ", ".join(unanswered)
        )
    total = sum(r["n"] for r in records)
    correct = sum(r.get("n_correct", 0) for r in records)
    out.append(f"Answers: {total}; correct: {correct}.")
    if all("n_empty_answers" in r for r in records):
        empty = sum(r["n_empty_answers"] for r in records)
        by_condition = {c: sum(by[(k, c)]["n_empty_answers"] for k in ks) for c in columns}
        out.append(
            f"Empty answers: {empty} of {total} ("
            + ", ".join(f"{c} {v}" for c, v in by_condition.items())
            + ")."
        )
    else:
        out.append("Empty answers: not recorded (no answers.jsonl).")
    return "\n".join(out)


def rerender(run_dir: Path) -> None:
    settings = _settings(run_dir)
    answers = _answers(run_dir)
    if answers is None:
        raise SystemExit(f"{run_dir}: no answers.jsonl to re-render from")
    previous = json.loads((run_dir / "table.json").read_text()) if (run_dir / "table.json").exists() else {}
    records = aggregate(answers, settings["ks"], settings["conditions"])
    write_kinship_report(
        records,
        run_dir,
        title=previous.get("title", f"Kinship benchmark: {run_dir.name}"),
        metadata=previous.get("metadata") or None,
        conditions=settings["conditions"],
    )
    print(f"re-rendered {run_dir} from {len(answers)} answers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (with run.json)")
    parser.add_argument("--rerender", action="store_true", help="rewrite the report files from answers.jsonl")
    args = parser.parse_args()
    for run_dir in args.runs:
        if args.rerender:
            rerender(run_dir)
        print(tables(run_dir), end="\n\n")


if __name__ == "__main__":
    main()
