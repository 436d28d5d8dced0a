"""Issue 46, item 3: does matching a noun of action with its verb call more grounded paraphrases grounded?

THE RULE (committed in this docstring, with ``ragsense.text._lemma.derived_stems``, before any figure
below was computed)

A grounded paraphrase often turns a verb of the context into its noun or back ("announced his
decipherment" -> "the key to deciphering", "was completed" -> "its completion"). The lexical evidence
matches inflections only, so such a word counts as unstated and, since the 135M reader rarely raises its
likelihood, as unsupported: the bundled sample's grounded Rosetta answer is ``unsure`` for
"deciphering" alone.

1. **Candidate**: the lexical evidence's *derived* match on (``ContextVocabulary(..., derived=True)``:
   ``-ment``, ``-ation``, ``-ition``, ``-ion`` removed from a stem of at least five letters), everything
   else as shipped.
2. **Rows**: the committed per-row outputs of the bundled SmolLM2-135M with the default settings that
   store each row's scored words, their NLLs and stated flags: ``binding-{wikieval,halueval,
   summarization,summedits,qa}.jsonl.gz`` (docs/results/consens/binding; the score without the binding
   check) and ``verdict/verdict-dialogue.jsonl.gz``, with their pre-registered halves; the contexts
   rebuilt from the shared data (``papers.consens.binding_check.dev_sets``). A word's flag under the
   candidate is its stored flag, or true where the derived match states it against the row's contexts.
   Nothing is scored again; the score is ``support`` recomputed from the stored NLLs (checked to give the
   stored score when no flag changes).
3. **Decision**: the match is on by default (``ragsense.text._support.DERIVED_WORDS``) if, on the
   **development halves**, no set's AUROC falls by more than 0.01 and their mean does not fall.
   Reported, none used to choose: the report halves, the hand-written rows' verdicts (recombined rows and
   paraphrase twins, papers/consens/data/binding_rows.jsonl) and the bundled sample's rows
   (tests/golden/sample.json), each beside the figures without the match.

Command (no model is loaded)::

    python -m papers.consens.derived_words --out docs/results/consens/derived_words.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from papers.consens.binding_check import HAND_SET, Item, auroc, auroc_ci, dev_sets, hand_rows
from ragsense.consens import Aggregation, consens_from_word_nll, default_bands
from ragsense.text import ContextVocabulary

ROOT = Path(__file__).parents[2]
BINDING = ROOT / "docs" / "results" / "consens" / "binding"
SOURCES = {
    "wikieval": BINDING / "binding-wikieval.jsonl.gz",
    "halueval": BINDING / "binding-halueval.jsonl.gz",
    "summarization": BINDING / "binding-summarization.jsonl.gz",
    "summedits": BINDING / "binding-summedits.jsonl.gz",
    "qa": BINDING / "binding-qa.jsonl.gz",
    "dialogue": ROOT / "docs" / "results" / "consens" / "verdict" / "verdict-dialogue.jsonl.gz",
    HAND_SET: BINDING / "binding-hand.jsonl.gz",
}
SAMPLE = ROOT / "tests" / "golden" / "sample.json"
SAMPLE_DATA = ROOT / "src" / "ragsense" / "data" / "samples" / "sample_rag.jsonl"


def stored_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one committed gzipped JSON-lines file."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def support(words: Sequence[dict[str, Any]], stated: Sequence[bool]) -> float:
    """The ``support`` score of stored words under the given stated flags."""
    nll_e = [w["nll_empty"] for w in words]
    nll_c = [w["nll_context"] for w in words]
    return consens_from_word_nll(nll_e, nll_c, Aggregation.SUPPORT, list(stated))[0]


def flags(words: Sequence[dict[str, Any]], contexts: Sequence[str]) -> tuple[list[bool], list[bool]]:
    """Each word's flag without the derived match and with it (stored, or stated by derivation only)."""
    # Only what the derived match adds: a stored flag may have been decided against a window of a long
    # context (the default context selection), so a word the whole context states without derivation
    # keeps its stored flag.
    derived = ContextVocabulary(contexts, derived=True)
    plain = ContextVocabulary(contexts, derived=False)
    # A file written with the match on (the golden sample, once adopted) stores the candidate's flags:
    # "before" takes out what only the derived match states, so both runs of this script agree.
    stored = [bool(w["stated"]) for w in words]
    added = [derived.states(w["word"]) and not plain.states(w["word"]) for w in words]
    before = [s and not a for s, a in zip(stored, added, strict=True)]
    return before, [s or a for s, a in zip(stored, added, strict=True)]


def rescored(name: str, items: dict[str, Item]) -> list[dict[str, Any]]:
    """One set's stored rows with the score before and under the candidate."""
    out = []
    for row in stored_rows(SOURCES[name]):
        result = row["result"]
        if result.get("refusal") or result.get("verdict") == "refusal" or not result.get("words"):
            continue
        words = result["words"]
        if any("stated" not in w for w in words):
            raise RuntimeError(f"{name} {row['id']}: stored words carry no stated flags")
        stored, candidate = flags(words, items[row["id"]].contexts)
        before = support(words, stored)
        # The binding rows were scored with the check at its loosest: their stored score is the one
        # without it only where it found nothing. The stored flags are the run's own (rows scored
        # after the match was adopted carry it), so the recomputation is checked against them.
        as_stored = support(words, [bool(w["stated"]) for w in words])
        if not result.get("binding") and abs(as_stored - result["consens"]) > 1e-9:
            raise RuntimeError(f"{name} {row['id']}: {as_stored} recomputed, {result['consens']} stored")
        out.append(
            {
                "id": row["id"],
                "group": row["group"],
                "dev": row["dev"],
                "label": row["label"],
                "before": before,
                "after": support(words, candidate),
                "newly_stated": [
                    w["word"] for w, a, b in zip(words, stored, candidate, strict=True) if b and not a
                ],
            }
        )
    return out


