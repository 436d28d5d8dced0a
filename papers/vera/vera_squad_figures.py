"""Every hand-derived figure of the vera-squad results, printed from the per-item records.

    .venv/bin/python -m papers.vera.vera_squad_figures docs/results/vera/vera_squad_smollm2.jsonl
    .venv/bin/python -m papers.vera.vera_squad_figures AFTER.jsonl --before BEFORE.jsonl

For one run (``ragsense experiment vera-squad --out DIR`` writes ``DIR/vera_squad.jsonl``): accuracy
with and without VERA, refusals of answerable and unanswerable questions, each with a 95% Wilson
interval, where the refusals come from (C' empty, or steps 3-4: no relevant statement, or none of the
relevant statements kept as grounded, when the records say), and how many of the questions answered
correctly without VERA it refused. With ``--before``: the same for the earlier run, and per question
how the refusals of answerable questions changed (same questions, same seed).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.stats import bootstrap_ci, share_ci, sign_test


def _read(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def share(rows: Sequence[dict[str, Any]], key: str) -> str:
    """How many rows have ``key`` set, as ragsense.stats computes every share (Wilson interval)."""
    if not rows:
        return "-"
    s = share_ci(sum(bool(r.get(key)) for r in rows), len(rows))
    return f"{s['count']} of {s['n']} = {s['share']:.2f} [{s['low']:.2f}, {s['high']:.2f}]"


def source(r: dict[str, Any]) -> str:
    """Why VERA refused this question."""
    if r.get("stopped_at_context"):
        return "C' empty (step 2)"
    if "statements_relevant_with" not in r:
        return "steps 3-4"
    if not r["statements_with"]:
        return "empty regenerated answer"
    if not r["statements_relevant_with"]:
        return "no statement relevant (step 3)"
    return "no relevant statement grounded (step 4)"


def report(records: Sequence[dict[str, Any]], title: str) -> None:
    ok = [r for r in records if "correct_with" in r]
    answerable = [r for r in ok if not r["is_impossible"]]
    impossible = [r for r in ok if r["is_impossible"]]
    print(f"## {title}: {len(ok)} items scored, {len(records) - len(ok)} with errors\n")
    print(f"- accuracy without VERA: {share(ok, 'correct_without')}")
    print(f"- accuracy with VERA: {share(ok, 'correct_with')}")
    without = [float(r["correct_without"]) for r in ok]
    with_vera = [float(r["correct_with"]) for r in ok]
    if ok:
        low, high = bootstrap_ci(
            lambda a, b: float(b.mean() - a.mean()), without, with_vera, seed=0, paired=True
        )
        print(
            f"- accuracy gain: {sum(with_vera) / len(ok) - sum(without) / len(ok):+.2f} "
            f"[{low:+.2f}, {high:+.2f}] (paired bootstrap)"
        )
    print(
        "- answerable answered correctly without / with VERA: "
        f"{share(answerable, 'correct_without')} / {share(answerable, 'correct_with')}"
    )
    print(
        "- answerable refused without / with VERA: "
        f"{share(answerable, 'refused_without')} / {share(answerable, 'refused_with')}"
    )
    print(
        "- unanswerable refused without / with VERA: "
        f"{share(impossible, 'refused_without')} / {share(impossible, 'refused_with')}"
    )
    print(f"- stopped at the context step (C' empty), all items: {share(ok, 'stopped_at_context')}")
    for name, rows in (("answerable", answerable), ("unanswerable", impossible)):
        refused = [r for r in rows if r["refused_with"]]
        counts: dict[str, int] = {}
        for r in refused:
            counts[source(r)] = counts.get(source(r), 0) + 1
        parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"- where the {len(refused)} refusals of {name} questions come from: {parts or '-'}")
    lost = [r for r in answerable if r["correct_without"] and r["refused_with"]]
    right = [r for r in answerable if r["correct_without"]]
    print(
        "- answerable questions answered correctly without VERA that VERA refused: "
        f"{len(lost)} of {len(right)}"
    )
    print()


def compare(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> None:
    old = {r["id"]: r for r in before if "correct_with" in r}
    new = {r["id"]: r for r in after if "correct_with" in r}
    common = [i for i in new if i in old and not new[i]["is_impossible"]]
    print(f"## Answerable questions in both runs: {len(common)}\n")
    moves: dict[tuple[bool, bool], int] = {}
    for i in common:
        key = (bool(old[i]["refused_with"]), bool(new[i]["refused_with"]))
        moves[key] = moves.get(key, 0) + 1
    for (was, now), n in sorted(moves.items()):
        print(f"- refused before {was}, refused now {now}: {n}")
    diffs = [float(old[i]["refused_with"]) - float(new[i]["refused_with"]) for i in common]
    test = sign_test(diffs)
    print(
        f"- fewer refusals now on {test.n_positive}, more on {test.n_negative}, same on {test.n_ties}; "
        f"sign test p = {test.p_value:.4f}"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="vera_squad.jsonl of the run to report")
    parser.add_argument("--before", help="vera_squad.jsonl of an earlier run on the same questions")
    args = parser.parse_args()
    after = _read(args.records)
    if args.before:
        before = _read(args.before)
        report(before, f"before ({args.before})")
        report(after, f"now ({args.records})")
        compare(before, after)
    else:
        report(after, args.records)


if __name__ == "__main__":
    main()
