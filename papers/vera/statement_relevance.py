"""VERA step 3 without a judge: response relevance from each statement's likelihood lift of the
question (or its MiniLM cosine with the question), on WikiEval (issue 28).

    python -m papers.vera.statement_relevance --out docs/results/vera/statement_relevance.jsonl.gz

Each WikiEval question's answer and poor answer are split by the rule-based splitter (VERA's
``rules``); every statement gets the question's likelihood lift after it (bundled SmolLM2-135M, the
same requests as the offline step, ``OfflineSignals.lifts``) and its MiniLM cosine with the question.
R_response is the share of statements above a threshold. A pair is ranked correctly when the answer
scores above the poor answer (a tie counts one half). Chosen on questions 0-23 (the development
questions of the adherence study): the signal and threshold with the highest pairwise accuracy, ties
to the simplest (lift, threshold 0); reported on 24-49 with a 95% bootstrap interval over questions.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.data import load_wikieval
from ragsense.embeddings import load_embedder
from ragsense.models import ModelPool
from ragsense.stats import bootstrap_ci
from ragsense.text import split_statements
from ragsense.vera import OfflineSignals

GRID = {"lift": [0.0, -0.5, -0.25, 0.1, 0.25, 0.5], "minilm": [0.1, 0.2, 0.3, 0.4, 0.5]}


def _features(out: Path) -> list[dict[str, Any]]:
    signals = OfflineSignals(ModelPool(), "smollm2-135m")
    embedder = load_embedder("minilm")
    records: list[dict[str, Any]] = []
    for it in load_wikieval():
        rec: dict[str, Any] = {"id": int(it.id)}
        for kind, answer in (("answer", it.grounded_answer), ("poor", it.poor_answer)):
            statements = [s.text for s in split_statements(answer, max_chars=400)]
            [lifts] = asyncio.run(signals.lifts([(it.question, statements)]))
            vecs = embedder.embed([it.question, *statements])
            rec[kind] = {"lift": lifts, "minilm": [float(vecs[0] @ v) for v in vecs[1:]]}
        records.append(rec)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, sort_keys=True) + "\n" for r in records)
    return records


def _pairwise(records: list[dict[str, Any]], signal: str, t: float) -> tuple[float, tuple[float, float]]:
    def r(values: list[float]) -> float:
        return sum(v > t for v in values) / len(values) if values else 0.0

    wins = np.array(
        [
            1.0 if a > b else 0.5 if a == b else 0.0
            for a, b in ((r(x["answer"][signal]), r(x["poor"][signal])) for x in records)
        ]
    )
    return float(wins.mean()), bootstrap_ci(lambda w: float(w.mean()), wins)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m papers.vera.statement_relevance")
    parser.add_argument(
        "--out", type=Path, required=True, help="per-item output (.jsonl.gz); read if it exists"
    )
    args = parser.parse_args()
    if args.out.exists():
        with gzip.open(args.out, "rt", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh]
    else:
        records = _features(args.out)
    dev = [r for r in records if r["id"] < 24]
    rep = [r for r in records if r["id"] >= 24]
    print("| signal | threshold | dev 0-23 pairwise | held-out 24-49 pairwise |")
    print("|---|---|---|---|")
    best: tuple[float, str, float] | None = None
    for signal, grid in GRID.items():
        for t in grid:
            d, (dl, dh) = _pairwise(dev, signal, t)
            h, (hl, hh) = _pairwise(rep, signal, t)
            print(f"| {signal} | {t:g} | {d:.2f} [{dl:.2f}, {dh:.2f}] | {h:.2f} [{hl:.2f}, {hh:.2f}] |")
            if best is None or d > best[0]:
                best = (d, signal, t)
    assert best is not None
    for kind in ("answer", "poor"):
        kept = sum(v > 0 for r in rep for v in r[kind]["lift"])
        total = sum(len(r[kind]["lift"]) for r in rep)
        print(f"held-out {kind}s: {kept} of {total} statements with lift > 0")
    print(f"\nchosen on development: {best[1]}, threshold {best[2]:g}")


if __name__ == "__main__":
    main()
