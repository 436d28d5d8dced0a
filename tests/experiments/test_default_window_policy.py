"""Amendment 3's policy rule (issue 40) on per-item files: pooling, common pairs, the tie to ``lead``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ragsense.experiments._default_window import choose_policy_from_files

COMMITTED = Path(__file__).parents[2] / "docs" / "results" / "consens" / "default_window"


def _write(folder: Path, name: str, pairs: list[tuple[str, float, float]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / name, "wt", encoding="utf-8") as fh:
        for pair, pos, neg in pairs:
            fh.write(json.dumps({"id": f"{pair}:pos", "consens": pos}) + "\n")
            fh.write(json.dumps({"id": f"{pair}:neg", "consens": neg}) + "\n")


def test_pools_folders_and_counts_only_pairs_scored_under_both_policies(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first, "choose-qa-k20-b128.jsonl.gz", [("p1", 0.9, 0.1), ("p2", 0.2, 0.8)])
    _write(first, "choose-qa-k20-lead128.jsonl.gz", [("p1", 0.9, 0.1), ("p2", 0.9, 0.1)])
    # p3 only under relevance: left out of both means
    _write(second, "choose-qa-k20-b128.jsonl.gz", [("p3", 0.0, 1.0), ("p4", 0.7, 0.3)])
    _write(second, "choose-qa-k20-lead128.jsonl.gz", [("p4", 0.3, 0.95)])
    result = choose_policy_from_files([str(first), str(second)], sets=["qa"])
    assert result["sets"]["qa"]["pairs"] == 3
    # relevance ranks p1, p4 right and p2 wrong: AUROC over the 3 pairs' 6 rows
    assert result["sets"]["qa"]["relevance"] == 0.6667
    assert result["sets"]["qa"]["lead"] == 0.6667
    assert result["policy"] == "lead"  # a tie goes to lead


def test_amendment_2_choice_is_reproduced_from_the_committed_files() -> None:
    result = choose_policy_from_files([str(COMMITTED)])
    assert result["policy"] == "relevance"
    assert result["mean"] == {"relevance": 0.716, "lead": 0.7084}
    assert {name: s["pairs"] for name, s in result["sets"].items()} == {
        "qa": 16,
        "summarization": 12,
        "dialogue": 16,
        "summedits": 16,
    }


def test_amendment_3_choice_is_reproduced_from_the_committed_files() -> None:
    # AUROC is a ranking of committed scores: the same on every machine.
    result = choose_policy_from_files([str(COMMITTED), str(COMMITTED / "amendment3")])
    assert result["policy"] == "lead"
    assert result["mean"] == {"relevance": 0.7087, "lead": 0.7145}
    assert all(s["pairs"] == 40 for s in result["sets"].values())
    assert json.loads((COMMITTED / "amendment3" / "rule4.json").read_text()) == result
