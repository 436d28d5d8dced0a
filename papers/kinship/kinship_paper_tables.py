"""Print the kinship runs of docs/results.md beside the paper's Table 1, as Markdown.

    python -m papers.kinship.kinship_paper_tables docs/results/kinship/smollm2-135m-12names ...

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


def _markdown(title: str, rows: list[list[str]]) -> list[str]:
    """A titled Markdown table: one row per k, one column per condition."""
    head = "| k | " + " | ".join(c.title() for c in COLUMNS) + " |"
    sep = "|---" * (len(COLUMNS) + 1) + "|"
    body = [f"| {k} | " + " | ".join(cells) + " |" for k, cells in zip(KS, rows, strict=True)]
    return [title, "", head, sep, *body]


def _cell(record: dict | None) -> str:
    if record is None or record["accuracy"] is None:
        return "—"
    recall = record["retrieval_recall"]
    return f"{record['accuracy']:.2f} ({'—' if recall is None else f'{recall:.2f}'})"


def table(run_dir: Path) -> str:
    results = json.loads((run_dir / "results.json").read_text())
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    names = settings["source"]["names"]
    by = {(r["k"], r["condition"]): r for r in results}
    rows = [[_cell(by.get((k, c))) for c in COLUMNS] for k in KS]
    lines = _markdown(f"**{settings.get('model', settings.get('system'))}, {names} names per list**", rows)
    n = {c: by[(KS[0], c)]["n"] for c in COLUMNS if (KS[0], c) in by}
    lines += ["", "Queries per condition: " + ", ".join(f"{c} {v}" for c, v in n.items()) + "."]
    return "\n".join(lines)


def paper_table(names: int) -> str:
    rows = [["—"] * len(COLUMNS) if (row := PAPER[names][k]) is None else [f"{v:g}" for v in row] for k in KS]
    title = f'**Paper (LangChain: text-embedding-3-large + GPT-4o-mini), "{names} names"**'
    return "\n".join(_markdown(title, rows))


if __name__ == "__main__":
    for names in (12, 24):
        print(paper_table(names), end="\n\n")
    for arg in sys.argv[1:]:
        print(table(Path(arg)), end="\n\n")
