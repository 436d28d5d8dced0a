"""Markdown tables of the learned verdict's figures (docs/results.md, "A learned verdict (issue 36)").

python -m papers.consens.learned_tables docs/results/consens/learned_verdict.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

NAMES = {
    "wikieval": "WikiEval",
    "halueval": "HaluEval-dev",
    "halueval_matched": "HaluEval-dev, length-matched",
    "qa": "HaluEval QA (more)",
    "qa_matched": "HaluEval QA (more), length-matched",
    "dialogue": "HaluEval dialogue",
    "summarization": "HaluEval summarization",
    "summedits": "SummEdits (5 domains)",
    "pubmedqa": "PubMedQA (full vs partial)",
    "faithbench": "FaithBench-dev",
}
BASELINE_NAMES = {
    "answer_length": "baseline: answer length",
    "lexical_support": "baseline: lexical support",
    "similarity_whole": "baseline: MiniLM similarity (whole)",
    "similarity_max_chunk": "baseline: MiniLM similarity (max_chunk)",
    "context_length": "baseline: context length",
}


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    lo, hi = c["ci95"]
    return f"{c['auroc']:.3f} [{lo:.2f}, {hi:.2f}]"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def tables(fig: dict[str, Any]) -> str:
    rep = fig["report"]
    sets = [s for s in NAMES if s in rep]
    head = "| score | " + " | ".join(f"{NAMES[s]} (n = {rep[s]['n']})" for s in sets) + " |"
    lines = [head, "|---|" + "---|" * len(sets)]

    def row(label: str, get: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(_cell(get(rep[s])) for s in sets) + " |")

    row(f"**learned, leave-one-family-out** ({fig['chosen']})", lambda r: r["learned_lodo"])
    row("learned, shipped (fitted on every development half)", lambda r: r["learned_shipped"])
    row("`support` (default)", lambda r: r["support"])
    for b, label in BASELINE_NAMES.items():
        row(label, lambda r, b=b: r["baselines"].get(b))
    lines.append(
        "| margin over the best baseline (LODO / shipped) | "
        + " | ".join(
            f"{rep[s]['margin_lodo']:+.3f} / {rep[s]['margin_shipped']:+.3f} vs {rep[s]['best_baseline']}"
            for s in sets
        )
        + " |"
    )
    delongs = (
        ("LODO - best baseline", "delong_lodo_vs_best"),
        ("LODO - `support`", "delong_lodo_vs_support"),
    )
    for label, key in delongs:
        cells = [f"{rep[s][key]['difference']:+.3f} (p {rep[s][key]['p_value']:.2g})" for s in sets]
        lines.append(f"| {label} (DeLong p) | " + " | ".join(cells) + " |")
    lines.append(
        "| passes the rule (+0.02, both) | "
        + " | ".join("yes" if rep[s]["passes"] else "no" for s in sets)
        + " |"
    )
    out = ["**Report halves: AUROC [95% CI]**", "", *lines, ""]
    cand = fig["candidates"]
    dev_sets = list(cand["logistic"]["dev_margins"])
    out += [
        "**Development halves, leave-one-family-out: margin over the best trivial baseline (the choice)**",
        "",
        "| model | " + " | ".join(NAMES[s] for s in dev_sets) + " | smallest | mean AUROC |",
        "|---|" + "---|" * (len(dev_sets) + 2),
    ]
    for name, c in cand.items():
        chosen = " (chosen)" if name == fig["chosen"] else ""
        out.append(
            f"| {name}{chosen} | "
            + " | ".join(f"{c['dev_margins'][s]:+.3f}" for s in dev_sets)
            + f" | {c['smallest_margin']:+.3f} | {c['mean_dev_auroc']:.3f} |"
        )
    out.append("")
    if "summedits" in rep and "by_domain" in rep["summedits"]:
        out += [
            "**SummEdits report half by domain (AUROC; small: read as a hint)**",
            "",
            "| domain | n | learned (LODO) | lexical support |",
            "|---|---|---|---|",
        ]
        for d, v in rep["summedits"]["by_domain"].items():
            out.append(f"| {d} | {v['n']} | {_num(v['learned_lodo'])} | {_num(v['lexical_support'])} |")
        out.append("")
    b = fig["bands"]
    out += [
        f"**Verdicts of the shipped model: `grounded` >= {b['grounded_at']}, "
        f"`ungrounded` < {b['ungrounded_below']}**",
        "",
        "| set (half) | `grounded` precision | coverage | `ungrounded` precision | coverage | `unsure` |",
        "|---|---|---|---|---|---|",
    ]
    for key, v in fig["verdicts"].items():
        if "(report)" not in key:
            continue
        g, u = v["grounded"], v["ungrounded"]

        def p(x: dict[str, Any]) -> str:
            if x["precision"] is None:
                return "- (0 calls)"
            lo, hi = x["precision_ci95"]
            return f"{x['precision']:.2f} [{lo:.2f}, {hi:.2f}]"

        name, half = key.rsplit(" (", 1)
        cells = [p(g), f"{g['coverage']:.2f}", p(u), f"{u['coverage']:.2f}", f"{v['unsure_share']:.2f}"]
        out.append(f"| {NAMES.get(name, name)} ({half} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Coefficients (standardised features): "
        + ", ".join(f"`{k}` {v:+.3f}" for k, v in fig["coefficients"].items() if v),
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
