"""Issue 46, amendment 2: the binding check narrowed to variants that have something to check.

AMENDMENT 2 (committed, with ``ragsense.text.checkable_ranks``, before any table below was computed)

The tables of amendment 1 (papers/consens/binding_check.py) found no eligible setting. Reading the
per-row files of the development halves (HaluEval-dev, summarization, SummEdits; the report halves'
AUROCs had been printed in the same tables, so they are not unseen) showed three misfires: a bare short
answer rebound to the context's other names (a question-answering test of the 135M reader), names of
different types replacing each other (a nationality by a person, a club by a league), and swaps of two
mentions of one entity. So:

1. **Variants.** The check builds the same ranked list as before (8 variants shipped, 16 on the
   recombination sets) and scores only those :func:`ragsense.text.checkable_ranks` keeps: it drops a
   swap or substitution whose answer sentence has no other content word the context states, one
   between names of different types (:func:`ragsense.text.name_type`), and a swap of two mentions of
   one entity. Negations are kept. Since amendment 2 only drops variants, a row's findings under it are
   its stored findings whose variant rank is kept: the tables are recomputed from the committed per-row
   files of amendment 1, with no row scored again and no row added. Each stored finding is checked
   against the variant regenerated at its rank (kind, original, replacement); a mismatch stops the
   table.
2. **Rules 4 and 5 as before**, on the same grid, halves and sets. In addition, rule 5 cannot put the
   check on by default while a rule-2 set has no scored rows (dialogue, PubMedQA and FaithBench-dev
   have none): the answer is then "off: not decidable yet", whatever the other sets show.
3. **The opt-in check.** ``ConSens(binding=True)`` (``min_margin`` 0, ``min_lift`` 1 nat, 8 variants)
   takes amendment 2's filters if, on the development halves with those settings, its largest
   development-set drop is smaller than amendment 1's and its mean recombination AUROC is at least
   amendment 1's minus 0.05; otherwise it keeps amendment 1's variants.

Command (no model is loaded; about a minute for the datasets)::

    python -m papers.consens.binding_narrow --out docs/results/consens/binding

writes ``binding-amendment2.json`` beside ``binding.json`` and prints the tables of docs/results.md.
It also writes ``kept-ranks.json.gz``: per set and row, the variants rebuilt from the shared data and the
ranks amendment 2 keeps, so that the tables (and the tests that recompute them) can be read again on a
machine without the shared datasets (:func:`committed_narrowing`); a test with the data checks the file
against a fresh rebuild.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import (
    DEFAULT_CHECK,
    DEV_SETS,
    HAND_SET,
    RECOMBINATION_SETS,
    Item,
    Narrowing,
    dev_sets,
    halves_table,
    hand_rows,
    hand_verdicts,
    markdown,
    recombination_sets,
    stored_rows,
    support_with,
    table,
)
from ragsense.text import binding_variants, checkable_ranks

SCORED_VARIANTS = 16  # on the recombination sets (amendment 1); 8 elsewhere
LATER_SETS = ("dialogue", "pubmedqa", "faithbench")
"""Scored after amendment 2 was written. Their contexts are long, so the scorer built the variants from
the part the default context selection kept, which the variants rebuilt here from whole contexts do
not match: amendment 2 cannot be recomputed on them, and they are reported under amendment 1 only."""
NARROWED_SETS = tuple(s for s in (*RECOMBINATION_SETS, *DEV_SETS, HAND_SET) if s not in LATER_SETS)
RANKS_FILE = "kept-ranks.json.gz"
"""Beside the per-row files: :func:`rebuilt_ranks` as written by :func:`write_ranks`."""

Kept = tuple[list[int], list[tuple[str, str, str]]]
"""One row's ranks amendment 2 keeps, and each variant's (kind, original, replacement)."""
Ranks = dict[tuple[str, str], Kept]
"""Per (set, row id): its :data:`Kept`."""


def kept_ranks(items: Sequence[Item], limit: int) -> dict[str, Kept]:
    """Per row id: the ranks amendment 2 keeps, and each variant's (kind, original, replacement)."""
    out = {}
    for it in items:
        variants = binding_variants(it.answer, it.contexts, limit=limit)
        out[it.id] = (
            checkable_ranks(it.answer, it.contexts, variants),
            [(v.kind, v.original, v.replacement) for v in variants],
        )
    return out


def rebuilt_ranks(items: dict[str, list[Item]]) -> Ranks:
    """Every row's variants and kept ranks, rebuilt from its answer and contexts."""
    ranks: Ranks = {}
    for name, rows in items.items():
        limit = SCORED_VARIANTS if name in RECOMBINATION_SETS else 8
        for row_id, kept in kept_ranks(rows, limit).items():
            ranks[(name, row_id)] = kept
    return ranks


