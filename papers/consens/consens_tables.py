"""Print the ConSens tables of docs/results.md from the experiments' saved outputs.

Each experiment's last output line is saved as ``docs/results/consens/<model>/<experiment>.json``
beside its per-item ``<experiment>.jsonl.gz``; this script reads them and prints the markdown tables,
so no figure in those tables is copied by hand. The figures that depend on which aggregate is the
default (DeLong against the default, the verdicts) are recomputed from the per-item scores with the
current default and bands, so a run saved before the default changed reads the same as a new one.
A run saved before the ``support`` aggregation existed has it recomputed here from each text's
scored words and its context (rebuilt from the data files), as the scorer computes it; the
lexical-support baseline (minus the share of scored words the context does not state) comes from
the same words.

    python -m papers.consens.consens_tables [--dir docs/results/consens]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from ragsense.consens import (
    ATTRIBUTION_AGGREGATION,
    DEFAULT_AGGREGATION,
    Aggregation,
    consens_from_word_nll,
    verdict,
)
from ragsense.data import load_faithbench, load_halueval, load_pubmedqa, load_wikieval
from ragsense.experiments import (
    PAIR_LABELS,
    contrast,
    delong_against,
    partial_context,
    partial_context_sentences,
    right_vs_rest,
    verdict_figures,
)
from ragsense.stats import bootstrap_ci, roc_auc
from ragsense.text import ContextVocabulary

MODELS = ("smollm2-135m", "gemma3-270m")
ROWS = ("support", "q25", "geometric", "arithmetic", "tail25", "min_word", "share")
LABEL = {
    "support": "support (default)",
    "q25": "q25 (the previous default)",
    "arithmetic": "arithmetic (the paper's ConSens)",
}


def _contexts(name: str, records: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """Per record, the contexts of its (higher, lower) texts, rebuilt from the data files."""
    if name == "consens-wikieval":
        wiki = {it.id: it for it in load_wikieval()}
        return [(wiki[r["id"]].context_v1, wiki[r["id"]].context_v1) for r in records]
    if name == "consens-halueval":
        halu = {it.id: it for it in load_halueval()}
        return [([halu[r["id"]].knowledge], [halu[r["id"]].knowledge]) for r in records]
    pub = {it.pmid: it for it in load_pubmedqa()}
    make = partial_context if name == "consens-pubmedqa-partial" else partial_context_sentences
    out = []
    for r in records:
        partial = make(pub[r["pmid"]])
        assert partial is not None, r["pmid"]
        out.append((pub[r["pmid"]].contexts, partial))
    return out


def _support_and_lexical(
    name: str, records: list[dict[str, Any]], keys: tuple[str, str]
) -> tuple[list[float], list[float]]:
    """Fill in ``support`` where a saved result lacks it; return the lexical-support pairs."""
    lexical: tuple[list[float], list[float]] = ([], [])
    for record, contexts in zip(records, _contexts(name, records), strict=True):
        for side, key, ctx in ((0, keys[0], contexts[0]), (1, keys[1], contexts[1])):
            result = record[key]
            vocab = ContextVocabulary(ctx)
            words = result["words"]
            stated = [w.get("stated", vocab.states(w["word"])) for w in words]
            by = result["consens_by_aggregation"]
            if "support" not in by:
                by["support"] = consens_from_word_nll(
                    [w["nll_empty"] for w in words],
                    [w["nll_context"] for w in words],
                    Aggregation.SUPPORT,
                    stated,
                )[0]
            lexical[side].append(-sum(not s for s in stated) / len(stated))
    return lexical


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
            figures, root / model / f"{name}.jsonl.gz", PAIR_LABELS[name], name in ANSWER_LEVEL, name
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
        # A run saved before an aggregation existed has no leave-one-out score for it.
        if a.value in records[0]["result"]["attribution"][0]["consens_without_by_aggregation"]
    }
    default = ATTRIBUTION_AGGREGATION.value
    figures["default_aggregation"] = default
    # The similarity scores are not in the per-item file: only the aggregations are compared.
    figures["delong_default_vs"] = delong_against(
        pairs[default], {k: v for k, v in pairs.items() if k != default}
    )


def _with_current_default(
    figures: dict[str, Any], items: Path, keys: tuple[str, str], answers: bool, name: str
) -> None:
    """Recompute the default-dependent figures from the per-item scores."""
    with gzip.open(items, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    hi, lo = keys
    lexical = _support_and_lexical(name, records, keys)
    figures["baseline_lexical_support"] = contrast(*lexical)

    def pair(get: Any) -> tuple[list[float], list[float]]:
        return [get(r, hi) for r in records], [get(r, lo) for r in records]

    scores = {a.value: pair(lambda r, k, a=a: r[k]["consens_by_aggregation"][a.value]) for a in Aggregation}
    default = DEFAULT_AGGREGATION.value
    figures["by_aggregation"]["support"] = contrast(*scores["support"])
    others = {k: v for k, v in scores.items() if k != default}
    others["lexical_support"] = lexical
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
        if not all(agg in f["by_aggregation"] for f in runs.values()):
            continue
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
        label = LABEL.get(agg, agg)
        if agg in defaults and agg == ATTRIBUTION_AGGREGATION.value and "support" not in f["by_aggregation"]:
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
    if all("baseline_lexical_support" in f for f in runs.values()):
        cells = []
        for f in runs.values():
            c = f["baseline_lexical_support"]
            delong = f["delong_default_vs"].get("lexical_support")
            vs = (
                f"; default - this: {delong['difference']:+.3f} (DeLong p {delong['p_value']:.2g})"
                if delong
                else ""
            )
            cells.append(f"{_auroc(c)}; higher in {_paired(c)}{vs}")
        lines.append("| baseline: lexical support (share of words stated) | " + " | ".join(cells) + " |")
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
                f"support and lexical support: docs/results.md, 'Choosing the default score', "
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


def _unpaired(pos: list[float], neg: list[float]) -> str:
    lo, hi = bootstrap_ci(roc_auc, pos, neg, n=1000, seed=0)
    return f"{roc_auc(pos, neg):.3f} [{lo:.3f}, {hi:.3f}]"


def faithbench_table(root: Path) -> str:
    """FaithBench-dev (all 250 summaries): the default, the old default, the paper's score, the trivial
    baselines and the shipped detectors, per model; ``support`` recomputed where a run predates it."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for model in MODELS:
        path = root / model / "consens-faithbench.jsonl.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                runs[model] = [json.loads(line) for line in fh if line.strip()]
    if not runs:
        return "(no saved output for consens-faithbench)\n"
    items = {it.id: it for it in load_faithbench()}

    def split(records: list[dict[str, Any]], values: list[float]) -> tuple[list[float], list[float]]:
        return (
            [v for v, r in zip(values, records, strict=True) if r["label"] == 1],
            [v for v, r in zip(values, records, strict=True) if r["label"] == 0],
        )

    rows: dict[str, dict[str, str]] = {}
    for model, records in runs.items():
        stated_by_row = []
        for r in records:
            vocab = ContextVocabulary([items[r["id"]].source])
            stated_by_row.append([w.get("stated", vocab.states(w["word"])) for w in r["result"]["words"]])
        support = [
            r["result"]["consens_by_aggregation"].get("support")
            or consens_from_word_nll(
                [w["nll_empty"] for w in r["result"]["words"]],
                [w["nll_context"] for w in r["result"]["words"]],
                Aggregation.SUPPORT,
                stated,
            )[0]
            for r, stated in zip(records, stated_by_row, strict=True)
        ]
        columns = {
            "support (default)": support,
            "q25 (the previous default)": [r["result"]["consens_by_aggregation"]["q25"] for r in records],
            "arithmetic (the paper's ConSens)": [
                r["result"]["consens_by_aggregation"]["arithmetic"] for r in records
            ],
            "baseline: lexical support": [-sum(not s for s in st) / len(st) for st in stated_by_row],
            "baseline: the shorter summary is consistent": [
                -float(len(items[r["id"]].summary.split())) for r in records
            ],
            "baseline: MiniLM similarity, max_chunk": [r["similarity_max_chunk"] for r in records],
        }
        for name in ("hhem-2.1", "hhem-2.1-english", "gpt_4o", "gpt-4-turbo", "trueteacher", "true_nli"):
            columns[f"detector shipped with the data: {name}"] = [r["detectors"][name] for r in records]
        for name, values in columns.items():
            rows.setdefault(name, {})[model] = _unpaired(*split(records, values))
    n = {m: len(r) for m, r in runs.items()}
    head = " | ".join(f"{m} (n = {n[m]})" for m in runs)
    lines = [
        "**FaithBench-dev: consistent vs hallucinated summary, all 250 (AUROC [95% CI])**",
        "",
        f"| score | {head} |",
        "|---|" + "---|" * len(runs),
    ]
    for name, cells in rows.items():
        lines.append(f"| {name} | " + " | ".join(cells.get(m, "-") for m in runs) + " |")
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
    print(faithbench_table(args.dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
