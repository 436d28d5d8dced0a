"""VERA's response adherence on WikiEval: choose on questions 0-23, report on 24-49 and on all 50.

    .venv/bin/ragsense experiment vera-wikieval --adherence-only --limit 50 --out runs/vera-adherence
    .venv/bin/python -m papers.vera.vera_adherence runs/vera-adherence/vera_wikieval_adherence.jsonl

The experiment keeps, for every statement of the grounded and the ungrounded answer (both judged
against context_v1), the judge's token log-probabilities for each label, the content-free prior, and
the statement's ConSens under every aggregation with its word NLLs. This script recomputes every
adherence signal from those records without running a model:

- the judge, for each label-scoring rule (``sum``, ``mean``, ``first_token``), with and without
  contextual calibration, deciding by the argmax over the three labels (the old rule) or by
  P(stated) + P(inferable) >= 0.5 (``grounded``); the answer's score is the share of statements kept
  (A_response), and ``p`` is the mean grounded probability (a continuous score);
- ConSens per statement under every aggregation: share of statements above 0 (A_response with
  ``--adherence-signal consens``) and the mean over statements (continuous);
- combined: the mean of the judge's grounded probability and (1 + ConSens) / 2, kept at 0.5.

For each signal: pairwise accuracy (the grounded answer scores above the ungrounded one; a tie counts
one half) with a 95% bootstrap interval over questions, and AUROC (grounded answers as positives) with
a stratified bootstrap interval. Choices are made on the development questions 0-23 only (the
experiment's first three chunks of 8; highest pairwise accuracy, then AUROC, then the order of the
list); the held-out questions 24-49 and all 50 are reported for what was chosen. Figures are
printed as markdown tables; ``--json`` adds one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragsense.stats import bootstrap_ci, delong_paired, roc_auc, sign_test
from ragsense.vera import LABEL_SCORINGS, RESPONSE_ADHERENCE, decide_label, label_probabilities

DEFAULT_INPUT = (
    Path(__file__).resolve().parents[1] / "docs/results/vera/vera_wikieval_adherence_smollm2.jsonl"
)
DEV = range(0, 24)
HELD_OUT = range(24, 50)
LABELS = RESPONSE_ADHERENCE.labels
POSITIVE = RESPONSE_ADHERENCE.positive_labels

Statement = dict[str, Any]
Signal = Callable[[Sequence[Statement], Any], float | None]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _grounded_p(st: Statement, scoring: str, prior: Any) -> float:
    probs = label_probabilities(LABELS, st["token_logprobs"], scoring, prior)
    return math.fsum(probs[label] for label in POSITIVE)


def judge_signal(scoring: str, calibrated: bool, rule: str) -> Signal:
    """A_response of the judge under one label-scoring rule; rule ``argmax`` (old), ``grounded`` (new)
    or ``p`` (the mean grounded probability, continuous)."""

    def signal(statements: Sequence[Statement], prior: Any) -> float | None:
        used = prior if calibrated else None
        if not statements or any(st["token_logprobs"] is None for st in statements):
            return None
        if rule == "p":
            return _mean([_grounded_p(st, scoring, used) for st in statements])
        kept = []
        for st in statements:
            probs = label_probabilities(LABELS, st["token_logprobs"], scoring, used)
            if rule == "argmax":
                best = max(range(len(LABELS)), key=lambda k: (probs[LABELS[k]], -k))
                kept.append(LABELS[best] in POSITIVE)
            else:
                kept.append(decide_label(LABELS, POSITIVE, probs) in POSITIVE)
        return _mean([float(k) for k in kept])

    return signal


def consens_signal(aggregation: str, rule: str, threshold: float = 0.0) -> Signal:
    """A_response of the ConSens signal (``share`` above ``threshold``) or the mean statement ConSens."""

    def signal(statements: Sequence[Statement], prior: Any) -> float | None:
        found = [(st["consens_by_aggregation"] or {}).get(aggregation) for st in statements]
        values = [float(v) for v in found if v is not None]
        if not values or len(values) < len(found):
            return None
        if rule == "mean":
            return _mean(values)
        return _mean([float(v > threshold) for v in values])

    return signal


def combined_signal(scoring: str, aggregation: str) -> Signal:
    """A_response of ``--adherence-signal combined``: mean of the judge's P(grounded) and (1 + c) / 2."""

    def signal(statements: Sequence[Statement], prior: Any) -> float | None:
        if not statements or any(st["token_logprobs"] is None for st in statements):
            return None
        kept = []
        for st in statements:
            c = (st["consens_by_aggregation"] or {}).get(aggregation)
            if c is None:
                return None
            kept.append(float((_grounded_p(st, scoring, None) + (1.0 + c) / 2.0) / 2.0 >= 0.5))
        return _mean(kept)

    return signal


