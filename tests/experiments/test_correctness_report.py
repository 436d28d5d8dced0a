"""correctness-squad's methodology, fast (no language model): the split and the cross-validation folds
are by paragraph, and every figure of the evaluation part is chosen on the training part only and
printed beside its trivial and single-feature baselines and its calibration."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import ragsense.experiments._correctness as module
from ragsense.correctness import CorrectnessSample, SampleFeatures, feature_names
from ragsense.correctness._features import ConditionResult
from ragsense.correctness._perturb import PerturbedContext
from ragsense.experiments._correctness import paragraph_of, squad_split
from ragsense.experiments._correctness_report import (
    best_f1_threshold,
    classification,
    evaluation_report,
    grouped_folds,
)

NAMES = feature_names(("mean", "max"))


def _least_squares(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], x_new: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """A cheap stand-in for the forest: linear least squares."""
    a = np.c_[x, np.ones(len(x))]
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return np.asarray(np.c_[x_new, np.ones(len(x_new))] @ coef, dtype=np.float64)


def _squad(path: Path) -> str:
    return str(path / "squad_v2" / "dev-v2.0.json")


# -- split and folds -----------------------------------------------------------------------------------


def test_split_keeps_every_paragraph_in_one_part(shared_data: Path) -> None:
    train, evaluation = squad_split(_squad(shared_data), None, 0)
    assert len(train) == 2100 and 0 < len(evaluation) <= 900
    assert not {paragraph_of(s) for s in train} & {paragraph_of(s) for s in evaluation}
    assert len({s.id for s in train + evaluation}) == len(train) + len(evaluation)
    # limit takes 70 / 30 from the front of each part: nested, and spread over many paragraphs.
    small_train, small_eval = squad_split(_squad(shared_data), 300, 0)
    assert (len(small_train), len(small_eval)) == (210, 90)
    assert small_train == train[:210] and small_eval == evaluation[:90]
    assert len({paragraph_of(s) for s in small_eval}) > 45
    assert squad_split(_squad(shared_data), 300, 1)[1] != small_eval


def test_grouped_folds_keep_groups_whole_and_balanced() -> None:
    groups = [f"p{i // 3}" for i in range(60)] + [f"q{i}" for i in range(7)]
    fold = grouped_folds(groups, folds=5, seed=0)
    by_group: dict[str, set[int]] = {}
    for g, k in zip(groups, fold, strict=True):
        by_group.setdefault(g, set()).add(k)
    assert all(len(ks) == 1 for ks in by_group.values())
    sizes = [fold.count(k) for k in range(5)]
    assert max(sizes) - min(sizes) <= 3 and sum(sizes) == 67
    assert grouped_folds(groups, folds=5, seed=0) == fold
    with pytest.raises(ValueError, match="at least 5 groups"):
        grouped_folds(["a", "a", "b"], folds=5)


def test_best_f1_threshold_and_classification() -> None:
    assert best_f1_threshold([0.2, 0.5, 0.6, 0.9], [False, False, True, True]) == 0.6
    # A tie (every threshold gives F1 = 2/3 or less; 0.9 and 0.2 both give 2/3): the highest wins.
    assert best_f1_threshold([0.2, 0.9], [True, False]) == 0.2
    c = classification([False] * 8, [True, True] + [False] * 6)
    assert (c["accuracy"], c["f1"], c["recall"], c["precision"]) == (0.75, 0.0, 0.0, None)
    lo, hi = c["accuracy_ci95"]
    assert lo < 0.75 < hi


# -- the report ----------------------------------------------------------------------------------------


def _data(
    n: int, seed: int, informative: int, groups: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], list[str]]:
    """Features whose column ``informative`` (plus the normal output NLL) tracks the target."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 1, n)
    x = rng.normal(5, 1, (n, len(NAMES)))
    x[:, informative] = 6 - 5 * y + rng.normal(0, 0.4, n)
    x[:, NAMES.index("normal.output.mean")] = 4 - 2 * y + rng.normal(0, 1.0, n)
    return x, y, [f"g{i % groups}" for i in range(n)]