def figure(rows: Sequence[dict[str, Any]], key: str) -> list[Any]:
    """AUROC of ``r[key]`` for the rows' labels and its 95% interval (groups resampled whole)."""
    value = auroc([r["label"] for r in rows], [r[key] for r in rows])
    return [round(value, 4), auroc_ci(rows, lambda r: r[key])]


def halves(
    rows: Sequence[dict[str, Any]], moved: Callable[[dict[str, Any]], bool], moved_name: str
) -> dict[str, Any]:
    """Each half (``dev``, ``report``) with both labels: its rows, AUROC ``before`` and ``after``, and how
    many rows of each label ``moved`` (the caller says what moving means, under ``moved_name``)."""
    entry: dict[str, Any] = {}
    for half, flag in (("dev", True), ("report", False)):
        part = [r for r in rows if r["dev"] == flag]
        if len({r["label"] for r in part}) < 2:
            continue
        entry[half] = {
            "rows": len(part),
            "before": figure(part, "before"),
            "after": figure(part, "after"),
            moved_name: {str(y): sum(moved(r) for r in part if r["label"] == y) for y in (0, 1)},
        }
    return entry


def hand_verdicts(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The hand-written rows' verdicts under the shipped bands, before and after, for the recombined
    rows (label 0) and their paraphrase twins (label 1)."""
    bands = default_bands()
    verdicts: dict[str, dict[str, int]] = {}
    for r in rows:
        kind = "twins" if r["label"] == 1 else "recombined"
        for when in ("before", "after"):
            v = bands.verdict(r[when])
            counts = verdicts.setdefault(f"{kind}_{when}", {})
            counts[v] = counts.get(v, 0) + 1
    return verdicts


def decide(sets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The word rules' decision: adopted if no development half's AUROC falls by more than 0.01 and
    their mean does not fall. ``sets`` maps a set to :func:`halves`' entry."""
    dev = {k: v["dev"] for k, v in sets.items() if "dev" in v}
    drops = {k: round(v["before"][0] - v["after"][0], 4) for k, v in dev.items()}
    mean_before = sum(v["before"][0] for v in dev.values()) / len(dev)
    mean_after = sum(v["after"][0] for v in dev.values()) / len(dev)
    return {
        "dev_drops": drops,
        "dev_mean": {"before": round(mean_before, 4), "after": round(mean_after, 4)},
        "adopted": all(d <= 0.01 for d in drops.values()) and mean_after >= mean_before,
    }


def sample_records() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The bundled sample's scored rows (committed golden output, refusals and rows without words left
    out) and its input records by id."""
    golden = json.loads(SAMPLE.read_text(encoding="utf-8"))
    lines = SAMPLE_DATA.read_text(encoding="utf-8").splitlines()
    records = {r["id"]: r for r in (json.loads(line) for line in lines if line.strip())}
    scored = [g for g in golden if g.get("verdict") != "refusal" and g.get("words")]
    return scored, records


def sample_rows() -> list[dict[str, Any]]:
    """The bundled sample's rows from the committed golden output (words, NLLs, stated flags)."""
    golden, records = sample_records()
    bands = default_bands()
    out = []
    for g in golden:
        stored, candidate = flags(g["words"], records[g["id"]]["contexts"])
        out.append(
            {
                "id": g["id"],
                "expected": records[g["id"]].get("expected"),
                "before": bands.verdict(support(g["words"], stored)),
                "after": bands.verdict(support(g["words"], candidate)),
                "score_after": round(support(g["words"], candidate), 4),
                "newly_stated": [
                    w["word"] for w, a, b in zip(g["words"], stored, candidate, strict=True) if b and not a
                ],
            }
        )
    return out


def run() -> dict[str, Any]:
    sets = dev_sets()
    result: dict[str, Any] = {"sets": {}}
    for name in SOURCES:
        items = {it.id: it for it in (hand_rows() if name == HAND_SET else sets[name])}
        rows = rescored(name, items)
        if name == HAND_SET:
            result["hand"] = hand_verdicts(rows)
            continue
        entry = halves(rows, lambda r: bool(r["after"] != r["before"]), "rows_changed_by_label")
        for figures in entry.values():  # the committed file's key order: the total before its split
            by_label = figures.pop("rows_changed_by_label")
            figures["rows_changed"] = sum(by_label.values())
            figures["rows_changed_by_label"] = by_label
        entry["newly_stated_examples"] = sorted({w for r in rows for w in r["newly_stated"]})[:40]
        result["sets"][name] = entry
    result.update(decide(result["sets"]))
    result["sample"] = sample_rows()
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/consens/derived_words.json"))
    args = parser.parse_args(argv)
    result = run()
    args.out.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
