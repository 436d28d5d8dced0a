"""Print the tables of docs/results.md's distractor section from the saved ``consens-distractors`` runs.

    python -m papers.consens.distractor_tables docs/results/consens/distractors

Reads the development half's per-item scores (``dev-<set>-k20-b<budget>.jsonl.gz``, and
``dev-<set>-k20-windows-b<budget>.jsonl.gz`` for the windows study) and applies the pre-registered
rules to them (``choose_budget``, ``windows_win``: the experiment's own functions); then the report
runs (``consens-distractors*.json``, all at the chosen budget) and their per-item
``report-*.jsonl.gz`` for the paired tests (DeLong, on the same report pairs): the windows study and
the tail cut against the relevance window at the same k, and each against the clean context read
whole (k = 0, full). No figure is copied by hand.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from ragsense.experiments import choose_budget, contrast, delong_against, windows_win

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


def read_records(path: Path) -> list[dict[str, Any]]:
    """The per-item records of one ``*.jsonl.gz`` file of a ``consens-distractors`` run."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _items(folder: Path, name: str, k: int) -> dict[str, list[dict[str, Any]]]:
    """``{condition: per-item records}`` of the report half at ``k``."""
    out: dict[str, list[dict[str, Any]]] = {}
    path = folder / f"report-{name}-k{k}.jsonl.gz"
    for rec in read_records(path) if path.exists() else []:
        out.setdefault(rec["condition"], []).append(rec)
    return out


def _scores(items: list[dict[str, Any]]) -> dict[str, float]:
    return {i["id"]: i["consens"] for i in items}


def _figures(items: list[dict[str, Any]]) -> dict[str, Any]:
    """AUROC with its paired bootstrap interval, the share of rows that read their own document,
    the lexical-support baseline and the windows per row, from per-item records."""
    pos, neg = pair_scores(_scores(items))
    figures = contrast(pos, neg)
    read = [any(o in i["kept_documents"] for o in i["own_documents"]) for i in items]
    lexical = pair_scores({i["id"]: i["lexical_support"] for i in items})
    return {
        "auroc": figures["auroc"],
        "auroc_ci95": figures["auroc_ci95"],
        "read": sum(read) / len(read),
        "lexical": contrast(*lexical)["auroc"],
        "windows_per_row": sum(len(i.get("windows", [[]])) for i in items) / len(items),
    }


def pair_scores(scores: dict[str, float]) -> tuple[list[float], list[float]]:
    """``(pos, neg)`` scores in the same pair order from ``{"<item>:pos" | "<item>:neg": score}``."""
    ids = sorted({i.rsplit(":", 1)[0] for i in scores})
    return [scores[f"{i}:pos"] for i in ids], [scores[f"{i}:neg"] for i in ids]


def _delong(reference: list[dict[str, Any]], other: list[dict[str, Any]]) -> str:
    test = delong_against(pair_scores(_scores(reference)), {"other": pair_scores(_scores(other))})["other"]
    return f"{test['difference']:+.3f} (DeLong p {test['p_value']:.2g})"


