"""``ragsense correctness`` and ``ragsense experiment correctness-squad`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.cli._main import main
from ragsense.correctness import Correctness
from ragsense.evaluation import evaluate
from ragsense.experiments._correctness import squad_split

FAST = ["--perturbations", "3", "--how", "single_shot", "--model", "smollm2-135m", "--threads", "2"]


def _rows(shared_data: Path, n: int) -> list[dict[str, object]]:
    train, _ = squad_split(str(shared_data / "squad_v2" / "dev-v2.0.json"), None, 0)
    return [
        {"id": s.id, "question": s.question, "context": s.context, "references": list(s.references)}
        for s in train[:n]
    ]


def test_features_train_evaluate_predict(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(shared_data, 4)
    rows.insert(2, {"id": "bad", "question": "Where?", "context": "", "reference": "x"})
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    features = tmp_path / "features.jsonl"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    # Exit code 3: the run finished, and a row (the empty context) has an error.
    assert main(["correctness", "features", str(source), "-o", str(features), *FAST, *cache]) == 3
    lines = [json.loads(x) for x in features.read_text().splitlines()]
    assert len(lines) == 5 and lines[2]["errors"][0]["field"] == "context"
    assert all("normal" in x for i, x in enumerate(lines) if i != 2)
    estimator = tmp_path / "est.npz"
    assert (
        main(
            [
                "correctness",
                "train",
                str(features),
                "-o",
                str(estimator),
                "--trees",
                "20",
                "--metric",
                "rouge_f1",
            ]
        )
        == 0
    )
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert trained["n_train"] == 4 and trained["skipped"] == 1 and trained["threshold"] == 0.5
    assert main(["correctness", "evaluate", str(features), "--estimator", str(estimator)]) == 0
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert evaluated["n"] == 4 and 0 <= evaluated["mse"] < 0.25
    out = tmp_path / "estimates.jsonl"
    assert (
        main(
            [
                "correctness",
                "predict",
                str(source),
                "--estimator",
                str(estimator),
                "-o",
                str(out),
                "--model",
                "smollm2-135m",
                *cache,
            ]
        )
        == 3
    )
    estimates = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(estimates) == 5 and estimates[2]["errors"][0]["field"] == "context"
    good = [(e, r) for e, r in zip(estimates, rows, strict=True) if not e["errors"]]
    assert all(0 <= e["correctness"] <= 1 and e["id"] == r["id"] for e, r in good)
    # The answers are the ones the features recorded (same model, same prompt, greedy).
    assert [e["correctness_answer"] for e in estimates if not e["errors"]] == [
        x["answer"] for x in lines if not x["errors"]
    ]
    # ``correctness predict`` is ``evaluate`` with the Correctness metric: the same records.
    run = evaluate(str(source), [Correctness(estimator, feature_cache=tmp_path / "cache")], progress=False)
    # (the file adds each row's input fingerprint, ``_input``, which --resume checks).
    assert json.loads(json.dumps(run.rows)) == [
        {k: v for k, v in e.items() if k != "_input"} for e in estimates
    ]


def test_predict_with_another_base_model_is_refused(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _rows(shared_data, 2)))
    features = tmp_path / "f.jsonl"
    assert main(["correctness", "features", str(source), "-o", str(features), *FAST]) == 0
    assert main(["correctness", "train", str(features), "-o", str(tmp_path / "e.npz"), "--trees", "5"]) == 0
    assert (
        main(
            ["correctness", "predict", str(source), "--estimator", str(tmp_path / "e.npz"), "--model", "fake"]
        )
        == 2
    )
    assert "trained with base model 'smollm2-135m'" in capsys.readouterr().err


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
def test_experiment_prints_the_figures_as_its_last_line(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "experiment",
            "correctness-squad",
            "--data",
            str(shared_data / "squad_v2" / "dev-v2.0.json"),
            "--limit",
            "10",
            "--trees",
            "30",
            *FAST,
            "--cache-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"mse", "auroc", "accuracy", "f1", "threshold", "n_train", "n_eval"} <= set(figures)
    assert (figures["n_train"], figures["n_eval"]) == (7, 3)
    assert figures["perturbation"] == "SS-EN k=3 fill=left" and figures["threshold"] == 0.7
    assert (tmp_path / "out" / "estimator.npz").exists()
    assert len((tmp_path / "out" / "eval.jsonl").read_text().splitlines()) == 3
