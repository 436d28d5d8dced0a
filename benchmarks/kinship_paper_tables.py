"""Print the kinship runs of docs/results.md beside the paper's Table 1, as Markdown.

    python benchmarks/kinship_paper_tables.py docs/results/kinship/smollm2-135m-12names ...

Each cell is "accuracy (retrieval recall)"; the paper's figures (LangChain, text-embedding-3-large and
GPT-4o-mini) are quoted from its Table 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ["control", "grandfather", "grandmother", "sibling", "uncle", "aunt"]
KS = [5, 15, 30, 45, 80, 120]
# The thesis's Table 1 (k -> Control, Grandfather, Grandmother, Sibling, Uncle, Aunt); None: not run.
PAPER = {
    12: {
        5: [0.95, 0, 0, 0, 0, 0],
        15: [0.99, 0.5, 0, 0.08, 0, 0],
        30: [1, 0.75, 0.75, 0.33, 0.5, 0],
        45: [1, 1, 0.75, 0.33, 0.25, 0],
        80: [0.986, 1, 0.5, 0.25, 0.25, 0.25],
        120: None,
    },
    24: {
        5: [0.99, 0, 0, 0, 0, 0],
        15: [0.99, 0.12, 0, 0.04, 0, 0],
        30: [1, 0.375, 0.125, 0.08, 0, 0],
        45: [1, 0.5, 0.37, 0.04, 0, 0],
        80: [1, 0.75, 0.5, 0.17, 0, 0],
        120: [1, 0.75, 0.375, 0.2, 0, 0],
    },
}


def table(run_dir: Path) -> str:
    results = json.loads((run_dir / "results.json").read_text())
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    names = settings["source"]["names"]
    by = {(r["k"], r["condition"]): r for r in results}
    head = "| k | " + " | ".join(c.title() for c in COLUMNS) + " |"
    lines = [
        f"**{settings.get('model', settings.get('system'))}, {names} names per list**",
        "",
        head,
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for k in KS:
        cells = []
        for c in COLUMNS:
            r = by.get((k, c))
            if r is None or r["accuracy"] is None:
                cells.append("—")
                continue
            rec = "—" if r["retrieval_recall"] is None else f"{r['retrieval_recall']:.2f}"
            cells.append(f"{r['accuracy']:.2f} ({rec})")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    n = {c: by[(KS[0], c)]["n"] for c in COLUMNS if (KS[0], c) in by}
    lines += ["", "Queries per condition: " + ", ".join(f"{c} {v}" for c, v in n.items()) + "."]
    return "\n".join(lines)


def paper_table(names: int) -> str:
    head = "| k | " + " | ".join(c.title() for c in COLUMNS) + " |"
    lines = [
        f'**Paper (LangChain: text-embedding-3-large + GPT-4o-mini), "{names} names"**',
        "",
        head,
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for k in KS:
        row = PAPER[names][k]
        cells = ["—"] * len(COLUMNS) if row is None else [f"{v:g}" for v in row]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    for names in (12, 24):
        print(paper_table(names), end="\n\n")
    for arg in sys.argv[1:]:
        print(table(Path(arg)), end="\n\n")
