"""Issue 46, amendment 3: may the binding check be on by default for a capable reader?

AMENDMENT 3 (committed 2026-11-29, before the 1.5B reader's development halves were scored; what had
been seen of the 1.5B reader by then is stated below. Every row of the 0.5B reader had been scored and
its figures read (binding_readers.json) before this was written: for that reader the amendment is a
re-reading of known figures, not a test)

The check is off by default because rules 4 and 5 (papers/consens/binding_check.py) found no eligible
setting with the bundled SmolLM2-135M, and the 0.5B reader fails them too (binding_readers.json:
HaluEval-dev loses 0.04). The issue asks to measure the larger readers; when a user scores with one of
them (``ConSens(model="qwen2.5-coder-1.5b")``) the check could be on by default for that reader alone.
So, for a reader R whose rows ``binding_check score --model R`` wrote to a folder:

1. **The same rules on R's rows.** Rule 4 (the grid of ``min_margin`` x ``min_lift``; a setting is
   eligible when no development set's AUROC falls by more than 0.01 on its development half; among the
   eligible, the best mean recombination AUROC, ties to the more cautious) and rule 5 (on by default
   when, at the chosen setting, the pooled recombination AUROC of the report halves is at least 0.85
   and no development set's report half falls by more than 0.01) are applied unchanged by
   ``binding_check.table`` to R's rows, with the shipped bands (fitted on SmolLM2).
2. **Completeness.** A set counts only when R has scored its half completely: as many rows as
   SmolLM2's committed rows of that half (SmolLM2 scored every set to its pre-registered size). R is
   "on" only when rule 5 says so with every set's two halves complete (dialogue, PubMedQA and
   FaithBench-dev included). R is "off" as soon as rule 4 has no eligible setting on the complete
   development halves alone: more rows of other sets can only add drops. Anything else is "not
   decidable yet", and the check stays off for R.
3. **What "on" would change** (nothing is changed by this script): ``ConSens`` would run the check
   by default when its model is R, at rule 5's setting, documented beside R's figures.

Seen before this amendment was written: the 1.5B reader's hand-written rows (binding_readers_hand.json),
and, while its first rows were being scored, 64 HaluEval-dev pairs and 52 recombined-SQuAD pairs (both
halves pooled, amendment 1's opt-in settings: HaluEval 0.839 without the check and 0.858 with it,
recombined SQuAD 0.854 with it). Nothing of the 1.5B reader on any other set.

Command (no model is loaded)::

    python -m papers.consens.binding_reader_default docs/results/consens/binding-qwen2.5-coder-1.5b

writes ``reader-default.json`` in that folder and prints the decision and the complete halves.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import DEV_SETS, RECOMBINATION_SETS, stored_rows, table

BUNDLED = Path(__file__).parents[2] / "docs" / "results" / "consens" / "binding"
"""SmolLM2's rows: every set at its pre-registered size, so they say how many rows a half has."""


def complete_halves(folder: Path, bundled: Path = BUNDLED) -> dict[str, dict[str, bool]]:
    """Per set and half (``dev``, ``report``): whether the reader in ``folder`` scored it completely."""
    out: dict[str, dict[str, bool]] = {}
    for name in (*RECOMBINATION_SETS, *DEV_SETS):
        mine = {(r["id"], r["dev"]) for r in stored_rows(folder, name)}
        full = {(r["id"], r["dev"]) for r in stored_rows(bundled, name)}
        out[name] = {
            half: bool(part) and part <= mine
            for half, part in (
                ("dev", {k for k in full if k[1]}),
                ("report", {k for k in full if not k[1]}),
            )
        }
    return out


def decide(folder: Path, bundled: Path = BUNDLED) -> dict[str, Any]:
    """Amendment 3's decision for the reader whose rows are in ``folder``."""
    halves = complete_halves(folder, bundled)
    dev_complete = [k for k in DEV_SETS if halves[k]["dev"]]
    # Rule 4 on the complete development halves of the development sets only (rule 1 of this amendment):
    # a set half-scored is left out of the drops, so it cannot make a setting ineligible early.
    dev_only = table(folder, names=dev_complete) if dev_complete else None
    full = table(folder)
    all_complete = all(h["dev"] and h["report"] for h in halves.values())
    rule5 = full["report"].get("_rule5", {})
    if all_complete and rule5.get("on_by_default"):
        decision = "on"
    elif dev_only is not None and not any(g["eligible"] for g in dev_only["grid"]):
        decision = "off"
    else:
        decision = "not decidable yet"
    return {
        "amendment": 3,
        "reader": folder.name,
        "decision": decision,
        "complete_halves": halves,
        "rule4_on_complete_dev_halves": None
        if dev_only is None
        else [
            {k: g[k] for k in ("min_margin", "min_lift", "eligible", "dev_drop")} for g in dev_only["grid"]
        ],
        "chosen_on_all_rows": full["chosen"],
        "rule5_on_all_rows": rule5 or None,
        "rows": full["rows"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    result = decide(args.folder)
    (args.folder / "reader-default.json").write_text(
        json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8"
    )
    print(json.dumps({k: result[k] for k in ("reader", "decision", "complete_halves")}, indent=1))


if __name__ == "__main__":
    main()
