"""Issue 36: ConSens with a capable reader (Qwen2.5-Coder) beside SmolLM2 and the trivial baselines.

Two steps. ``score`` runs one reader over the first N items of one set's **report half** (the halves
of papers/consens/grounding_default.py's rule: WikiEval questions 25-49, HaluEval-dev rows 100-199,
PubMedQA's usable items 98-195 of the first 200, FaithBench-dev's odd passages; for HaluEval's dialogue,
summarization and further QA pairs and SummEdits, the report half of the learned verdict's table,
``ragsense.experiments.verdict_table``, split by document) through
``ragsense.evaluate`` and writes one JSON line per item (every scored word's NLL with and without the
context) plus the run's rows/s and peak memory:

    python -m papers.consens.capable_readers score --model qwen2.5-coder-0.5b --set halueval \\
        --limit 50 --out docs/results/consens/qwen2.5-coder-0.5b

``table`` reads those files and, for the same items, SmolLM2-135M's committed per-item outputs
(docs/results/consens/smollm2-135m, which also hold the MiniLM similarities; for the table's sets,
docs/results/consens/verdict, with MiniLM run here on the texts), and prints the AUROC
[95% bootstrap interval, pairs or passages resampled whole] of ``support`` under each reader beside
lexical support, answer length and MiniLM similarity, all on the same rows; no model runs:

    python -m papers.consens.capable_readers table docs/results/consens/qwen2.5-coder-0.5b \\
        --out docs/results/consens/capable_readers.json

``--also FOLDER`` adds another reader's columns (and a DeLong test against it) where it scored the
very same texts.

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

from papers.consens.grounding_default import BASELINES, RULE_SCORES, Row, _auroc_ci, _row, _support_geomean
from ragsense import evaluate
from ragsense.consens import ConSens, default_bands
from ragsense.data import load_faithbench, load_halueval, load_pubmedqa, load_wikieval
from ragsense.embeddings import load_embedder
from ragsense.experiments import partial_context, verdict_table
from ragsense.models import load_model
from ragsense.similarity import MODES, answer_context_similarity
from ragsense.stats import delong_paired, roc_auc, wilson_ci

# The learned verdict's table (ragsense.experiments.verdict_table): SmolLM2's results in VERDICT_FOLDER.
TABLE_SETS = ("qa", "dialogue", "summarization", "summedits")
SETS = ("halueval", "wikieval", "faithbench", "pubmedqa", *TABLE_SETS)
NAMES = {
    "wikieval": "WikiEval",
    "halueval": "HaluEval-dev",
    "pubmedqa": "PubMedQA (full vs partial)",
    "faithbench": "FaithBench-dev (summaries)",
    "qa": "HaluEval QA (rows 501+)",
    "dialogue": "HaluEval dialogue",
    "summarization": "HaluEval summarization",
    "summedits": "SummEdits (5 domains)",
}
VERDICT_FOLDER = "verdict"  # beside --reference: docs/results/consens/verdict
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
                yield [
                    Text(f.id, "result", f.label, f"f{f.passage}", FAITHBENCH_QUESTION, [f.source], f.summary)
                ]
    elif name in TABLE_SETS:
        groups: dict[str, list[Text]] = {}
        for r in verdict_table()[name]:
            if not r.dev:  # a pair (or a document's summaries) stays together
                text = Text(r.id, "result", r.label, r.group, r.question, list(r.contexts), r.answer)
                groups.setdefault(r.group, []).append(text)
        yield from groups.values()
    else:
        raise SystemExit(f"unknown set {name!r}; one of {', '.join(SETS)}")


def score(args: argparse.Namespace) -> dict[str, Any]:
    """Score the set's report half in chunks of items, rewriting the output after each chunk, so a
    run stopped at a deadline leaves the items it finished (and its summary says how many)."""
    items = list(report_half(args.set))[: args.limit]
    model = load_model(args.model, threads=args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    started, cpu_started = time.perf_counter(), time.process_time()
    summary: dict[str, Any] = {}
    for first in range(0, len(items), args.every):
        texts = [t for item in items[first : first + args.every] for t in item]
        run = evaluate(
            [
                {"id": str(i), "question": t.question, "contexts": t.contexts, "answer": t.answer}
                for i, t in enumerate(texts)
            ],
            [ConSens(model)],
            chunk_size=8,
        )
        for t, record in zip(texts, run.rows, strict=True):
            if record["errors"]:
                raise SystemExit(f"{args.set} item {t.item} ({t.key}): {record['errors'][0]}")
            result = {k: record[k] for k in ("consens", "consens_raw", "verdict", "words", "truncated")}
            line = {"item": t.item, "key": t.key, "label": t.label, "group": t.group, "result": result}
            lines.append(json.dumps(line, allow_nan=False))
        with gzip.open(out / f"{args.set}.jsonl.gz", "wt", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        summary = {
            "set": args.set,
            "model": args.model,
            "items": min(first + args.every, len(items)),
            "texts": len(lines),
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "rows_per_s": round(len(lines) / seconds, 3),
            # With one thread, texts per CPU-second is the rate on one idle core, whatever the load.
            "rows_per_cpu_s": round(len(lines) / cpu, 3),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "threads": args.threads,
            "command": " ".join(["python -m papers.consens.capable_readers", *sys.argv[1:]]),
        }
        (out / f"{args.set}.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps(summary), flush=True)
    return summary


def _records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _reference(results: Path, name: str) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, float]]]:
    """SmolLM2's result and MiniLM similarities per (item, key) of one set."""
    if name in TABLE_SETS:
        return _table_reference(results.parent / VERDICT_FOLDER, name)
    stem, keys = REFERENCE[name]
    out = {}
    for rec in _records(results / f"{stem}.jsonl.gz"):
        item = str(rec.get("id", rec.get("pmid")))
        for key in keys or ("result",):
            suffix = "" if keys is None else f"_{key}"
            sims = {m: rec[f"similarity_{m}{suffix}"] for m in ("whole", "max_chunk")}
            out[(item, key)] = (rec[key], sims)
    return out


