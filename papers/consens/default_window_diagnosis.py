"""Why the default window loses HaluEval QA pairs at 20 distractors (issue 40, amendment 2).

    python -m papers.consens.default_window_diagnosis \
        docs/results/consens/default_window/report-qa-k0.jsonl.gz \
        docs/results/consens/default_window/report-qa-k20-b128.jsonl.gz --pairs 40

For every report pair whose ConSens score moved by more than ``--moved`` between the clean and the
padded file, rebuilds the padded context (the experiment's seeded draw), ranks its documents by BM25
as the window does, and prints where the pair's own document ranked, its token count (SmolLM2-135M's
tokenizer) and what the window read. The last line is one JSON object: how often BM25 ranked the own
document first over all the padded rows, how often it was over the budget, and the moved rows.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from ragsense.experiments import load_more_pairs, split_by_document, with_distractors
from ragsense.models import load_model
from ragsense.rag import BM25


def _ranking(scores: list[float]) -> list[int]:
    """Documents best first, ties in their original order: the window's ranking."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def _by_id(path: Path) -> dict[str, dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {r["id"]: r for r in (json.loads(line) for line in fh)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clean", type=Path)
    parser.add_argument("padded", type=Path)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--moved", type=float, default=0.15)
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    clean, padded = _by_id(args.clean), _by_id(args.padded)
    count = load_model("smollm2-135m").count_tokens
    pool = split_by_document(load_more_pairs("qa", args.data), 0)["report"][:100]
    moved: list[dict[str, Any]] = []
    rows = own_first = own_over = 0
    for pair in pool[: args.pairs]:
        docs, own = with_distractors(pair, pool, args.k, 0)
        costs = [count(d) for d in docs]
        for label, answer in (("pos", pair.pos), ("neg", pair.neg)):
            ranking = _ranking(BM25(docs).scores(f"{pair.question}\n{answer}"))
            rows += 1
            own_first += ranking[0] == own[0]
            own_over += costs[own[0]] > args.budget
            row_id = f"{pair.id}:{label}"
            if (
                row_id not in padded
                or abs(padded[row_id]["consens"] - clean[row_id]["consens"]) <= args.moved
            ):
                continue
            moved.append(
                {
                    "id": row_id,
                    "clean": round(clean[row_id]["consens"], 3),
                    "padded": round(padded[row_id]["consens"], 3),
                    "own_rank": ranking.index(own[0]),
                    "own_tokens": costs[own[0]],
                    "read": padded[row_id]["context_selection"],
                    "kept_documents": padded[row_id]["kept_documents"],
                    "own_document": own[0],
                }
            )
            print(json.dumps(moved[-1]))
    summary = {"rows": rows, "own_ranked_first": own_first, "own_over_budget": own_over, "moved": len(moved)}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
