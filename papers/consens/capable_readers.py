"""Issue 36: ConSens with a capable reader (Qwen2.5-Coder) beside SmolLM2 and the trivial baselines.

Two steps. ``score`` runs one reader over the first N items of one set's **report half** (the halves
of papers/consens/grounding_default.py's rule: WikiEval questions 25-49, HaluEval-dev rows 100-199,
PubMedQA's usable items 98-195 of the first 200, FaithBench-dev's odd passages) through
``ragsense.evaluate`` and writes one JSON line per item (every scored word's NLL with and without the
context) plus the run's rows/s and peak memory:

    python -m papers.consens.capable_readers score --model qwen2.5-coder-0.5b --set halueval \\
        --limit 50 --out docs/results/consens/qwen2.5-coder-0.5b

``table`` reads those files and, for the same items, SmolLM2-135M's committed per-item outputs
(docs/results/consens/smollm2-135m, which also hold the MiniLM similarities), and prints the AUROC
[95% bootstrap interval, pairs or passages resampled whole] of ``support`` under each reader beside
lexical support, answer length and MiniLM similarity, all on the same rows; no model runs:

    python -m papers.consens.capable_readers table docs/results/consens/qwen2.5-coder-0.5b \\
        --out docs/results/consens/capable_readers.json

Nothing here chooses anything: the scores are the shipped default (``support``), so the report halves
are read once, for the table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from papers.consens.grounding_default import BASELINES, Row, _auroc_ci, _row, _support_geomean
from ragsense import evaluate
from ragsense.consens import ConSens
from ragsense.data import load_faithbench, load_halueval, load_pubmedqa, load_wikieval
from ragsense.experiments import partial_context
from ragsense.models import load_model
from ragsense.stats import roc_auc

SETS = ("halueval", "wikieval", "faithbench", "pubmedqa")
NAMES = {
    "wikieval": "WikiEval",
    "halueval": "HaluEval-dev",
    "pubmedqa": "PubMedQA (full vs partial)",
    "faithbench": "FaithBench-dev (summaries)",
}
# The SmolLM2 experiment file of each set, and the keys of its two texts (higher, lower; None: unpaired).
REFERENCE = {
    "wikieval": ("consens-wikieval", ("grounded", "ungrounded")),
    "halueval": ("consens-halueval", ("right", "hallucinated")),
    "pubmedqa": ("consens-pubmedqa-partial", ("full", "partial")),
    "faithbench": ("consens-faithbench", None),
}
FAITHBENCH_QUESTION = "Summarize the passage."  # as ragsense.experiments scores FaithBench


@dataclass(frozen=True)
class Text:
    """One scored text of a report half: its item, label (1 grounded) and group (pair or passage)."""

    item: str
    key: str  # the text's key in the SmolLM2 per-item record ("right", "partial", "result", ...)
    label: int
    group: str
    question: str
    contexts: list[str]
    answer: str


def report_half(name: str) -> Iterator[list[Text]]:
    """The set's report half in file order, one list of texts per item (a pair, or one summary)."""
    if name == "wikieval":
        for i, it in enumerate(load_wikieval()[25:50], 25):
            yield [
                Text(it.id, "grounded", 1, f"w{i}", it.question, it.context_v1, it.grounded_answer),
                Text(it.id, "ungrounded", 0, f"w{i}", it.question, it.context_v1, it.ungrounded_answer),
            ]
    elif name == "halueval":
        for i, h in enumerate(load_halueval()[100:200], 100):
            yield [
                Text(h.id, "right", 1, f"h{i}", h.question, [h.knowledge], h.right_answer),
                Text(h.id, "hallucinated", 0, f"h{i}", h.question, [h.knowledge], h.hallucinated_answer),
            ]
    elif name == "pubmedqa":
        usable = [(p, part) for p in load_pubmedqa()[:200] if (part := partial_context(p)) is not None]
        for i, (p, part) in enumerate(usable[len(usable) // 2 :], len(usable) // 2):
            yield [
                Text(p.pmid, "full", 1, f"p{i}", p.question, p.contexts, p.long_answer),
                Text(p.pmid, "partial", 0, f"p{i}", p.question, part, p.long_answer),
            ]
    elif name == "faithbench":
        for f in load_faithbench():
            if f.passage % 2 == 1:
                yield [Text(f.id, "result", f.label, f"f{f.passage}", FAITHBENCH_QUESTION, [f.source], f.summary)]
    else:
        raise SystemExit(f"unknown set {name!r}; one of {', '.join(SETS)}")


def score(args: argparse.Namespace) -> dict[str, Any]:
    items = list(report_half(args.set))[: args.limit]
    texts = [t for item in items for t in item]
    model = load_model(args.model, threads=args.threads)
    started = time.perf_counter()
    run = evaluate(
        [{"id": str(i), "question": t.question, "contexts": t.contexts, "answer": t.answer} for i, t in enumerate(texts)],
        [ConSens(model)],
        chunk_size=8,
        progress=True,
        desc=f"{args.set} {args.model}",
    )
    seconds = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / f"{args.set}.jsonl.gz", "wt", encoding="utf-8") as fh:
        for t, record in zip(texts, run.rows, strict=True):
            if record["errors"]:
                raise SystemExit(f"{args.set} item {t.item} ({t.key}): {record['errors'][0]}")
            result = {k: record[k] for k in ("consens", "r", "verdict", "words", "truncated")}
            line = {"item": t.item, "key": t.key, "label": t.label, "group": t.group, "result": result}
            fh.write(json.dumps(line, allow_nan=False) + "\n")
    summary = {
        "set": args.set,
        "model": args.model,
        "items": len(items),
        "texts": len(texts),
        "seconds": round(seconds, 1),
        "rows_per_s": round(len(texts) / seconds, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "threads": args.threads,
        "command": " ".join(["python -m papers.consens.capable_readers", *sys.argv[1:]]),
    }
    (out / f"{args.set}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _reference(results: Path, name: str) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, float]]]:
    """SmolLM2's result and MiniLM similarities per (item, key) of one set."""
    stem, keys = REFERENCE[name]
    out = {}
    for rec in _records(results / f"{stem}.jsonl.gz"):
        item = str(rec.get("id", rec.get("pmid")))
        for key in keys or ("result",):
            suffix = "" if keys is None else f"_{key}"
            sims = {m: rec[f"similarity_{m}{suffix}"] for m in ("whole", "max_chunk")}
            out[(item, key)] = (rec[key], sims)
    return out


def paired_rows(results: Path, reference: Path, name: str) -> tuple[list[Row], list[Row]]:
    """The capable reader's rows of one set and SmolLM2's rows of the same texts (same order)."""
    texts = {(t.item, t.key): t for item in report_half(name) for t in item}
    ref = _reference(reference, name)
    ours, theirs = [], []
    for rec in _records(results / f"{name}.jsonl.gz"):
        t = texts[(rec["item"], rec["key"])]
        smol, sims = ref[(t.item, t.key)]
        common = {"label": t.label, "group": t.group, "dev": False, "similarity": sims}
        ours.append(_row(rec["result"], t.contexts, t.answer, **common))
        theirs.append(_row(smol, t.contexts, t.answer, **common))
    return ours, theirs


def _auc(rows: list[Row], values: list[float]) -> dict[str, Any]:
    pos = [v for v, r in zip(values, rows, strict=True) if r.label == 1]
    neg = [v for v, r in zip(values, rows, strict=True) if r.label == 0]
    return {"auroc": round(roc_auc(pos, neg), 4), "ci95": _auroc_ci(rows, values)}


def table(args: argparse.Namespace) -> dict[str, Any]:
    results, reference = Path(args.results), Path(args.reference)
    figures: dict[str, Any] = {}
    for name in SETS:
        if not (results / f"{name}.jsonl.gz").exists():
            continue
        ours, theirs = paired_rows(results, reference, name)
        run = json.loads((results / f"{name}.json").read_text())
        entry = {
            "n_texts": len(ours),
            "n_groups": len({r.group for r in ours}),
            f"support ({run['model']})": _auc(ours, [_support_geomean(r) for r in ours]),
            "support (smollm2-135m)": _auc(theirs, [_support_geomean(r) for r in theirs]),
        }
        for base in ("lexical_support", "answer_length", "similarity_max_chunk", "similarity_whole"):
            entry[base] = _auc(ours, [BASELINES[base](r) for r in ours])
        entry["speed"] = {k: run[k] for k in ("rows_per_s", "peak_rss_mib", "threads", "seconds")}
        figures[name] = entry
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    print(markdown(figures))
    return figures


def markdown(figures: dict[str, Any]) -> str:
    columns = [k for k in next(iter(figures.values())) if k not in ("n_texts", "n_groups", "speed")]
    lines = [
        "| set (report half) | texts (groups) | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for name, entry in figures.items():
        cells = [f"{entry[c]['auroc']:.3f} [{entry[c]['ci95'][0]:.2f}, {entry[c]['ci95'][1]:.2f}]" for c in columns]
        lines.append(f"| {NAMES[name]} | {entry['n_texts']} ({entry['n_groups']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("score", help="score a report half with one reader")
    s.add_argument("--model", required=True)
    s.add_argument("--set", required=True, choices=SETS)
    s.add_argument("--limit", type=int, default=None, help="the first N items of the report half")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--out", required=True)
    t = sub.add_parser("table", help="the AUROC table from score's files (no model runs)")
    t.add_argument("results")
    t.add_argument("--reference", default="docs/results/consens/smollm2-135m")
    t.add_argument("--out")
    args = parser.parse_args(argv)
    if args.command == "score":
        print(json.dumps(score(args)))
    else:
        table(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
