"""Print the ConSens tables of docs/results.md from the experiments' saved JSON outputs.

Each experiment's last output line is saved as ``docs/results/consens/<model>/<experiment>.json``
(beside its per-item ``.jsonl.gz``); this script reads them and prints the markdown tables, so no
figure in those tables is copied by hand:

    python benchmarks/consens_tables.py [--dir docs/results/consens]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

MODELS = ("smollm2-135m", "gemma3-270m")
ROWS = ("q25", "geometric", "arithmetic", "tail25", "min_word", "share")
LABEL = {"q25": "q25 (default)", "arithmetic": "arithmetic (the paper's ConSens)"}


def _load(root: Path, model: str, name: str) -> dict[str, Any] | None:
    path = root / model / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _auroc(c: dict[str, Any]) -> str:
    lo, hi = c["auroc_ci95"]
    return f"{c['auroc']:.3f} [{lo:.3f}, {hi:.3f}]"


def _paired(c: dict[str, Any]) -> str:
    s = c["sign_test"]
    return f"{c['share_positive_higher']:.0%} (sign p {s['p_value']:.2g})"


def _length(b: dict[str, Any]) -> str:
    return f"{b['auroc']:.3f} ({b['mean_words_positive']:.1f} vs {b['mean_words_negative']:.1f} words)"


def table(root: Path, name: str, title: str) -> str:
    loaded = {m: _load(root, m, name) for m in MODELS}
    runs = {m: f for m, f in loaded.items() if f is not None}
    if not runs:
        return f"(no saved output for {name})\n"
    head = " | ".join(f"{m} (n = {f['n']})" for m, f in runs.items())
    lines = [f"**{title}**", "", f"| score | {head} |", "|---|" + "---|" * len(runs)]
    for agg in ROWS:
        cells = []
        for f in runs.values():
            c = f["by_aggregation"][agg]
            top1 = f" / top-1 {c['top1_accuracy']:.1%}" if "top1_accuracy" in c else ""
            delong = f["delong_default_vs"].get(agg)
            vs = (
                f"; default - this: {delong['difference']:+.3f} (DeLong p {delong['p_value']:.2g})"
                if delong
                else ""
            )
            cells.append(f"{_auroc(c)}{top1}; higher in {_paired(c)}{vs}")
        lines.append(f"| {LABEL.get(agg, agg)} | " + " | ".join(cells) + " |")
    for mode in ("whole", "max_chunk"):
        cells = []
        for f in runs.values():
            c = f["baseline_similarity"][mode]
            top1 = f" / top-1 {c['top1_accuracy']:.1%}" if "top1_accuracy" in c else ""
            delong = f["delong_default_vs"][f"similarity_{mode}"]
            cells.append(
                f"{_auroc(c)}{top1}; higher in {_paired(c)}; default - this: {delong['difference']:+.3f} "
                f"(DeLong p {delong['p_value']:.2g})"
            )
        lines.append(f"| baseline: MiniLM similarity, {mode} | " + " | ".join(cells) + " |")
    if all("baseline_answer_length" in f for f in runs.values()):
        lines.append(
            "| baseline: the shorter answer is grounded | "
            + " | ".join(_length(f["baseline_answer_length"]) for f in runs.values())
            + " |"
        )
    if all("baseline_context_length_auroc" in f for f in runs.values()):
        lines.append(
            "| baseline: the longer context is the full one | "
            + " | ".join(f"{f['baseline_context_length_auroc']:.3f}" for f in runs.values())
            + " |"
        )
    if all("verdicts" in f for f in runs.values()):
        cells = []
        for f in runs.values():
            v = f["verdicts"]["ungrounded"]
            cells.append(
                f"precision {v['precision'] if v['precision'] is not None else '-'}, recall {v['recall']} "
                f"(bands of {f['default_aggregation']})"
            )
        lines.append("| verdict `ungrounded` on the lower-scoring texts | " + " | ".join(cells) + " |")
    if all("length_matched" in f for f in runs.values()):
        cells = []
        for f in runs.values():
            lm = f["length_matched"]
            by = lm["by_aggregation"]
            cells.append(
                f"n = {lm['n']}: q25 {_auroc(by['q25'])}, geometric {_auroc(by['geometric'])}, "
                f"length {lm['baseline_answer_length']['auroc']:.3f}"
            )
        lines.append("| pairs whose answers differ by at most 2 words | " + " | ".join(cells) + " |")
    extra = [f for f in runs.values() if "retrieval_hit_rate" in f]
    if extra:
        lines.append(
            "| queries / retrieval hits | "
            + " | ".join(f"{f['n_queries']} / {f['retrieval_hit_rate']:.1%}" for f in runs.values())
            + " |"
        )
    seconds = " | ".join(f"{f['seconds']:.0f} s" for f in runs.values())
    lines.append(f"| run time (2 cores, shared) | {seconds} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("docs/results/consens"))
    args = parser.parse_args()
    for name, title in (
        ("consens-wikieval", "WikiEval: grounded vs ungrounded answer (AUROC [95% CI])"),
        ("consens-halueval", "HaluEval QA: right vs hallucinated answer"),
        ("consens-pubmedqa-partial", "PubMedQA: full vs partial abstract (results sections dropped)"),
        ("consens-pubmedqa-partial-sentences", "PubMedQA: full vs partial abstract (two sentences dropped)"),
        ("consens-pubmedqa-attribution", "PubMedQA: context with vs without the right abstract"),
    ):
        print(table(args.dir, name, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
