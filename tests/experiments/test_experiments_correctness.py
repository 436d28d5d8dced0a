"""``correctness-squad`` on the runner: an interrupted run resumes to the records and figures of a fresh
one, reading its finished feature chunks back instead of computing them again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ragsense.experiments._correctness as module
from ragsense.cli import main

FAST = ["--perturbations", "3", "--how", "single_shot", "--model", "smollm2-135m", "--threads", "2"]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _figures(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return {k: v for k, v in figures.items() if k not in ("seconds", "feature_seconds_per_sample")}


@pytest.mark.model
@pytest.mark.slow  # about 3 minutes on 2 cores (run with -m slow); the VERA experiments resume by default
def test_correctness_squad_resumes_an_interrupted_run(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "FEATURE_CHUNK", 4)  # 7 training samples: chunks of 4 and 3
    out = tmp_path / "out"
    args = ["experiment", "correctness-squad", "--data", str(shared_data / "squad_v2" / "dev-v2.0.json")]
    args += ["--limit", "10", "--trees", "30", *FAST, "--out", str(out)]
    # Each run has its own feature cache, so only the runner's records carry work from one to the next.
    assert main([*args, "--cache-dir", str(tmp_path / "cache1")]) == 0
    fresh = _figures(capsys)
    train, evaluation = _read(out / "features_train.jsonl"), _read(out / "features_eval.jsonl")
    estimates = _read(out / "eval.jsonl")
    assert (len(train), len(evaluation), fresh["n_errors"]) == (7, 3, 0)
    assert train[0]["part"] == "train" and "feature_config" in train[0] and train[0]["errors"] == []

    # Killed during the second chunk of the training part: the first chunk is read back (its edited
    # answer stays), the rest is computed again.
    edited = {**train[0], "normal": {**train[0]["normal"], "answer": "kept"}}
    (out / "features_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [edited, *train[1:5]]))
    (out / "features_eval.jsonl").unlink()
    assert main([*args, "--cache-dir", str(tmp_path / "cache2"), "--resume"]) == 0
    capsys.readouterr()
    assert _read(out / "features_train.jsonl") == [edited, *train[1:]]
    assert _read(out / "features_eval.jsonl") == evaluation

    # From a partial first chunk everything is computed again, identically.
    (out / "features_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train[:2]))
    assert main([*args, "--cache-dir", str(tmp_path / "cache3"), "--resume"]) == 0
    assert _figures(capsys) == fresh
    assert _read(out / "features_train.jsonl") == train
    assert _read(out / "features_eval.jsonl") == evaluation
    assert _read(out / "eval.jsonl") == estimates

    # Other settings do not resume these features.
    assert main([*args, "--cache-dir", str(tmp_path / "cache3"), "--perturbations", "2", "--resume"]) == 2
    assert "other models or settings" in capsys.readouterr().err
