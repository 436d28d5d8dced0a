"""Print the tables of docs/results.md's distractor section from the saved ``consens-distractors`` runs.

    python -m papers.consens.distractor_tables docs/results/consens/distractors

Reads ``consens-distractors.json`` (the run that chose the budget on the development half and
reported on the other) and any ``consens-distractors-*.json`` beside it (later runs at the chosen
budget, e.g. more k), and the per-item ``report-*.jsonl.gz`` for the paired tests (DeLong, on the
same report pairs): the windows study and the tail cut against the relevance window at the same k,
and the relevance window at k against the clean context read whole (k = 0, full). No figure is
copied by hand.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from ragsense.experiments import delong_against

SETS = {
    "wikieval": "WikiEval (grounded vs ungrounded answer)",
    "halueval": "HaluEval-dev (right vs hallucinated answer)",
}
CONDITIONS = ("budget", "tail", "full", "windows")


def _cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "not run"
    lo, hi = cell["auroc_ci95"]
    return f"{cell['auroc']:.3f} [{lo:.3f}, {hi:.3f}]"


def _items(folder: Path, name: str, k: int) -> dict[str, dict[str, float]]:
    """``{condition: {row id: score}}`` of the report half at ``k``."""
    out: dict[str, dict[str, float]] = {}
    path = folder / f"report-{name}-k{k}.jsonl.gz"
    if not path.exists():
        return out
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            out.setdefault(rec["condition"], {})[rec["id"]] = rec["consens"]
    return out


def _pairs(scores: dict[str, float]) -> tuple[list[float], list[float]]:
    ids = sorted({i.rsplit(":", 1)[0] for i in scores})
    return [scores[f"{i}:pos"] for i in ids], [scores[f"{i}:neg"] for i in ids]


def _delong(reference: dict[str, float], other: dict[str, float]) -> str:
    test = delong_against(_pairs(reference), {"other": _pairs(other)})["other"]
    return f"{test['difference']:+.3f} (DeLong p {test['p_value']:.2g})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    folder: Path = args.folder
    main_run = json.loads((folder / "consens-distractors.json").read_text())
    later = sorted(folder.glob("consens-distractors-*.json"))
    runs = [main_run] + [json.loads(p.read_text()) for p in later]
    budget = main_run["budget"]
    assert all(r["budget"] == budget for r in runs), "every run reads at the chosen budget"
    n = main_run["pairs_per_part"]

    dev = main_run.get("dev")
    if dev:
        print(f"**Development half, k = 20, {n} pairs per set** (`{main_run['budget_rule']}`)\n")
        print(
            "| context | WikiEval AUROC | own document read | HaluEval AUROC | own document read "
            "| mean AUROC | rows/s WikiEval / HaluEval |"
        )
        print("|---|---|---|---|---|---|---|")
        for key in dev["wikieval"]:
            w, h = dev["wikieval"][key], dev["halueval"][key]
            label = (
                f"windows (up to {main_run['max_windows']} of {budget} tokens)"
                if key.startswith("windows")
                else f"relevance window, {key} tokens"
            )
            print(
                f"| {label} | {_cell(w)} | {w['own_document_kept']:.0%} | {_cell(h)} | "
                f"{h['own_document_kept']:.0%} | {(w['auroc'] + h['auroc']) / 2:.4f} | "
                f"{w['rows_per_s']:.2f} / {h['rows_per_s']:.2f} |"
            )
        print(
            f"\nChosen budget: **{budget} tokens**. Windows study wins on the development half: "
            f"**{'yes' if main_run.get('windows_win_dev') else 'no'}** "
            f"(`{main_run.get('windows_rule', '')}`).\n"
        )

    for name, title in SETS.items():
        rows: dict[int, dict[str, Any]] = {}
        for run in runs:
            for key, row in run.get(name, {}).items():
                if key.startswith("k="):
                    rows.setdefault(int(key[2:]), {}).update(row)
        length = main_run[name]["baseline_answer_length"]
        print(
            f"**{title}, report half, {n} pairs ({2 * n} rows) per k, budget {budget}; "
            f"answer-length baseline {length:.3f}**\n"
        )
        print(
            "| k | relevance window | tail cut at the budget | full context | windows (each word's best) "
            "| lexical support | rows/s window / tail / full / windows "
            "| own document read (window / tail / windows) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for k in sorted(rows):
            row = rows[k]
            speed = " / ".join(f"{row[c]['rows_per_s']:.2f}" if c in row else "-" for c in CONDITIONS)
            read = " / ".join(
                f"{row[c]['own_document_kept']:.0%}" if c in row else "-"
                for c in ("budget", "tail", "windows")
            )
            print(
                f"| {k} | {_cell(row.get('budget'))} | {_cell(row.get('tail'))} | {_cell(row.get('full'))} | "
                f"{_cell(row.get('windows'))} | {row['baseline_lexical_support']:.3f} | {speed} | {read} |"
            )
        print()
        clean = _items(folder, name, 0).get("full")
        for k in sorted(rows):
            items = _items(folder, name, k)
            if "budget" not in items:
                continue
            parts = []
            if clean:
                parts.append(f"window - clean (k = 0, full) {_delong(items['budget'], clean)}")
            for other in ("windows", "tail"):
                if other in items:
                    parts.append(f"window - {other} {_delong(items['budget'], items[other])}")
            if "windows" in items and clean:
                parts.append(f"windows - clean {_delong(items['windows'], clean)}")
            if "windows" in rows[k] and "budget" in rows[k]:
                ratio = rows[k]["windows"]["rows_per_s"] / rows[k]["budget"]["rows_per_s"]
                parts.append(
                    f"windows per row {rows[k]['windows']['windows_per_row']:.2f}, rows/s windows / window "
                    f"{ratio:.2f}x; the best single window's score (no rule chose it) "
                    f"{rows[k]['windows']['auroc_best_window_score']:.3f}"
                )
            print(f"- {name} k = {k}: " + "; ".join(parts))
        print()


if __name__ == "__main__":
    main()