def write_ranks(folder: Path, ranks: Ranks) -> Path:
    """``ranks`` as ``folder/kept-ranks.json.gz``, byte for byte the same for the same ranks."""
    nested: dict[str, dict[str, Any]] = {}
    for (name, row_id), (keep, variants) in sorted(ranks.items()):
        nested.setdefault(name, {})[row_id] = {"keep": keep, "variants": [list(v) for v in variants]}
    text = json.dumps(nested, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    path = folder / RANKS_FILE
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return path


def read_ranks(folder: Path, names: Sequence[str] | None = None) -> Ranks:
    """The committed ranks of ``names`` (default every set in the file)."""
    nested = json.loads(gzip.decompress((folder / RANKS_FILE).read_bytes()).decode("utf-8"))
    return {
        (name, row_id): (list(entry["keep"]), [(k, o, r) for k, o, r in entry["variants"]])
        for name, rows in nested.items()
        if names is None or name in names
        for row_id, entry in rows.items()
    }


def committed_narrowing(folder: Path, names: Sequence[str]) -> Narrowing:
    """Amendment 2's filters from the committed ranks: no shared data needed."""
    narrow, _ = narrowing(read_ranks(folder, names))
    return narrow


def narrowing(ranks: Ranks) -> tuple[Narrowing, dict[str, dict[str, int]]]:
    """The row change of rule 1 and, per set, how many variants and findings it keeps."""
    counts: dict[str, dict[str, int]] = {}

    def narrow(row: dict[str, Any]) -> dict[str, Any]:
        keep, variants = ranks[(row["set"], row["id"])]
        result = row["result"]
        if len(variants) != result.get("binding_variants", len(variants)):
            raise RuntimeError(
                f"{row['set']} {row['id']}: {len(variants)} variants now, {result['binding_variants']} scored"
            )
        findings = []
        for f in result.get("binding") or []:
            kind, original, replacement = variants[f["variant"]]
            if (kind, original, replacement) != (f["kind"], f["original"], f["replacement"]):
                raise RuntimeError(f"{row['set']} {row['id']}: variant {f['variant']} is not the one scored")
            if f["variant"] in keep:
                findings.append(f)
        c = counts.setdefault(row["set"], {"rows": 0, "variants": 0, "kept_variants": 0, "findings": 0})
        c["rows"] += 1
        c["variants"] += len(variants)
        c["kept_variants"] += len(keep)
        c["findings"] += len(findings)
        return {**row, "result": {**result, "binding": findings, "binding_variants": len(keep)}}

    return narrow, counts


def opt_in_choice(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Rule 3: amendment 1's and 2's grid rows at the opt-in settings, and which the check takes."""

    def at(result: dict[str, Any]) -> dict[str, Any]:
        return next(
            g
            for g in result["grid"]
            if g["min_margin"] == DEFAULT_CHECK.min_margin and g["min_lift"] == DEFAULT_CHECK.min_lift
        )

    a1, a2 = at(before), at(after)
    worst1, worst2 = max(a1["dev_drop"].values()), max(a2["dev_drop"].values())
    takes = worst2 < worst1 and a2["recombination_mean_auroc"] >= a1["recombination_mean_auroc"] - 0.05
    return {
        "amendment_1": {
            "largest_dev_drop": worst1,
            "recombination_mean_auroc": a1["recombination_mean_auroc"],
        },
        "amendment_2": {
            "largest_dev_drop": worst2,
            "recombination_mean_auroc": a2["recombination_mean_auroc"],
        },
        "opt_in_takes_amendment_2": takes,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/consens/binding"))
    args = parser.parse_args(argv)
    items = {**recombination_sets(), **dev_sets(), HAND_SET: hand_rows()}
    ranks = rebuilt_ranks({k: v for k, v in items.items() if k not in LATER_SETS})
    write_ranks(args.out, ranks)
    narrow, counts = narrowing(ranks)
    before = table(args.out, names=NARROWED_SETS)
    after = table(args.out, narrow, NARROWED_SETS)
    counts = json.loads(json.dumps(counts))  # as the tables' one pass over the rows left them
    unscored = [k for k in DEV_SETS if not after["rows"].get(k, {}).get("dev")]
    rule5 = after["report"].get("_rule5", {})
    on = bool(rule5.get("on_by_default")) and not unscored
    # For information (the hand rows choose nothing): their verdicts with the opt-in settings.
    hand = [narrow(r) for r in stored_rows(args.out, HAND_SET)]
    hand_opt_in = hand_verdicts(hand, DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift)
    result = {
        "amendment": 2,
        "hand_opt_in_settings": hand_opt_in,
        "counts": counts,
        "unscored_rule2_sets": unscored,
        "on_by_default": on,
        "opt_in": opt_in_choice(before, after),
        **after,
    }
    (args.out / "binding-amendment2.json").write_text(
        json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8"
    )
    print(markdown(after))
    print()
    shown_sets = [*(s for s in NARROWED_SETS if s != HAND_SET), "qa"]
    print(halves_table(args.out, DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift, narrow, shown_sets))
    shown = ("counts", "unscored_rule2_sets", "on_by_default", "opt_in", "hand_opt_in_settings")
    print(json.dumps({k: result[k] for k in shown}, indent=1))
    print(json.dumps(after["chosen"], indent=1))
    print(json.dumps(after["report"], indent=1))


def support_after(row: dict[str, Any], narrow: Narrowing) -> float:
    """One stored row's score with the opt-in check under amendment 2 (for tests)."""
    return support_with(narrow(row)["result"], DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift)


if __name__ == "__main__":
    main()
