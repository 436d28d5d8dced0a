"""Issue 46: the binding check read by the bundled SmolLM2-135M and by a capable reader, on the same rows.

Information only (nothing is chosen here). Each reader scores rows of papers/consens/binding_check.py's
sets with the check at its loosest (``python -m papers.consens.binding_check score --sets SETS --model
MODEL --out FOLDER``; the 0.5B reader's runs were stopped at a deadline, so it has fewer rows). On the
pairs (groups) every reader scored, with the opt-in settings (``min_margin`` 0, ``min_lift`` 1 nat; 8
variants, 16 on the recombination sets as scored) and the shipped bands (fitted on SmolLM2's
development halves): AUROC of label 1 over 0 without and with the check, 95% bootstrap intervals (groups
resampled whole), seconds and variants per row; on the hand-written rows also the verdict counts and
the recombined rows still called ``grounded``. Both halves are pooled (nothing is chosen).

    python -m papers.consens.binding_readers --sets hand,halueval,recombined-squad \\
        docs/results/consens/binding docs/results/consens/binding-qwen2.5-coder-0.5b

``--amendment-2`` gives the figures under amendment 2's filters too (papers/consens/binding_narrow.py:
its variants dropped from each reader's rows, as its committed ``kept-ranks.json.gz`` lists them), on the sets
it can be recomputed on (not ``LATER_SETS``, whose variants came from a cut of a long context).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import (
    DEFAULT_CHECK,
    HAND_SET,
    RECOMBINATION_SETS,
    Narrowing,
    auroc,
    auroc_ci,
    baseline_figures,
    hand_verdicts,
    stored_rows,
    support_with,
)
from papers.consens.binding_narrow import LATER_SETS, committed_narrowing

BINDING_FOLDER = Path(__file__).parents[2] / "docs" / "results" / "consens" / "binding"
"""SmolLM2's per-row files, beside which amendment 2's kept ranks are committed."""


def scored_pairs(folder: Path, name: str) -> set[str]:
    """The groups of a set a reader has scored both labels of."""
    groups: dict[str, set[int]] = {}
    for r in stored_rows(folder, name):
        groups.setdefault(r["group"], set()).add(r["label"])
    return {g for g, labels in groups.items() if labels == {0, 1}}


def reader_figures(
    folder: Path, name: str, pairs: set[str], narrow: Narrowing | None = None
) -> dict[str, Any]:
    """One reader's figures on the given groups of one set (``narrow``: amendment 2's filters)."""
    rows = [r for r in stored_rows(folder, name, narrow) if r["group"] in pairs]
    m, lift = DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift
    variants = 16 if name in RECOMBINATION_SETS else 8
    labels = [r["label"] for r in rows]
    out: dict[str, Any] = {"rows": len(rows)}
    for key, mm in (("without_check", None), ("with_check", m)):

        def score(r: dict[str, Any], mm: float | None = mm) -> float:
            return support_with(r["result"], mm, lift, variants)

        out[key] = [round(auroc(labels, [score(r) for r in rows]), 4), auroc_ci(rows, score)]
    if name == HAND_SET:
        out["verdicts"] = hand_verdicts(rows, m, lift)
    out["seconds_per_row"] = round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 2)
    out["variants_per_row"] = round(sum(r["result"]["binding_variants"] for r in rows) / max(1, len(rows)), 2)
    return out


def compare(folders: Sequence[Path], names: Sequence[str], narrow: Narrowing | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        common = set.intersection(*(scored_pairs(f, name) for f in folders))
        out[name] = {
            "groups": len(common),
            **{f.name: reader_figures(f, name, common, narrow) for f in folders},
            "baselines": baseline_figures([r for r in stored_rows(folders[0], name) if r["group"] in common]),
        }
    return out


def amendment_2(names: Sequence[str]) -> Narrowing:
    """Amendment 2's filters (papers/consens/binding_narrow.py) for the rows of the named sets, from
    the ranks it committed: the variants are the text side, the same for every reader."""
    return committed_narrowing(BINDING_FOLDER, names)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--sets", default=HAND_SET)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    parser.add_argument(
        "--amendment-2", action="store_true", help="also give the figures under amendment 2's filters"
    )
    args = parser.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    result = compare(args.folders, names)
    if args.amendment_2:
        # Amendment 2 cannot be recomputed on the long-context sets (binding_narrow.LATER_SETS).
        narrowed = [n for n in names if n not in LATER_SETS]
        result = {
            "amendment_1": result,
            "amendment_2": compare(args.folders, narrowed, amendment_2(narrowed)),
        }
    text = json.dumps(result, indent=1, allow_nan=False)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
