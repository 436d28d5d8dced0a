"""Print docs/results.md's tables for the default grounding score from grounding_default.py's JSON.

    python -m papers.consens.grounding_tables docs/results/consens/grounding_default.json [--title TEXT]

Markdown on standard output: the development-half choice (rule 2), the report halves beside every
trivial baseline (and FaithBench's shipped detectors), and the verdict bands' precision and coverage.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

NAMES = {
    "wikieval": "WikiEval",
    "halueval": "HaluEval-dev",
    "halueval_matched": "HaluEval-dev, length-matched pairs",
    "pubmedqa": "PubMedQA (full vs partial)",
    "faithbench": "FaithBench-dev (summaries)",
}
SCORES = [
    ("support_geomean", "**support (default)**"),
    ("q25", "q25 (old default)"),
    ("arithmetic", "arithmetic (the paper's ConSens)"),
]
BASELINES = [
    ("answer_length", "answer length"),
    ("lexical_support", "lexical support"),
    ("similarity_max_chunk", "MiniLM similarity"),
    ("context_length", "context length"),
]


def _auc(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "-"
    lo, hi = entry["ci95"]
    return f"{entry['auroc']:.3f} [{lo:.2f}, {hi:.2f}]"


def _prop(side: dict[str, Any], key: str) -> str:
    value = side[key]
    if value is None:
        return "- (0 calls)"
    lo, hi = side[f"{key}_ci95"]
    return f"{value:.2f} [{lo:.2f}, {hi:.2f}]"


def tables(figures: dict[str, Any]) -> str:
    out: list[str] = []
    chosen = figures["choice"]["chosen"]
    dev = figures["development"]
    if not figures["choice"].get("applied"):
        out.append("**Development halves: AUROC, and the margin over the set's best trivial baseline**\n")
        # Rule 3 chooses among its eligible candidates only; rules 1-2 among all.
        cands = figures["choice"].get("eligible") or list(next(iter(dev.values()))["candidates"])
        out.append("| candidate | " + " | ".join(NAMES[s] for s in dev) + " | smallest margin |")
        out.append("|---|" + "---|" * (len(dev) + 1))
        for c in cands:
            cells = [f"{dev[s]['candidates'][c]:.3f} ({dev[s]['margins'][c]:+.3f})" for s in dev]
            mark = f"**{c}** (chosen)" if c == chosen else c
            out.append(
                f"| {mark} | "
                + " | ".join(cells)
                + f" | {figures['choice']['summary'][c]['min_margin']:+.3f} |"
            )
        out.append(
            "| best trivial baseline | "
            + " | ".join(f"{dev[s]['best_baseline']:.3f}" for s in dev)
            + " | |\n"
        )
    rep = figures["report"]
    out.append("**Report halves: AUROC [95% CI]**\n")
    out.append("| score | " + " | ".join(f"{NAMES[s]} (n = {rep[s]['n']})" for s in rep) + " |")
    out.append("|---|" + "---|" * len(rep))
    eligible = figures["choice"].get("eligible")
    rows = list(SCORES)
    if eligible:  # rule 3: every eligible candidate, the incumbent first
        rows = [(c, f"**{c}** (chosen)" if c == chosen else c) for c in eligible] + SCORES[1:]
    for key, label in rows:
        if key == "support_geomean" and not eligible:
            key = chosen
        elif key == "support_geomean":
            label = "support_geomean (`support`, today's default)"
        out.append(f"| {label} | " + " | ".join(_auc(rep[s]["scores"].get(key)) for s in rep) + " |")
    two = figures.get("reference_two_model_support")
    if two:
        out.append(
            "| reference, not eligible: both models' support, averaged | "
            + " | ".join(_auc(two[s]["report"]) for s in rep)
            + " |"
        )
    for key, label in BASELINES:
        out.append(
            f"| baseline: {label} | " + " | ".join(_auc(rep[s]["baselines"].get(key)) for s in rep) + " |"
        )
    cells = []
    for s in rep:
        d = rep[s]["default_vs_best_baseline"]
        cells.append(f"{d['difference']:+.3f} vs {d['baseline'].replace('_', ' ')} (p {d['p_value']:.2g})")
    goal = figures.get("goal")
    if goal:
        out.append("| chosen - best baseline (DeLong) | " + " | ".join(cells) + " |")
        cells = [
            f"{goal[s]['vs_support']['difference']:+.3f} (p {goal[s]['vs_support']['p_value']:.2g})"
            for s in rep
        ]
        out.append("| chosen - support (DeLong) | " + " | ".join(cells) + " |")
        hhem = goal["faithbench"].get("vs_hhem_2.1")
        if hhem:
            cells = [
                f"{hhem['difference']:+.3f} (p {hhem['p_value']:.2g})" if s == "faithbench" else "-"
                for s in rep
            ]
            out.append("| chosen - HHEM-2.1 (DeLong) | " + " | ".join(cells) + " |")
        out.append(
            f"\nGoal (ahead of every trivial baseline on every set and of HHEM-2.1) met: {goal['met']}\n"
        )
    else:
        out.append("| default - best baseline (DeLong) | " + " | ".join(cells) + " |\n")
    fb = rep.get("faithbench", {}).get("detectors")
    if fb:
        out.append(
            "**FaithBench-dev report half: the detectors whose predictions ship with the data"
            " (AUROC [95% CI])**\n"
        )
        out.append("| " + " | ".join(fb) + " |")
        out.append("|" + "---|" * len(fb))
        out.append("| " + " | ".join(_auc(v) for v in fb.values()) + " |\n")
    b = figures["bands"]
    out.append(
        f"**Verdicts: `grounded` >= {b['grounded_at']}, `ungrounded` < {b['ungrounded_below']} "
        "(precision and coverage [95% Wilson interval])**\n"
    )
    out.append(
        "| set (half) | `grounded` precision | `grounded` coverage | `ungrounded` precision"
        " | `ungrounded` coverage | `unsure` |"
    )
    out.append("|---|---|---|---|---|---|")
    for s in rep:
        for half, key in (("dev", "bands_dev"), ("report", "bands")):
            f = rep[s][key]
            g, u = f["grounded"], f["ungrounded"]
            out.append(
                f"| {NAMES[s]} ({half}, n = {f['n']}) | {_prop(g, 'precision')} | {_prop(g, 'coverage')} | "
                f"{_prop(u, 'precision')} | {_prop(u, 'coverage')} | {f['unsure_share']:.2f} |"
            )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figures", help="grounding_default.py's JSON output")
    args = parser.parse_args()
    print(tables(json.loads(Path(args.figures).read_text(encoding="utf-8"))))


if __name__ == "__main__":
    main()
