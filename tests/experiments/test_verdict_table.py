"""The issue-36 table (experiments/_verdict.py): the pre-registered sizes, a fixed order, and halves by
document, so no document's rows straddle the split; the committed pass rows are the table's."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ragsense.consens import WordDetail, learned_features
from ragsense.experiments import verdict_table
from ragsense.experiments._verdict import PLAN, is_dev


def test_the_half_is_the_documents_sha256_parity() -> None:
    # sha256("a") starts ca978112 (even), sha256("c") 2e7d2c03 (odd).
    assert (is_dev("a"), is_dev("c")) == (True, False)


PASS = Path(__file__).resolve().parents[2] / "docs" / "results" / "consens" / "verdict"


def test_the_table_is_the_preregistered_one(shared_data: Path) -> None:
    table = verdict_table(str(shared_data))
    assert verdict_table(str(shared_data)) == table  # deterministic
    sizes = {name: n for name, n in PLAN}
    for name, rows in table.items():
        pairs = name != "summedits"
        assert len(rows) == (2 * sizes[name] if pairs else 5 * sizes[name])
        halves: dict[str, set[bool]] = {}
        for r in rows:
            halves.setdefault(r.contexts[0], set()).add(r.dev)
        assert all(len(h) == 1 for h in halves.values())  # a document's rows on one side
        assert {r.label for r in rows} == {0, 1} and len({r.id for r in rows}) == len(rows)
        # The committed pass scored a prefix of the table's fixed order, nothing else.
        done = PASS / f"verdict-{name}.jsonl.gz"
        if done.exists():
            with gzip.open(done, "rt", encoding="utf-8") as fh:
                ids = [json.loads(line)["id"] for line in fh]
            assert ids == [r.id for r in rows[: len(ids)]]


def test_the_committed_features_are_the_passs_results_read_again(shared_data: Path) -> None:
    """The features file holds learned_features of what the pass returned, nothing else."""
    rows = {r.id: r for rows in verdict_table(str(shared_data)).values() for r in rows}
    with gzip.open(PASS / "features-smollm2-135m.jsonl.gz", "rt", encoding="utf-8") as fh:
        committed = {rec["id"]: rec["features"] for rec in map(json.loads, fh) if rec["set"] == "dialogue"}
    with gzip.open(PASS / "verdict-dialogue.jsonl.gz", "rt", encoding="utf-8") as fh:
        scored = [json.loads(line) for line in fh][:10]
    assert scored
    for rec in scored:
        row, result = rows[rec["id"]], rec["result"]
        words = [WordDetail(**w) for w in result["words"]]
        kept = [row.contexts[i] for i in result["kept_documents"]]
        assert learned_features(words, row.answer, kept) == committed[rec["id"]]


def test_the_pass_writes_a_prefix_per_set_and_resumes(shared_data: Path, tmp_path: Path) -> None:
    from ragsense.experiments._verdict import consens_verdict_table

    figures = consens_verdict_table(model="fake", data=str(shared_data), limit=2, out=str(tmp_path))
    assert figures["rows"] == {name: 2 for name, _ in PLAN}
    table = verdict_table(str(shared_data))
    for name, rows in table.items():
        lines = (tmp_path / f"verdict-{name}.jsonl").read_text(encoding="utf-8").splitlines()
        written = [json.loads(line) for line in lines]
        assert [w["id"] for w in written] == [r.id for r in rows[:2]]
        assert {"question", "contexts", "answer"}.isdisjoint(
            written[0]["result"]
        )  # no dataset text beyond words
    again = consens_verdict_table(model="fake", data=str(shared_data), limit=2, out=str(tmp_path))
    assert again["rows"] == figures["rows"] and again["seconds"] == {}  # nothing scored twice