def _table_reference(
    folder: Path, name: str
) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, float]]]:
    """SmolLM2's results of a verdict-table set's report half, and MiniLM similarities computed here
    (the table's files hold none; the embedder is deterministic)."""
    texts = [t for item in report_half(name) for t in item]
    results = {rec["id"]: rec["result"] for rec in _records(folder / f"verdict-{name}.jsonl.gz")}
    embedder = load_embedder("minilm", cache=True)
    sims = {
        m: answer_context_similarity(
            [t.answer for t in texts], ["\n\n".join(t.contexts) for t in texts], embedder, mode=m
        )  # type: ignore[arg-type]
        for m in MODES
    }
    return {
        (t.item, t.key): (results[t.item], {m: float(sims[m][k]) for m in MODES}) for k, t in enumerate(texts)
    }


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


def verdicts(rows: list[Row], values: list[float]) -> dict[str, Any]:
    """The default bands (fitted on SmolLM2's development halves) on these rows: each verdict's
    precision (grounded: label 1; ungrounded: label 0) and coverage, with Wilson intervals."""
    bands = default_bands()
    out: dict[str, Any] = {"bands": [bands.grounded_at, bands.ungrounded_below]}
    for verdict, label in (("grounded", 1), ("ungrounded", 0)):
        called = [r.label for r, v in zip(rows, values, strict=True) if bands.verdict(v) == verdict]
        hits = sum(1 for y in called if y == label)
        out[verdict] = {
            "calls": len(called),
            "precision": round(hits / len(called), 3) if called else None,
            "precision_ci95": [round(x, 3) for x in wilson_ci(hits, len(called))] if called else None,
            "coverage": round(len(called) / len(rows), 3),
        }
    return out


def _also(folder: Path, name: str, results: Path, reference: Path) -> tuple[str, list[Row]] | None:
    """Another reader's rows of the same texts (``--also``), or None when it did not score them all."""
    if not (folder / f"{name}.jsonl.gz").exists():
        return None
    mine = [(r["item"], r["key"]) for r in _records(results / f"{name}.jsonl.gz")]
    other, _ = paired_rows(folder, reference, name)
    keys = [(r["item"], r["key"]) for r in _records(folder / f"{name}.jsonl.gz")]
    by_text = dict(zip(keys, other, strict=True))
    if any(t not in by_text for t in mine):
        return None
    model = json.loads((folder / f"{name}.json").read_text())["model"]
    return model, [by_text[t] for t in mine]