@functools.cache
def _report(eval_seed: int = 1) -> module.Report:
    a, b = NAMES.index("normal.question.mean"), NAMES.index("perturbed.context.max")
    x_train, y_train, g_train = _data(200, 0, informative=a, groups=40)
    # On the evaluation part another column carries the signal: a choice made there would pick it.
    x_eval, y_eval, _ = _data(120, eval_seed, informative=b, groups=24)
    return evaluation_report(
        NAMES,
        x_train,
        y_train.tolist(),
        g_train,
        x_eval,
        y_eval.tolist(),
        threshold=0.7,
        fit_predict=_least_squares,
        n_boot=200,
    )


def test_report_prints_the_trivial_baselines_beside_the_forest() -> None:
    report = _report()
    f = report.figures
    n, pos = f["split"]["n_eval"], f["split"]["eval_positives"]
    share = pos / n
    assert f["baselines"]["always_incorrect"]["accuracy"] == round(1 - share, 4)
    assert f["baselines"]["always_incorrect"]["f1"] == 0.0
    assert f["baselines"]["always_correct"]["accuracy"] == round(share, 4)
    assert f["baselines"]["always_correct"]["f1"] == round(2 * share / (1 + share), 4)
    forest = f["forest"]
    assert forest["n_features"] == 28 and 0.5 < forest["auroc"] <= 1
    lo, hi = forest["auroc_ci95"]
    assert lo <= forest["auroc"] <= hi
    assert forest["at_t"]["decision_threshold"] == 0.7
    assert len(report.eval_items) == n and len(report.train_items) == 200


def test_best_single_feature_is_chosen_on_the_training_part() -> None:
    f = _report().figures
    best = f["best_single_feature"]
    assert best["name"] == "normal.question.mean"  # the training part's signal, not the evaluation's
    assert best["train_auroc"] > 0.9 and abs(best["eval_auroc"] - 0.5) < 0.15
    assert best["direction"] == "lower NLL = correct"
    assert set(best["forest_minus_feature"]) == {"auc_a", "auc_b", "difference", "se", "z", "p_value"}
    assert f["output_nll"]["name"] == "normal.output.mean" and f["output_nll"]["auroc"] > 0.6
    without = f["forest_without_perturbed"]
    assert without["n_features"] == len([n for n in NAMES if not n.startswith("perturbed.")]) == 18
    # The evaluation signal sits in a perturbed feature: without it the forest ranks worse.
    assert without["auroc"] < f["forest"]["auroc"] and without["forest_minus_this"]["difference"] > 0


def test_threshold_and_calibration_do_not_depend_on_the_evaluation_labels() -> None:
    one, other = _report(eval_seed=1).figures, _report(eval_seed=2).figures
    assert one["forest"]["at_train_threshold"]["decision_threshold"] == one["train_cv"]["decision_threshold"]
    assert one["train_cv"] == other["train_cv"]
    assert one["calibration"]["platt"]["a"] == other["calibration"]["platt"]["a"]
    train = _report().train_items
    oof = [t["estimate_out_of_fold"] for t in train]
    assert one["train_cv"]["decision_threshold"] == round(
        best_f1_threshold(oof, [t["correct"] for t in train]), 4
    )
    cal = one["calibration"]
    for block in (cal["estimate"], cal["platt"], cal["constant_train_share"]):
        assert sum(b["n"] for b in block["reliability"]) == one["split"]["n_eval"]
        assert 0 <= block["ece"] <= 1 and 0 <= block["brier"] <= 1
    assert len(cal["constant_train_share"]["reliability"]) == 1


# -- the experiment end to end, on stand-in features ---------------------------------------------------


def _condition(rng: np.random.Generator, output: float, answer: str, context: bool) -> ConditionResult:
    places = ["prompt", "instruction", "question", "output"] + (["context"] if context else [])
    nll = {p: {"mean": float(rng.uniform(0, 5)), "max": float(rng.uniform(5, 12)), "n": 3} for p in places}
    nll["output"] = {"mean": output, "max": output + 2, "n": 3}
    return ConditionResult(answer=answer, finish_reason="stop", nll=nll)