def candidates(aggregations: Sequence[str]) -> dict[str, dict[str, Signal]]:
    """Every signal, by family, in the order that breaks ties (simplest first)."""
    judge: dict[str, Signal] = {}
    for calibrated in (False, True):
        for scoring in LABEL_SCORINGS:
            for rule in ("grounded", "argmax", "p"):
                name = f"judge {scoring}{' calibrated' if calibrated else ''} {rule}"
                judge[name] = judge_signal(scoring, calibrated, rule)
    consens = {
        f"consens {agg} {rule}": consens_signal(agg, rule)
        for agg in aggregations
        for rule in ("share", "mean")
    }
    combined = {
        f"combined {scoring} {agg}": combined_signal(scoring, agg)
        for scoring in LABEL_SCORINGS
        for agg in aggregations
    }
    return {"judge": judge, "consens": consens, "combined": combined}


def scores(records: Sequence[dict[str, Any]], signal: Signal) -> list[tuple[int, float, float]]:
    """(question index, grounded answer's score, ungrounded answer's score) where both exist."""
    out = []
    for r in records:
        if "v1" not in r or "ungrounded" not in r:
            continue
        prior = r.get("adherence_prior")
        a = signal(r["v1"]["statements"], prior)
        b = signal(r["ungrounded"]["statements"], prior)
        if a is not None and b is not None:
            out.append((int(r["_row"]), a, b))
    return out


def measure(pairs: Sequence[tuple[int, float, float]], rows: range) -> dict[str, Any]:
    chosen = [(a, b) for i, a, b in pairs if i in rows]
    if not chosen:
        return {"n": 0}
    wins = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in chosen]
    pos, neg = [a for a, _ in chosen], [b for _, b in chosen]
    pw_ci = bootstrap_ci(lambda w: float(w.mean()), wins, seed=0)
    auc_ci = bootstrap_ci(roc_auc, pos, neg, seed=0)
    return {
        "n": len(chosen),
        "pairwise": round(math.fsum(wins) / len(wins), 4),
        "pairwise_ci95": [round(x, 4) for x in pw_ci],
        "auroc": round(roc_auc(pos, neg), 4),
        "auroc_ci95": [round(x, 4) for x in auc_ci],
        "grounded_mean": round(math.fsum(pos) / len(pos), 4),
        "ungrounded_mean": round(math.fsum(neg) / len(neg), 4),
    }


def choose(measured: dict[str, dict[str, Any]], names: Sequence[str]) -> str:
    """Highest dev pairwise accuracy, then dev AUROC, then the earliest in ``names``."""
    return max(
        names, key=lambda n: (measured[n]["dev"]["pairwise"], measured[n]["dev"]["auroc"], -names.index(n))
    )


def fmt(m: dict[str, Any], key: str) -> str:
    if not m.get("n"):
        return "-"
    low, high = m[f"{key}_ci95"]
    return f"{m[key]:.2f} [{low:.2f}, {high:.2f}]"


def row(name: str, m: dict[str, dict[str, Any]]) -> str:
    cells = [fmt(m[s], k) for s in ("dev", "held_out", "all") for k in ("pairwise", "auroc")]
    return f"| {name} | " + " | ".join(cells) + " |"


HEADER = (
    "| signal | dev 0-23 pairwise | dev AUROC | held-out 24-49 pairwise | held-out AUROC | all 50 pairwise "
    "| all AUROC |\n|---|---|---|---|---|---|---|"
)


def paired_tests(records: Sequence[dict[str, Any]], a: Signal, b: Signal, rows: range) -> dict[str, Any]:
    """Signal ``a`` against ``b`` on the same questions: DeLong on AUROC, sign test on pairwise wins."""
    sa = {i: (x, y) for i, x, y in scores(records, a) if i in rows}
    sb = {i: (x, y) for i, x, y in scores(records, b) if i in rows}
    common = sorted(set(sa) & set(sb))
    labels = [True] * len(common) + [False] * len(common)
    va = [sa[i][0] for i in common] + [sa[i][1] for i in common]
    vb = [sb[i][0] for i in common] + [sb[i][1] for i in common]

    def win(p: tuple[float, float]) -> float:
        return 1.0 if p[0] > p[1] else 0.5 if p[0] == p[1] else 0.0

    diffs = [win(sa[i]) - win(sb[i]) for i in common]
    if len(common) < 2:
        return {"n": len(common), "auc_a": math.nan, "auc_b": math.nan, "delong_p": math.nan, "sign_test": []}
    delong = delong_paired(va, vb, labels)
    sign = sign_test(diffs)
    return {
        "n": len(common),
        "auc_a": round(delong.auc_a, 4),
        "auc_b": round(delong.auc_b, 4),
        "delong_p": round(delong.p_value, 4),
        "sign_test": [sign.n_positive, sign.n_negative, sign.n_ties, round(sign.p_value, 4)],
    }


def statement_shares(
    records: Sequence[dict[str, Any]], keep: Callable[[Statement, Any], bool], rows: range
) -> str:
    """Share of statements called grounded, for the grounded and the ungrounded answers (counts)."""
    out = []
    for kind in ("v1", "ungrounded"):
        flags = [
            keep(st, r.get("adherence_prior"))
            for r in records
            if int(r["_row"]) in rows and kind in r
            for st in r[kind]["statements"]
        ]
        out.append(f"{sum(flags)} of {len(flags)} ({sum(flags) / len(flags):.0%})" if flags else "-")
    return " / ".join(out)