def _dev_cell(path: Path) -> dict[str, Any]:
    return _figures(read_records(path))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--dev-k", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()
    folder: Path = args.folder
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("consens-distractors*.json"))]
    budget = runs[0]["budget"]
    assert all(r["budget"] == budget for r in runs), "every report run reads at one budget"
    n = runs[0]["pairs_per_part"]

    dev: dict[str, dict[int, dict[str, Any]]] = {}
    windows: dict[str, dict[str, Any]] = {}
    for name in SETS:
        for path in sorted(folder.glob(f"dev-{name}-k{args.dev_k}-b*.jsonl.gz")):
            dev.setdefault(name, {})[int(path.name.split("-b")[-1].split(".")[0])] = _dev_cell(path)
        path = folder / f"dev-{name}-k{args.dev_k}-windows-b{budget}.jsonl.gz"
        if path.exists():
            windows[name] = _dev_cell(path)
    if dev:
        chosen = choose_budget(
            {s: {b: c["auroc"] for b, c in d.items()} for s, d in dev.items()}, args.tolerance
        )
        assert chosen == budget, f"the development half chooses {chosen}, the report runs read {budget}"
        print(f"**Development half, k = {args.dev_k}, {n} pairs per set**\n")
        print(
            "| context | WikiEval AUROC | own document read | HaluEval AUROC | own document read "
            "| mean AUROC |"
        )
        print("|---|---|---|---|---|---|")
        labels = [
            (f"relevance window, {b} tokens", {s: dev[s][b] for s in dev}) for b in sorted(dev["wikieval"])
        ]
        if len(windows) == len(dev):
            labels.append(
                (f"windows: up to {runs[0]['max_windows']} of {budget} tokens, each word's best", windows)
            )
        for label, cells in labels:
            w, h = cells["wikieval"], cells["halueval"]
            print(
                f"| {label} | {_cell(w)} | {w['read']:.0%} | {_cell(h)} | {h['read']:.0%} | "
                f"{(w['auroc'] + h['auroc']) / 2:.4f} |"
            )
        print(
            f"\nRule: the smallest budget whose mean AUROC is within {args.tolerance} of the best: "
            f"**{budget} tokens**."
        )
        if len(windows) == len(dev):
            won = windows_win(
                {s: dev[s][budget]["auroc"] for s in dev},
                {s: c["auroc"] for s, c in windows.items()},
                args.tolerance,
            )
            print(
                f"Rule: the windows win when their mean AUROC exceeds the single window's by more than "
                f"{args.tolerance}: **{'yes' if won else 'no'}**."
            )
        print()

    for name, title in SETS.items():
        # rows/s and the answer-length baseline from the runs' figures; the rest from the items.
        speed: dict[int, dict[str, float]] = {}
        lengths = []
        for run in runs:
            if name in run:
                lengths.append(run[name]["baseline_answer_length"])
            for key, row in run.get(name, {}).items():
                if key.startswith("k="):
                    for c in CONDITIONS:
                        if c in row:
                            speed.setdefault(int(key[2:]), {})[c] = row[c]["rows_per_s"]
        ks = sorted(
            int(p.name.split("-k")[-1].split(".")[0]) for p in folder.glob(f"report-{name}-k*.jsonl.gz")
        )
        length = f"{lengths[0]:.3f}" if lengths else "not saved"
        print(
            f"**{title}, report half, {n} pairs ({2 * n} rows) per k, budget {budget}; "
            f"answer-length baseline {length}**\n"
        )
        print(
            "| k | relevance window | tail cut at the budget | full context | windows (each word's best) "
            "| lexical support | rows/s window / tail / full / windows "
            "| own document read (window / tail / windows) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        cells = {k: {c: _figures(v) for c, v in _items(folder, name, k).items()} for k in ks}
        for k in ks:
            row = cells[k]
            rates = " / ".join(f"{speed[k][c]:.2f}" if c in speed.get(k, {}) else "-" for c in CONDITIONS)
            read = " / ".join(
                f"{row[c]['read']:.0%}" if c in row else "-" for c in ("budget", "tail", "windows")
            )
            print(
                f"| {k} | {_cell(row.get('budget'))} | {_cell(row.get('tail'))} | {_cell(row.get('full'))} | "
                f"{_cell(row.get('windows'))} | {row['budget']['lexical']:.3f} | {rates} | {read} |"
            )
        print()
        clean = _items(folder, name, 0).get("full")
        for k in ks:
            items = _items(folder, name, k)
            parts = []
            if clean:
                parts.append(f"window - clean (k = 0, full) {_delong(items['budget'], clean)}")
            for other in ("windows", "tail"):
                if other in items:
                    parts.append(f"window - {other} {_delong(items['budget'], items[other])}")
            if "windows" in items:
                if clean:
                    parts.append(f"windows - clean {_delong(items['windows'], clean)}")
                best = {i["id"]: max(i["window_consens"]) for i in items["windows"]}
                parts.append(
                    f"windows per row {cells[k]['windows']['windows_per_row']:.2f}; the best single "
                    f"window's score (no rule chose it) {contrast(*pair_scores(best))['auroc']:.3f}"
                )
                if {"windows", "budget"} <= set(speed.get(k, {})):
                    ratio = speed[k]["windows"] / speed[k]["budget"]
                    parts.append(f"rows/s windows / window {ratio:.2f}x")
            print(f"- {name} k = {k}: " + "; ".join(parts))
        print()


if __name__ == "__main__":
    main()
