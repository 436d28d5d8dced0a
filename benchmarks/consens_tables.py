"""Print the ConSens tables of docs/results.md from the experiments' saved outputs.

Each experiment's last output line is saved as ``docs/results/consens/<model>/<experiment>.json``
beside its per-item ``<experiment>.jsonl.gz``; this script reads them and prints the markdown tables,
so no figure in those tables is copied by hand. The figures that depend on which aggregate is the
default (DeLong against the default, the verdicts) are recomputed from the per-item scores with the
current default and bands, so a run saved before the default changed reads the same as a new one.

    python benchmarks/consens_tables.py [--dir docs/results/consens]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from ragsense.consens import ATTRIBUTION_AGGREGATION, DEFAULT_AGGREGATION, Aggregation, verdict
from ragsense.experiments._consens import PAIR_LABELS, right_vs_rest
from ragsense.experiments._figures import delong_against, verdict_figures

MODELS = ("smollm2-135m", "gemma3-270m")
ROWS = ("q25", "geometric", "arithmetic", "tail25", "min_word", "share")
LABEL = {"q25": "q25 (default)", "arithmetic": "arithmetic (the paper's ConSens)"}


ANSWER_LEVEL = ("consens-wikieval", "consens-halueval")


def _load(root: Path, model: str, name: str) -> dict[str, Any] | None:
    path = root / model / f"{name}.json"
    if not path.is_file():
        return None
    figures: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if name == "consens-pubmedqa-attribution":
        _attribution_default(figures, root / model / f"{name}.jsonl.gz")
    if name in PAIR_LABELS:
        _with_current_default(
            figures, root / model / f"{name}.jsonl.gz", PAIR_LABELS[name], name in ANSWER_LEVEL
        )
    return figures


def _attribution_default(figures: dict[str, Any], items: Path) -> None:
    """Attribution ranks documents by ATTRIBUTION_AGGREGATION: recompute DeLong against it."""
    with gzip.open(items, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    correct = [r["correct_position"] for r in records]
    pairs = {
        a.value: right_vs_rest(
            [
                [d["consens_without_by_aggregation"][a.value] for d in r["result"]["attribution"]]
                for r in records
            ],
            correct,
        )
        for a in Aggregation
    }
    default = ATTRIBUTION_AGGREGATION.value
    figures["default_aggregation"] = default
    # The similarity scores are not in the per-item file: only the aggregations are compared.
    figures["delong_default_vs"] = delong_against(
        pairs[default], {k: v for k, v in pairs.items() if k != default}
    )


def _with_current_default(figures: dict[str, Any], items: Path, keys: tuple[str, str], answers: bool) -> None:
    """Recompute the default-dependent figures from the per-item scores."""
    with gzip.open(items, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    hi, lo = keys

    def pair(get: Any) -> tuple[list[float], list[float]]:
        return [get(r, hi) for r in records], [get(r, lo) for r in records]

    scores = {a.value: pair(lambda r, k, a=a: r[k]["consens_by_aggregation"][a.value]) for a in Aggregation}
    default = DEFAULT_AGGREGATION.value
    others = {k: v for k, v in scores.items() if k != default}
    for mode in ("whole", "max_chunk"):
        others[f"similarity_{mode}"] = pair(lambda r, k, mode=mode: r[f"similarity_{mode}_{k}"])
    figures["default_aggregation"] = default
    figures["delong_default_vs"] = delong_against(scores[default], others)
    if answers:
        figures["verdicts"] = verdict_figures(*scores[default], lambda x: verdict(x, default))


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
        defaults = {f["default_aggregation"] for f in runs.values()}
        label = LABEL.get(agg, agg) if agg != "q25" or "q25" in defaults else "q25"
        if agg in defaults and agg != "q25":
            label = f"{agg} (default for attribution)"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for mode in ("whole", "max_chunk"):
        cells = []
        for f in runs.values():
            c = f["baseline_similarity"][mode]
            top1 = f" / top-1 {c['top1_accuracy']:.1%}" if "top1_accuracy" in c else ""
            delong = f["delong_default_vs"].get(f"similarity_{mode}")
            vs = (
                f"; default - this: {delong['difference']:+.3f} (DeLong p {delong['p_value']:.2g})"
                if delong
                else ""
            )
            cells.append(f"{_auroc(c)}{top1}; higher in {_paired(c)}{vs}")
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
