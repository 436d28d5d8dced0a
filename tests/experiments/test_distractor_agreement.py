"""papers/consens/distractor_agreement.py on the committed GPU runs (docs/results/consens/distractors/gpu)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from papers.consens.distractor_agreement import agreement

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "consens" / "distractors"


def test_gpu_float32_matches_the_cpu_run_and_bfloat16_keeps_the_same_windows() -> None:
    f32 = agreement(RESULTS / "gpu" / "h200-float32-wikieval", RESULTS)
    assert f32["rows_compared"] == 350 and f32["consens_max_abs_diff"] < 1e-4 and f32["same_verdict"] == 1.0
    bf16 = agreement(RESULTS / "gpu" / "h200-bfloat16-halueval", RESULTS)
    assert bf16["same_kept_documents"] == 1.0  # the window is chosen before the model runs
    assert all(abs(c["auroc_gpu"] - c["auroc_cpu_float32"]) < 0.02 for c in bf16["cells"])
    assert {c["gpu_rows_per_s"] is not None for c in bf16["cells"]} == {True}


def test_a_changed_score_shows_and_unmatched_runs_are_refused(tmp_path: Path) -> None:
    source = RESULTS / "report-wikieval-k0.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    rows[0]["consens"] += 0.25
    with gzip.open(tmp_path / source.name, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "consens-distractors.json").write_text("")  # a run stopped before its figures
    report = agreement(tmp_path, RESULTS)
    assert report["consens_max_abs_diff"] == pytest.approx(0.25, abs=1e-6)
    with pytest.raises(SystemExit, match="no cell"):
        agreement(tmp_path, tmp_path / "nothing")