def _keeps(signal: Signal) -> Callable[[Statement, Any], bool]:
    """Whether ``signal`` keeps one statement."""
    return lambda st, prior: signal([st], prior) == 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", default=str(DEFAULT_INPUT), help="vera_wikieval_adherence.jsonl")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = parser.parse_args()
    records = [json.loads(line) for line in Path(args.input).read_text().splitlines() if line.strip()]
    records = [r for r in records if not r.get("errors")]
    aggregations = sorted(
        {
            a
            for r in records
            for st in r.get("v1", {}).get("statements", [])
            for a in st["consens_by_aggregation"] or {}
        }
    )
    families = candidates(aggregations)
    measured: dict[str, dict[str, Any]] = {}
    for family in families.values():
        for name, signal in family.items():
            pairs = scores(records, signal)
            measured[name] = {
                "dev": measure(pairs, DEV),
                "held_out": measure(pairs, HELD_OUT),
                "all": measure(pairs, range(10**9)),
            }
    n_questions = len(records)
    print(f"{n_questions} questions; dev = questions 0-23, held out = 24-49\n")

    # 1. The judge's label scoring and decision rule, chosen on dev among the decisions (A_response).
    judge_names = [n for n in families["judge"] if not n.endswith(" p")]
    best_judge = choose(measured, judge_names)
    uncalibrated_grounded = [n for n in judge_names if n.endswith(" grounded") and "calibrated" not in n]
    best_scoring = choose(measured, uncalibrated_grounded)
    print("## Judge (SmolLM2-135M, label scoring): A_response, grounded over ungrounded answer\n")
    print(HEADER)
    for name in families["judge"]:
        print(row(name, measured[name]))
    print(f"\nchosen on dev, any judge decision: {best_judge}")
    print(f"chosen on dev, label scoring with the grounded rule, uncalibrated: {best_scoring}\n")

    # 2. ConSens per statement, every aggregation (the default aggregation is ConSens's choice).
    print("## ConSens per statement (same model), every aggregation\n")
    print(HEADER)
    for name in families["consens"]:
        print(row(name, measured[name]))
    print("\n## Combined judge + ConSens\n")
    print(HEADER)
    for name in families["combined"]:
        print(row(name, measured[name]))

    # 3. The default adherence signal: the judge (chosen scoring), consens (share > 0) or combined.
    scoring = best_scoring.split()[1]
    print("\n## Default adherence signal, chosen on dev (A_response, the score the signal decides)\n")
    choice_by_agg: dict[str, str] = {}
    for agg in aggregations:
        options = [best_scoring, f"consens {agg} share", f"combined {scoring} {agg}"]
        choice_by_agg[agg] = choose(measured, options)
        tests = paired_tests(
            records, families["consens"][f"consens {agg} share"], families["judge"][best_scoring], HELD_OUT
        )
        print(
            f"- aggregation {agg}: chosen {choice_by_agg[agg]!r}; held out, consens share vs {best_scoring}: "
            f"AUROC {tests['auc_a']:.2f} vs {tests['auc_b']:.2f}, DeLong p = {tests['delong_p']:.4f}, "
            f"sign test (consens better, worse, ties, p) {tests['sign_test']}"
        )

    prior = next((r["adherence_prior"] for r in records if r.get("adherence_prior")), None)
    if prior is not None:
        probs = label_probabilities(LABELS, prior, scoring)
        shown = ", ".join(f"{label} {probs[label]:.3f} (token log-probs {prior[label]})" for label in LABELS)
        print(f"\ncontent-free item (every field N/A), {scoring}: {shown}")
    print("\n## Statements called grounded (grounded answers / ungrounded answers)\n")
    rules: list[tuple[str, Callable[[Statement, Any], bool]]] = [
        ("judge sum, argmax (old rule)", _keeps(judge_signal("sum", False, "argmax"))),
        (f"judge {scoring}, grounded rule", _keeps(judge_signal(scoring, False, "grounded"))),
        (f"judge {scoring} calibrated, grounded rule", _keeps(judge_signal(scoring, True, "grounded"))),
        *[(f"consens {agg} > 0", _keeps(consens_signal(agg, "share"))) for agg in aggregations],
    ]
    for split, rows in (("dev 0-23", DEV), ("held-out 24-49", HELD_OUT), ("all", range(10**9))):
        print(f"{split}:")
        for name, keep in rules:
            print(f"- {name}: {statement_shares(records, keep, rows)}")
        old, new = rules[0][1], rules[1][1]
        changed = [
            old(st, r.get("adherence_prior")) != new(st, r.get("adherence_prior"))
            for r in records
            if int(r["_row"]) in rows
            for kind in ("v1", "ungrounded")
            if kind in r
            for st in r[kind]["statements"]
        ]
        print(f"- decisions changed by the new rule ({scoring}): {sum(changed)} of {len(changed)}\n")
    if args.json:
        print(
            json.dumps(
                {
                    "measured": measured,
                    "best_judge": best_judge,
                    "best_scoring": best_scoring,
                    "default_signal_by_aggregation": choice_by_agg,
                },
                sort_keys=True,
            )
        )


if __name__ == "__main__":
    main()
