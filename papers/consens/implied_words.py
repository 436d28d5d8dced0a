"""Issue 46, item 3: should a word the reader itself predicts under the context count as supported?

THE RULE (committed in this docstring before any figure below was computed)

``support`` gives an unstated word the support probability ``sigmoid(d - 1)``, ``d`` the word's contrast
``nll_empty - nll_context``. A word the reader predicts with near certainty under the context *and* the
answer so far ("time" in "at the time", the rest of a phrase the earlier words began) then counts as
unsupported (``d`` near 0 gives 0.27) although it adds no claim of its own: the earlier words made it.
The bundled sample's grounded Eiffel answer lists "time" (``nll_context`` 0.00) as a reason it is not
``grounded``.

1. **Candidate**: an unstated word's support probability is ``max(sigmoid(d - 1), exp(-nll_context))``:
   at least the reader's own probability of the word under the context and the answer before it, so a
   word the context (with the answer so far) implies is supported as much as the reader believes it.
   Stated words keep probability 1; nothing else changes (same bands, same score formula).
2. **Rows**: the committed per-row outputs of the bundled SmolLM2-135M with the default settings that
   store each row's scored words, their NLLs and stated flags, as in
   :mod:`papers.consens.derived_words`: ``binding-{wikieval,halueval,summarization,summedits,qa}
   .jsonl.gz`` (docs/results/consens/binding; the score without the binding check) and
   ``verdict/verdict-dialogue.jsonl.gz``, with their pre-registered halves. Nothing is scored again; the
   score is ``support`` recomputed from the stored NLLs and flags (checked to give the stored score).
3. **Decision**: the candidate becomes the default (``ragsense.consens._math``) if, on the
   **development halves**, no set's AUROC falls by more than 0.01 and their mean does not fall (the
   derived match's rule). Reported, none used to choose: the report halves, the hand-written rows'
   verdicts (recombined rows and paraphrase twins) and the bundled sample's rows, each beside the figures
   without it. Only one candidate is computed: no threshold is tuned.

Command (no model is loaded, no shared data is read)::

    python -m papers.consens.implied_words --out docs/results/consens/implied_words.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import HAND_SET
from papers.consens.derived_words import (
    SOURCES,
    decide,
    halves,
    hand_verdicts,
    sample_records,
    stored_rows,
    support,
)
from ragsense.consens import default_bands, support_r


def _shipped_log(word: dict[str, Any]) -> float:
    """The shipped log support probability of one unstated stored word (``support_r`` of it alone)."""
    return support_r([float(word["nll_empty"]) - float(word["nll_context"])], [False])


def implied_support(words: Sequence[dict[str, Any]]) -> float:
    """The candidate's score of stored words: ``2 exp(r) - 1``, ``r`` the mean log support probability
    with an unstated word's probability at least ``exp(-nll_context)``.

    >>> w = [{"nll_empty": 0.0, "nll_context": 0.0, "stated": False}]
    >>> round(support(w, [False]), 4), implied_support(w)  # sigmoid(-1) -> 1
    (-0.4621, 1.0)
    """
    logs = []
    for w in words:
        if w["stated"]:
            logs.append(0.0)
            continue
        logs.append(max(_shipped_log(w), -float(w["nll_context"])))
    return 2.0 * math.exp(math.fsum(logs) / len(logs)) - 1.0


def rescored(name: str) -> list[dict[str, Any]]:
    """One set's stored rows with the score as shipped and under the candidate."""
    out = []
    for row in stored_rows(SOURCES[name]):
        result = row["result"]
        if result.get("refusal") or result.get("verdict") == "refusal" or not result.get("words"):
            continue
        words = result["words"]
        if any("stated" not in w for w in words):
            raise RuntimeError(f"{name} {row['id']}: stored words carry no stated flags")
        before = support(words, [bool(w["stated"]) for w in words])
        # Binding rows store the score with the check at its loosest: it equals the plain score only
        # where the check found nothing, which is where the recomputation is checked.
        if not result.get("binding") and abs(before - result["consens"]) > 1e-9:
            raise RuntimeError(f"{name} {row['id']}: {before} recomputed, {result['consens']} stored")
        after = implied_support(words)
        out.append(
            {
                "id": row["id"],
                "group": row["group"],
                "dev": row["dev"],
                "label": row["label"],
                "before": before,
                "after": after,
                "implied": [
                    w["word"] for w in words if not w["stated"] and -float(w["nll_context"]) > _shipped_log(w)
                ],
            }
        )
    return out


def sample_rows() -> list[dict[str, Any]]:
    """The bundled sample's rows (committed golden output) under the shipped score and the candidate."""
    golden, records = sample_records()
    bands = default_bands()
    out = []
    for g in golden:
        before = support(g["words"], [bool(w["stated"]) for w in g["words"]])
        after = implied_support(g["words"])
        out.append(
            {
                "id": g["id"],
                "expected": records[g["id"]].get("expected"),
                "before": bands.verdict(before),
                "after": bands.verdict(after),
                "score_before": round(before, 4),
                "score_after": round(after, 4),
            }
        )
    return out


def run() -> dict[str, Any]:
    result: dict[str, Any] = {"sets": {}}
    for name in SOURCES:
        rows = rescored(name)
        if name == HAND_SET:
            result["hand"] = hand_verdicts(rows)
            continue
        entry = halves(rows, lambda r: bool(r["after"] > r["before"]), "rows_raised_by_label")
        entry["implied_examples"] = sorted({w for r in rows for w in r["implied"]})[:40]
        result["sets"][name] = entry
    result.update(decide(result["sets"]))
    result["sample"] = sample_rows()
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/consens/implied_words.json"))
    args = parser.parse_args(argv)
    result = run()
    args.out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