def table(args: argparse.Namespace) -> dict[str, Any]:
    results, reference = Path(args.results), Path(args.reference)
    figures: dict[str, Any] = {}
    for name in SETS:
        if not (results / f"{name}.jsonl.gz").exists():
            continue
        ours, theirs = paired_rows(results, reference, name)
        run = json.loads((results / f"{name}.json").read_text())
        also = [a for folder in args.also or () if (a := _also(Path(folder), name, results, reference))]
        entry = {
            "n_texts": len(ours),
            "n_groups": len({r.group for r in ours}),
            f"support ({run['model']})": _auc(ours, [_support_geomean(r) for r in ours]),
            "support (smollm2-135m)": _auc(theirs, [_support_geomean(r) for r in theirs]),
            # The reader's evidence alone: the geometric mean of every word's contrast, no lexical floor.
            f"geometric ({run['model']})": _auc(ours, [RULE_SCORES["geometric"](r) for r in ours]),
            "geometric (smollm2-135m)": _auc(theirs, [RULE_SCORES["geometric"](r) for r in theirs]),
        }
        for model, rows in also:  # another capable reader on the very same texts
            entry[f"support ({model})"] = _auc(rows, [_support_geomean(r) for r in rows])
            entry[f"geometric ({model})"] = _auc(rows, [RULE_SCORES["geometric"](r) for r in rows])
        for base in ("lexical_support", "answer_length", "similarity_max_chunk", "similarity_whole"):
            entry[base] = _auc(ours, [BASELINES[base](r) for r in ours])
        # DeLong on the same texts: the capable reader against SmolLM2 and against each trivial baseline.
        labels = [r.label == 1 for r in ours]
        capable = [_support_geomean(r) for r in ours]
        others = {"support (smollm2-135m)": [_support_geomean(r) for r in theirs]}
        others |= {f"support ({model})": [_support_geomean(r) for r in rows] for model, rows in also}
        others |= {b: [BASELINES[b](r) for r in ours] for b in ("lexical_support", "answer_length")}
        entry["delong"] = {
            k: {key: round(val, 4) for key, val in delong_paired(capable, v, labels).to_dict().items()}
            for k, v in others.items()
        }
        entry["speed"] = {
            k: run.get(k)
            for k in ("model", "rows_per_s", "rows_per_cpu_s", "peak_rss_mib", "threads", "seconds")
        }
        entry["verdicts"] = {
            run["model"]: verdicts(ours, [_support_geomean(r) for r in ours]),
            "smollm2-135m": verdicts(theirs, [_support_geomean(r) for r in theirs]),
        }
        figures[name] = entry
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    print(markdown(figures))
    return figures


def markdown(figures: dict[str, Any]) -> str:
    skip = ("n_texts", "n_groups", "speed", "verdicts", "delong")
    columns = [k for k in next(iter(figures.values())) if k not in skip]
    lines = [
        "| set (report half) | texts (groups) | "
        + " | ".join(columns)
        + " | capable reader minus (DeLong) |",
        "|---|---|" + "---|" * (len(columns) + 1),
    ]
    for name, entry in figures.items():
        cells = [
            f"{entry[c]['auroc']:.3f} [{entry[c]['ci95'][0]:.2f}, {entry[c]['ci95'][1]:.2f}]" for c in columns
        ]
        tests = "; ".join(
            f"{d['difference']:+.3f} vs {k} (p {d['p_value']:.2g})" for k, d in entry["delong"].items()
        )
        head = f"| {NAMES[name]} | {entry['n_texts']} ({entry['n_groups']}) | "
        lines.append(head + " | ".join(cells) + f" | {tests} |")
    lines += [
        "",
        "| set (report half) | reader | `grounded` precision [95% CI] (coverage) | "
        "`ungrounded` precision [95% CI] (coverage) |",
        "|---|---|---|---|",
    ]
    for name, entry in figures.items():
        for reader, v in entry["verdicts"].items():
            cells = []
            for verdict in ("grounded", "ungrounded"):
                d = v[verdict]
                if not d["calls"]:
                    cells.append(f"- (0 calls, coverage {d['coverage']:.2f})")
                    continue
                lo, hi = d["precision_ci95"]
                cells.append(f"{d['precision']:.2f} [{lo:.2f}, {hi:.2f}] ({d['coverage']:.2f})")
            lines.append(f"| {NAMES[name]} | {reader} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| set | reader | texts per CPU-second (1 thread) | texts/s (wall, shared CPU) | peak memory (MiB) |",
        "|---|---|---|---|---|",
    ]
    for name, entry in figures.items():
        sp = entry["speed"]
        lines.append(
            f"| {NAMES[name]} | {sp['model']} | {sp['rows_per_cpu_s'] or '-'} | {sp['rows_per_s']:.3f} "
            f"| {sp['peak_rss_mib']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("score", help="score a report half with one reader")
    s.add_argument("--model", required=True)
    s.add_argument("--set", required=True, choices=SETS)
    s.add_argument("--limit", type=int, default=None, help="the first N items of the report half")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--every", type=int, default=4, help="items per chunk between writes (default 4)")
    s.add_argument("--out", required=True)
    t = sub.add_parser("table", help="the AUROC table from score's files (no model runs)")
    t.add_argument("results")
    t.add_argument("--reference", default="docs/results/consens/smollm2-135m")
    t.add_argument("--out")
    t.add_argument("--also", action="append", help="another reader's folder: its columns, same texts")
    args = parser.parse_args(argv)
    if args.command == "score":
        print(json.dumps(score(args)))
    else:
        table(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
