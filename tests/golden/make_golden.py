"""Write the golden outputs that tests/golden/test_golden.py compares against.

Run it from the repository root and commit the files it writes, before a refactor or with a change
that alters a score on purpose (the commit says why):

    RAGSENSE_DATA_DIR=../shared/data .venv/bin/python tests/golden/make_golden.py

A refactor that moves code must leave every score, verdict and word unchanged; the test re-runs the
same calls on whatever machine runs the suite and compares floats within a tolerance (1e-4, justified
in tests/golden/_tolerance.py), everything else exactly, and a verdict wherever its score is away
from a band edge. The files hold full floats (``repr``), so regenerating on one machine and comparing
on another is the case the tolerance is for; regenerate only when a score changes on purpose, not
to silence float noise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WIKIEVAL_ROWS = 4  # the first rows of WikiEval, each with its grounded and its ungrounded answer


def sample_records() -> list[dict[str, Any]]:
    """ConSens (with attribution) and similarity on the bundled sample, the bundled SmolLM2-135M."""
    from ragsense import evaluate
    from ragsense.data import sample_rows_path

    evaluation = evaluate(
        str(sample_rows_path()), "consens,attribution,similarity", progress=False, store=False
    )
    return [dict(row) for row in evaluation.rows]


def vera_records() -> list[dict[str, Any]]:
    """VERA on the bundled sample with the fake judge (its ConSens adherence signal on the fake model)."""
    from ragsense import evaluate
    from ragsense.data import sample_rows_path

    evaluation = evaluate(str(sample_rows_path()), "vera", model="fake", progress=False, store=False)
    return [dict(row) for row in evaluation.rows]


def wikieval_records() -> list[dict[str, Any]]:
    """ConSens on the first WikiEval rows (grounded and ungrounded answers, context v1)."""
    from ragsense import evaluate
    from ragsense.data import load_wikieval

    rows: list[dict[str, Any]] = []
    for item in load_wikieval()[:WIKIEVAL_ROWS]:
        for kind, answer in (("grounded", item.grounded_answer), ("ungrounded", item.ungrounded_answer)):
            rows.append(
                {
                    "id": f"{item.id}-{kind}",
                    "question": item.question,
                    "contexts": item.context_v1,
                    "answer": answer,
                }
            )
    evaluation = evaluate(rows, "consens", progress=False, store=False)
    return [dict(row) for row in evaluation.rows]


def canonical(records: list[dict[str, Any]]) -> str:
    """JSON with sorted keys, floats written by repr (every bit kept, so a reader sees the true noise)."""
    return json.dumps(records, sort_keys=True, indent=1, default=str) + "\n"


def main() -> None:
    (HERE / "sample.json").write_text(canonical(sample_records()), encoding="utf-8")
    (HERE / "vera_fake.json").write_text(canonical(vera_records()), encoding="utf-8")
    (HERE / "wikieval.json").write_text(canonical(wikieval_records()), encoding="utf-8")


if __name__ == "__main__":
    main()
