"""The figures of a full (four-row) vera-wikieval run, with 95% intervals, from its per-item records.

    .venv/bin/python -m papers.vera.vera_wikieval_figures docs/results/vera/vera_wikieval_smollm2.jsonl

``ragsense experiment vera-wikieval --limit N --out DIR`` writes ``DIR/vera_wikieval.jsonl``: per
question, the scores of (context_v1, grounded answer) "v1", (context_v2, grounded answer) "v2",
(context_v1, ungrounded answer) and (context_v1, poor answer). Each figure is the share of questions
whose better row scores above the worse one (a tie counts one half) with a 95% bootstrap interval over
questions, and the mean score of each row kind.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ragsense.stats import bootstrap_ci

FIGURES = (
    ("context relevance, context_v1 over context_v2", "v1", "v2", "context_relevance"),
    ("response relevance, grounded over poor answer", "v1", "poor", "response_relevance"),
    ("adherence, judge labels, grounded over ungrounded", "v1", "ungrounded", "adherence_judge"),
    ("adherence, ConSens > 0, grounded over ungrounded", "v1", "ungrounded", "adherence_consens"),
    ("adherence, combined, grounded over ungrounded", "v1", "ungrounded", "adherence_combined"),
    ("mean statement ConSens, grounded over ungrounded", "v1", "ungrounded", "mean_statement_consens"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="vera_wikieval.jsonl")
    args = parser.parse_args()
    records = [json.loads(line) for line in Path(args.records).read_text().splitlines() if line.strip()]
    print(f"{len(records)} questions\n")
    for title, better, worse, key in FIGURES:
        pairs = [(r[better].get(key), r[worse].get(key)) for r in records if better in r and worse in r]
        wins = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs if a is not None and b is not None]
        if not wins:
            continue
        low, high = bootstrap_ci(lambda w: float(w.mean()), wins, seed=0)
        print(f"- {title}: {math.fsum(wins) / len(wins):.3f} [{low:.2f}, {high:.2f}] (n = {len(wins)})")
    print()
    for key in ("adherence_judge", "adherence_consens"):
        means = []
        for kind in ("v1", "ungrounded"):
            values = [r[kind][key] for r in records if kind in r and r[kind].get(key) is not None]
            means.append(f"{kind} {math.fsum(values) / len(values):.2f}" if values else f"{kind} -")
        print(f"- mean {key}: " + ", ".join(means))


if __name__ == "__main__":
    main()