@dataclass
class _StubExtractor:
    """Features without a model: a sample answers its reference when its id hashes low."""

    config: dict[str, Any]

    def close(self) -> None:
        pass


async def _stub_features(
    extractor: Any, parts: dict[str, list[CorrectnessSample]], out: Path | None, resume: bool
) -> list[tuple[list[SampleFeatures], list[CorrectnessSample], list[str]]]:
    result: list[tuple[list[SampleFeatures], list[CorrectnessSample], list[str]]] = []
    empty = PerturbedContext(text="x", replacements=(), n_tokens=1, truncated=False)
    for samples in parts.values():
        features = []
        for s in samples:
            rng = np.random.default_rng(int(s.id[:6], 16))
            right = rng.uniform() < 0.3
            answer = s.references[0] if right else "zzz"
            output = float(rng.normal(1.0 if right else 2.5, 0.7))
            features.append(
                SampleFeatures(
                    s.id,
                    _condition(rng, output + 1, "b", False),
                    _condition(rng, output, answer, True),
                    _condition(rng, output + 0.5, answer, True),
                    empty,
                )
            )
        result.append((features, samples, []))
    return result


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def test_experiment_writes_figures_items_and_plot(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragsense.models import load_model

    monkeypatch.setattr(module, "FeatureExtractor", lambda *a, **k: _StubExtractor({"stub": True}))
    monkeypatch.setattr(module, "_features", _stub_features)
    monkeypatch.setattr(module, "BOOTSTRAP", 200)
    out = tmp_path / "out"
    figures = module.correctness_squad(
        load_model("fake"), _squad(shared_data), limit=200, out=str(out), metric="rouge_f1", n_trees=10
    )
    assert not [k for k in _keys(figures) if "paper" in k]
    assert figures["split"]["paragraphs_shared"] == 0 and figures["split"]["unit"] == "paragraph"
    assert (figures["n_train"], figures["n_eval"]) == (140, 60)
    for key in ("baselines", "best_single_feature", "output_nll", "forest_without_perturbed", "calibration"):
        assert key in figures
    assert json.loads((out / "figures.json").read_text()) == json.loads(json.dumps(figures))
    items = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert len(items) == 60 and {"target", "correct", "estimate", "probability", "paragraph"} <= set(items[0])
    assert sum(i["correct"] for i in items) == figures["split"]["eval_positives"]
    train = [json.loads(line) for line in (out / "train_cv.jsonl").read_text().splitlines()]
    assert len(train) == 140 and {t["fold"] for t in train} == set(range(5))
    for k in range(5):  # a paragraph's questions share a fold
        assert not {t["paragraph"] for t in train if t["fold"] == k} & {
            t["paragraph"] for t in train if t["fold"] != k
        }
    pytest.importorskip("matplotlib")
    assert figures["reliability_plot"] == "reliability.png"
    assert (out / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tables_script_prints_the_report(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse
    import importlib.util

    from ragsense.models import load_model

    monkeypatch.setattr(module, "FeatureExtractor", lambda *a, **k: _StubExtractor({"stub": True}))
    monkeypatch.setattr(module, "_features", _stub_features)
    monkeypatch.setattr(module, "BOOTSTRAP", 100)
    figures = module.correctness_squad(
        load_model("fake"), _squad(shared_data), limit=100, out=str(tmp_path), metric="rouge_f1", n_trees=5
    )
    script = Path(__file__).resolve().parents[2] / "papers" / "correctness" / "correctness_tables.py"
    spec = importlib.util.spec_from_file_location("correctness_tables", script)
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    tables.report(argparse.Namespace(report=str(tmp_path)))
    text = capsys.readouterr().out
    assert (
        "| always incorrect | 0.5 | " + f"{figures['baselines']['always_incorrect']['accuracy']:.3f}" in text
    )
    assert f"**{figures['forest']['auroc']:.3f}**" in text
    assert "Platt-scaled" in text and "paragraphs shared" in text and "paper" not in text
