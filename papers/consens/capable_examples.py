"""Issue 36: pairs where the capable reader's per-word evidence catches what lexical support misses,
and pairs where it does not, from capable_readers.py's per-item files (no model runs).

    python -m papers.consens.capable_examples docs/results/consens/qwen2.5-coder-0.5b [--n 10]

A pair is a grounded and an ungrounded text of one item (WikiEval, HaluEval, PubMedQA full vs partial).
Lexical support *misses* a pair when it does not rank the grounded text above the other (a tie
included). Among those, the reader *catches* the pair when its score ranks it right; the rest it
misses too. ``--score geometric`` (default) reads the reader's per-word evidence alone (the geometric
mean of every word's contrast); ``--score support`` reads the shipped default, where a stated word
counts as supported whatever the reader says, so it cannot overturn a pair whose words the context
all states. Each pair prints both texts' scores and every scored word with the reader's likelihood
contrast ``d`` (nats; > 0: the context made the word likelier; ``*``: the context states the word).
The largest margins are shown first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from papers.consens.capable_readers import SETS, _records, report_half
from papers.consens.grounding_default import BASELINES, RULE_SCORES, Row, _row, _support_geomean


def _evidence(row: Row, words: list[str]) -> str:
    return ", ".join(
        f"{w}{'*' if s else ''} ({d:+.1f})" for w, d, s in zip(words, row.contrasts, row.stated, strict=True)
    )


def pairs(results: Path) -> list[tuple[str, str, Row, Row, list[str], list[str], dict[str, str]]]:
    out = []
    for name in SETS:
        path = results / f"{name}.jsonl.gz"
        if name == "faithbench" or not path.exists():
            continue  # FaithBench's summaries are not paired
        texts = {(t.item, t.key): t for item in report_half(name) for t in item}
        by_item: dict[str, dict[int, tuple[Row, list[str]]]] = {}
        info: dict[str, dict[str, str]] = {}
        for rec in _records(path):
            t = texts[(rec["item"], rec["key"])]
            row = _row(
                rec["result"], t.contexts, t.answer, label=t.label, group=t.group, dev=False, similarity={}
            )
            by_item.setdefault(t.item, {})[t.label] = (row, [w["word"] for w in rec["result"]["words"]])
            info.setdefault(t.item, {"question": t.question})[f"answer{t.label}"] = t.answer
        for item, both in by_item.items():
            (g, gw), (u, uw) = both[1], both[0]
            out.append((name, item, g, u, gw, uw, info[item]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--score", choices=("geometric", "support"), default="geometric")
    args = parser.parse_args(argv)
    lexical = BASELINES["lexical_support"]
    reader = _support_geomean if args.score == "support" else RULE_SCORES["geometric"]
    catches, misses, lost = [], [], 0
    for name, item, g, u, gw, uw, info in pairs(Path(args.results)):
        lex_margin = lexical(g) - lexical(u)
        margin = reader(g) - reader(u)
        if lex_margin > 0:
            lost += margin <= 0
            continue
        (catches if margin > 0 else misses).append((abs(margin), name, item, g, u, gw, uw, info))
    total = len(catches) + len(misses)
    print(
        f"lexical support misses {total} pairs; the reader catches {len(catches)} of them and misses "
        f"{len(misses)}; it loses {lost} pairs that lexical support ranks right\n"
    )
    for title, chosen in (("CATCHES", catches), ("MISSES TOO", misses)):
        print(f"## {title} (the {min(args.n, len(chosen))} largest margins)\n")
        for _, name, item, g, u, gw, uw, info in sorted(chosen, key=lambda c: -c[0])[: args.n]:
            print(f"[{name} {item}] Q: {info['question']}")
            for label, row, words in (("grounded", g, gw), ("other", u, uw)):
                text = info[f"answer{1 if label == 'grounded' else 0}"].replace("\n", " ")
                print(
                    f"  {label:8s} {args.score} {reader(row):+.2f}, support {_support_geomean(row):+.2f}, "
                    f"lexical {lexical(row):+.2f}: {text[:160]}"
                )
                print(f"           words: {_evidence(row, words)}")
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
