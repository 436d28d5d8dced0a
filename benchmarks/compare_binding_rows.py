"""Two per-row files of the binding check, compared: the same findings, margins, scores and verdicts?

    .venv/bin/python -m papers.consens.binding_check score --sets hand,halueval --out /tmp/rescore
    .venv/bin/python -m benchmarks.compare_binding_rows \\
        docs/results/consens/binding/binding-hand.jsonl.gz /tmp/rescore/binding-hand.jsonl

Used to check that a change of route (issue 49's packed pass) leaves the committed findings as they
were: for the rows both files hold, it counts the rows whose findings (kind, original, replacement,
spans) differ, and prints the largest change of a kept finding's margin or lift. Rows whose words the
context states differently (the lexical rule changed since a file was written) are listed apart; over
the others it counts the rows whose verdicts differ and prints the largest change of the ConSens
score. The last line is one JSON object. Files may be gzipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any


def load_rows(path: Path) -> dict[str, dict[str, Any]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return {row["id"]: row for row in map(json.loads, fh)}


def _key(finding: dict[str, Any]) -> tuple[Any, ...]:
    spans = tuple(tuple(s) for s in finding["spans"])
    return (finding["kind"], finding["original"], finding["replacement"], spans)


def _stated(result: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(w["word"], bool(w["stated"])) for w in result.get("words") or []]


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The comparison of two loaded files (see the module docstring)."""
    common = [key for key in after if key in before]
    findings_differ = verdicts_differ = compared = 0
    other_stated: list[str] = []
    worst_finding = worst_consens = 0.0
    for key in common:
        a, b = before[key]["result"], after[key]["result"]
        old = {_key(f): f for f in a.get("binding") or []}
        new = {_key(f): f for f in b.get("binding") or []}
        if set(old) != set(new):
            findings_differ += 1
        for k in set(old) & set(new):
            compared += 1
            worst_finding = max(
                worst_finding,
                abs(old[k]["margin"] - new[k]["margin"]),
                abs(old[k]["lift"] - new[k]["lift"]),
            )
        if _stated(a) != _stated(b):
            # The lexical rule changed since the file was written (issue 46's derived-word match
            # states "appointed" for "appointment"): not the route under test.
            other_stated.append(key)
            continue
        worst_consens = max(worst_consens, abs(a["consens"] - b["consens"]))
        verdicts_differ += a["verdict"] != b["verdict"]
    return {
        "rows": len(common),
        "rows_with_other_findings": findings_differ,
        "rows_with_other_stated_words": other_stated,
        "rows_with_other_verdicts": verdicts_differ,
        "findings_compared": compared,
        "max_finding_change_nats": worst_finding,
        "max_consens_change": worst_consens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    print(json.dumps(compare(load_rows(args.before), load_rows(args.after))))


if __name__ == "__main__":
    main()
