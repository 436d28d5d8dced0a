"""``consens-distractors`` on a tiny slice with the fake model (issue 27)."""

import gzip
import json
from pathlib import Path

from ragsense.experiments import load_pairs, split_parts, with_distractors
from ragsense.experiments._distractors import consens_distractors
from ragsense.models import load_model


def test_distractors_are_seeded_nested_and_keep_the_own_document(shared_data: Path) -> None:
    del shared_data  # skips when the shared datasets are absent
    pool = split_parts(load_pairs("halueval"), 0)["report"]
    five, own5 = with_distractors(pool[0], pool, 5, 0)
    twenty, own20 = with_distractors(pool[0], pool, 20, 0)
    assert len(five) == 6 and len(twenty) == 21
    assert five[own5[0]] == twenty[own20[0]] == pool[0].documents[0]
    assert set(five) - {pool[0].documents[0]} <= set(twenty)
    assert with_distractors(pool[0], pool, 20, 0) == (twenty, own20)
    dev = {p.id for p in split_parts(load_pairs("halueval"), 0)["dev"]}
    assert dev.isdisjoint(p.id for p in pool)


def test_experiment_on_a_tiny_slice(shared_data: Path, tmp_path: Path) -> None:
    del shared_data
    figures = consens_distractors(
        model=load_model("fake"), limit=3, ks=(0, 5), budgets=(64, 128), dev_k=5, out=str(tmp_path)
    )
    assert figures["budget"] in (64, 128)
    for name in ("wikieval", "halueval"):
        for k in ("k=0", "k=5"):
            row = figures[name][k]
            assert set(row) == {"budget", "tail", "full", "baseline_lexical_support"}
            for cell in (row["budget"], row["tail"], row["full"]):
                lo, hi = cell["auroc_ci95"]
                assert 0.0 <= lo <= cell["auroc"] <= hi <= 1.0 and cell["rows_per_s"] > 0
        # The budget keeps the pair's own document; a tail cut of a shuffled context does not always.
        assert figures[name]["k=5"]["budget"]["own_document_kept"] == 1.0
    with gzip.open(tmp_path / "report-halueval-k5.jsonl.gz", "rt", encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh]
    assert len(items) == 3 * 2 * 3  # conditions x answers x pairs
    assert {i["condition"] for i in items} == {"budget", "tail", "full"}
