"""Choose the default word aggregate of the grounding score on development halves, report on the rest.

Reads the per-item outputs of the ConSens experiments (each row keeps every scored word's NLL with
and without the context), recomputes every aggregate of :class:`ragsense.consens.Aggregation` from
them, and applies the rule below. No model runs here, so the choice can be re-checked in seconds.

The rule, fixed before any score was looked at (issue 13):

1. Each data set is split in two by position: the first half of its pairs is the development half,
   the second half the report half (WikiEval questions 0-24 / 25-49, HaluEval rows 0-99 / 100-199,
   PubMedQA usable items in file order, first half / second half).
2. On the development halves only, each aggregate gets its AUROC per data set. The default is the
   aggregate with the highest mean AUROC over the data sets; aggregates within 0.005 of the best
   count as tied, and a tie goes to the incumbent ``geometric``, else to the earlier aggregate in
   the enum (the simpler one).
3. Verdict bands, on the development halves of the answer-level sets (WikiEval, HaluEval), one
   pair of bands for all of them (users check short answers, long answers and summaries with
   one threshold): ``grounded`` from the threshold that maximises the mean over the sets of the
   balanced accuracy of grounded vs not (each set weighs the same, whatever its size and answer
   length); ``ungrounded`` below the score that at least 90% of the grounded texts of every set
   reach (so the flag hits at most 10% of grounded texts in any set), capped at the grounded
   threshold. Both rounded down to two decimals; ``weak`` lies between. (A first version of this
   rule, "grounded where 90% of the texts above are grounded", gave 0.99 for every aggregate,
   which calls almost no grounded answer grounded; it was replaced before the bands were used.)
4. Everything is then reported on the report halves (and on all pairs), with paired bootstrap
   intervals and DeLong's test against ``geometric`` and the paper's ``arithmetic``.

Usage (after the experiments wrote their per-item files with ``--out``):

    python -m papers.consens.consens_aggregates \\
        --wikieval docs/results/consens/smollm2-135m/consens-wikieval.jsonl.gz \\
        --halueval docs/results/consens/smollm2-135m/consens-halueval.jsonl.gz \\
        --pubmedqa docs/results/consens/smollm2-135m/consens-pubmedqa-partial.jsonl.gz

The last output line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragsense.consens import STATED_AGGREGATIONS, WORD_AGGREGATIONS, Aggregation, consens_from_word_nll
from ragsense.experiments import PAIR_LABELS
from ragsense.stats import bootstrap_ci, delong_paired, roc_auc

# The two results of each experiment's per-item record: (should score higher, lower).
KEYS = {
    kind: PAIR_LABELS[name]
    for kind, name in (
        ("wikieval", "consens-wikieval"),
        ("halueval", "consens-halueval"),
        ("pubmedqa", "consens-pubmedqa-partial"),
    )
}
ANSWER_LEVEL = ("wikieval", "halueval")
TIE = 0.005
INCUMBENT = Aggregation.GEOMETRIC.value
# The aggregates this rule (issue 13) chose among: the word-contrast ones. ``support`` and
# ``support_count`` came later (issue 24, papers/consens/grounding_default.py) and need each word's
# stated flag, which these files lack.
# `learned` reads the texts as well as the word scores, and was chosen apart (docs/results.md).
CANDIDATES = tuple(a for a in WORD_AGGREGATIONS if a not in STATED_AGGREGATIONS)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _score(result: dict[str, Any], agg: Aggregation) -> float:
    words = result["words"]
    empty = [w["nll_empty"] for w in words]
    context = [w["nll_context"] for w in words]
    return consens_from_word_nll(empty, context, agg)[0]


def load_pairs(path: Path, kind: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    hi, lo = KEYS[kind]
    return [(rec[hi], rec[lo]) for rec in _lines(path)]


def scores(
    pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]], agg: Aggregation
) -> tuple[list[float], list[float]]:
    return [_score(p, agg) for p, _ in pairs], [_score(n, agg) for _, n in pairs]


def _auroc_ci(pos: Sequence[float], neg: Sequence[float]) -> dict[str, Any]:
    lo, hi = bootstrap_ci(roc_auc, pos, neg, n=1000, seed=0, paired=True)
    return {"auroc": round(roc_auc(pos, neg), 4), "ci95": [round(lo, 4), round(hi, 4)]}


def _delong(a: tuple[list[float], list[float]], b: tuple[list[float], list[float]]) -> dict[str, float]:
    labels = [True] * len(a[0]) + [False] * len(a[1])
    t = delong_paired([*a[0], *a[1]], [*b[0], *b[1]], labels)
    return {"difference": round(t.difference, 4), "p_value": float(f"{t.p_value:.3g}")}


def choose(dev_auroc: dict[str, dict[str, float]]) -> tuple[str, dict[str, float]]:
    """Rule 2: the highest mean development AUROC; ties (within TIE) to the incumbent, else the
    earlier aggregate."""
    means = {agg: sum(v.values()) / len(v) for agg, v in dev_auroc.items()}
    best = max(means.values())
    tied = [a.value for a in CANDIDATES if means[a.value] >= best - TIE]
    return (INCUMBENT if INCUMBENT in tied else tied[0]), means


def _floor2(x: float) -> float:
    return math.floor(x * 100.0) / 100.0


def _balanced_accuracy(pos: Sequence[float], neg: Sequence[float], t: float) -> float:
    return (sum(x >= t for x in pos) / len(pos) + sum(x < t for x in neg) / len(neg)) / 2.0


def bands(sets: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[float, float]:
    """Rule 3: ``(grounded_at, ungrounded_below)`` from development scores, one ``(grounded, not
    grounded)`` pair of lists per data set."""
    candidates = sorted({x for pos, neg in sets for x in (*pos, *neg)})
    best, grounded_at = -1.0, candidates[0]
    for t in candidates:  # the lowest threshold of the best mean balanced accuracy
        mean_ba = sum(_balanced_accuracy(pos, neg, t) for pos, neg in sets) / len(sets)
        if mean_ba > best:
            best, grounded_at = mean_ba, t
    # The score that 90% of the grounded texts of every set reach: the lowest per-set 10th percentile.
    reach = min(sorted(pos)[int(0.1 * len(pos))] for pos, _ in sets)
    grounded_at = _floor2(grounded_at)
    return grounded_at, min(_floor2(reach), grounded_at)


def verdict_table(
    pos: Sequence[float], neg: Sequence[float], grounded_at: float, ungrounded_below: float
) -> dict[str, Any]:
    def label(x: float) -> str:
        return "grounded" if x >= grounded_at else ("weak" if x >= ungrounded_below else "ungrounded")

    lp, ln = [label(x) for x in pos], [label(x) for x in neg]
    tp, fp = ln.count("ungrounded"), lp.count("ungrounded")
    ng_tp = tp + ln.count("weak")
    ng_fp = fp + lp.count("weak")
    return {
        "n_positive": len(pos),
        "n_negative": len(neg),
        "ungrounded_precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "ungrounded_recall": round(tp / len(neg), 4),
        "not_grounded_precision": round(ng_tp / (ng_tp + ng_fp), 4) if ng_tp + ng_fp else None,
        "not_grounded_recall": round(ng_tp / len(neg), 4),
        "grounded_share_of_positives": round(lp.count("grounded") / len(pos), 4),
    }


def _labels(values: Sequence[float], grounded_at: float, ungrounded_below: float) -> dict[str, float]:
    n = len(values)
    return {
        "grounded": round(sum(x >= grounded_at for x in values) / n, 4),
        "weak": round(sum(ungrounded_below <= x < grounded_at for x in values) / n, 4),
        "ungrounded": round(sum(x < ungrounded_below for x in values) / n, 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for kind in KEYS:
        parser.add_argument(f"--{kind}", type=Path, required=True, help=f"per-item file of consens-{kind}")
    parser.add_argument(
        "--check",
        nargs="*",
        default=[],
        help="kind=path of other runs to report on (e.g. another model), same split",
    )
    args = parser.parse_args(argv)

    data = {kind: load_pairs(getattr(args, kind), kind) for kind in KEYS}
    halves = {kind: (p[: len(p) // 2], p[len(p) // 2 :]) for kind, p in data.items()}
    dev_auroc = {a.value: {kind: roc_auc(*scores(h[0], a)) for kind, h in halves.items()} for a in CANDIDATES}
    chosen, means = choose(dev_auroc)
    bands_by_aggregation = {}
    for agg in CANDIDATES:  # rule 3 for every aggregate, so each has bands of its own
        bands_by_aggregation[agg.value] = bands([scores(halves[kind][0], agg) for kind in ANSWER_LEVEL])
    grounded_at, ungrounded_below = bands_by_aggregation[chosen]

    report: dict[str, Any] = {}
    for kind, (_, rep) in halves.items():
        per_agg = {a.value: scores(rep, a) for a in CANDIDATES}
        everything = {a.value: scores(data[kind], a) for a in CANDIDATES}
        report[kind] = {
            "n_report": len(rep),
            "n_all": len(data[kind]),
            "report_half": {a: _auroc_ci(*v) for a, v in per_agg.items()},
            "all": {a: round(roc_auc(*v), 4) for a, v in everything.items()},
            "delong_report_half": {
                f"{chosen}_vs_{other}": _delong(per_agg[chosen], per_agg[other])
                for other in (INCUMBENT, Aggregation.ARITHMETIC.value)
                if other != chosen
            },
        }
        if kind in ANSWER_LEVEL:
            report[kind]["verdicts_report_half"] = verdict_table(
                *per_agg[chosen], grounded_at, ungrounded_below
            )
            report[kind]["verdicts_report_half_geometric"] = verdict_table(
                *per_agg[INCUMBENT], *bands_by_aggregation[INCUMBENT]
            )
        else:  # an abstract's own conclusion against the full abstract: a grounded summary
            report[kind]["full_context_verdicts_report_half"] = _labels(
                per_agg[chosen][0], grounded_at, ungrounded_below
            )
            report[kind]["full_context_verdicts_report_half_geometric"] = _labels(
                per_agg[INCUMBENT][0], *bands_by_aggregation[INCUMBENT]
            )
    figures: dict[str, Any] = {
        "rule": "highest mean development AUROC over the three sets; ties within 0.005 go to geometric",
        "development_auroc": {a: {k: round(v, 4) for k, v in d.items()} for a, d in dev_auroc.items()},
        "development_mean_auroc": {a: round(v, 4) for a, v in means.items()},
        "chosen": chosen,
        "bands": {"grounded_at": grounded_at, "ungrounded_below": ungrounded_below},
        "bands_by_aggregation": {
            a: {"grounded_at": g, "ungrounded_below": u} for a, (g, u) in bands_by_aggregation.items()
        },
        "report": report,
    }
    for spec in args.check:
        kind, _, path = spec.partition("=")
        pairs = load_pairs(Path(path), kind)
        rep = pairs[len(pairs) // 2 :]
        per_agg = {a.value: scores(rep, a) for a in CANDIDATES}
        check: dict[str, Any] = {
            "path": path,
            "report_half": {a: _auroc_ci(*v) for a, v in per_agg.items()},
            "all": {a.value: round(roc_auc(*scores(pairs, a)), 4) for a in CANDIDATES},
        }
        if kind in ANSWER_LEVEL:
            check["verdicts_report_half"] = verdict_table(*per_agg[chosen], grounded_at, ungrounded_below)
        else:
            check["full_context_verdicts_report_half"] = _labels(
                per_agg[chosen][0], grounded_at, ungrounded_below
            )
        figures.setdefault("checks", {})[spec] = check
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
