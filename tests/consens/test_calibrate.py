"""Fitting verdict bands on labelled scores (``ragsense.consens.calibrate_bands``): known answers on
synthetic scores, the refusals, and the bands file the fit writes."""

from __future__ import annotations

import doctest
import importlib
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from ragsense.consens import Bands, calibrate_bands, grounded_edge, stratified_folds, ungrounded_edge
from ragsense.errors import ParameterError


def separated(n: int = 100, seed: int = 7) -> tuple[list[float], list[int]]:
    """Label-1 scores uniform in [0.2, 1], label-0 scores uniform in [-1, 0.1]: at precision 1 the
    grounded edge must fall in (0.1, 0.2] and the ungrounded edge in [0.1, 0.2)."""
    rng = random.Random(seed)
    ones = [rng.uniform(0.2, 1.0) for _ in range(n)]
    zeros = [rng.uniform(-1.0, 0.1) for _ in range(n)]
    return ones + zeros, [1] * n + [0] * n


def overlapping(n: int = 200, seed: int = 3) -> tuple[list[float], list[int]]:
    """Label-1 scores uniform in [-0.2, 1], label-0 uniform in [-1, 0.2]: only the middle is mixed."""
    rng = random.Random(seed)
    ones = [rng.uniform(-0.2, 1.0) for _ in range(n)]
    zeros = [rng.uniform(-1.0, 0.2) for _ in range(n)]
    return ones + zeros, [1] * n + [0] * n


def test_separated_classes_give_the_known_edges_at_precision_one() -> None:
    scores, labels = separated()
    bands = calibrate_bands(scores, labels, score="q25", target_precision=1.0)
    assert 0.1 < bands.grounded_at <= 0.2
    assert 0.1 < bands.ungrounded_below <= 0.2  # an edge may sit on the lowest grounded score
    fit = bands.fit
    for side in ("grounded", "ungrounded"):
        assert fit[side]["calls"] is True
        assert fit[side]["in_sample"]["precision"] == 1.0
        assert fit[side]["in_sample"]["coverage"] == 0.5  # every row of its class, half of all rows
        # Edges fitted on four folds still separate the held fold: the classes do not overlap.
        assert fit[side]["cross_validated"]["precision"] == 1.0
        assert fit[side]["cross_validated"]["called"] == 100
        lo, hi = fit[side]["cross_validated"]["precision_ci95"]
        assert 0.95 < lo < 1.0 and hi == 1.0
    assert (fit["n"], fit["label_1"], fit["label_0"], fit["folds"], fit["clipped"]) == (
        200,
        100,
        100,
        5,
        False,
    )


def test_a_lower_target_calls_more_rows_and_keeps_its_precision() -> None:
    scores, labels = overlapping()
    strict = calibrate_bands(scores, labels, score="q25", target_precision=0.99)
    loose = calibrate_bands(scores, labels, score="q25", target_precision=0.8)
    assert loose.grounded_at < strict.grounded_at and loose.ungrounded_below > strict.ungrounded_below
    for bands, target in ((strict, 0.99), (loose, 0.8)):
        for side in ("grounded", "ungrounded"):
            assert bands.fit[side]["in_sample"]["precision"] >= target
    # With classes mixed only in [-0.2, 0.2], a precision-1 edge lies at or above the top label-0 score.
    top_zero = max(s for s, y in zip(scores, labels, strict=True) if y == 0)
    assert strict.grounded_at > top_zero - 0.05


def test_the_edge_is_the_smallest_one_that_reaches_the_target() -> None:
    # 4 of 5 at or above 0.3 are label 1 (precision 0.8); moving the edge down adds a label 0.
    scores = [0.0, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7]
    labels = [1, 0, 0, 1, 1, 1, 1]
    edge = grounded_edge(scores, labels, 0.8, min_called=3)
    assert edge == pytest.approx(0.2)
    assert grounded_edge(scores, labels, 1.0, min_called=3) == pytest.approx(0.35)
    assert grounded_edge(scores, labels, 1.0, min_called=5) is None  # 4 clean rows are too few
    assert ungrounded_edge(scores, labels, 1.0, min_called=1) is None  # the lowest row is label 1


def test_a_side_that_never_reaches_the_target_calls_nothing() -> None:
    # Labels alternate up the scores, a label 1 lowest and a label 0 highest: every run of rows at
    # either end is mixed, so no edge reaches precision 1.
    scores = [-0.9 + k * 0.02 for k in range(80)]
    labels = [(k + 1) % 2 for k in range(80)]
    bands = calibrate_bands(scores, labels, score="q25", target_precision=1.0)
    assert bands.fit["grounded"]["calls"] is False and bands.fit["ungrounded"]["calls"] is False
    assert all(bands.verdict(s) == "unsure" for s in [*scores, -1.0, 1.0])
    g = bands.fit["grounded"]["in_sample"]
    assert g["called"] == 0 and g["precision"] is None and g["coverage"] == 0.0
    json.dumps(bands.to_dict(), allow_nan=False)  # never NaN, even with nothing called


def test_crossing_edges_are_clipped() -> None:
    scores, labels = overlapping()
    bands = calibrate_bands(scores, labels, score="q25", target_precision=0.5)
    assert bands.fit["clipped"] is True
    assert bands.ungrounded_below == bands.grounded_at


def test_refusal_counts_and_origin_are_recorded_and_the_file_round_trips(tmp_path: Path) -> None:
    scores, labels = separated(30)
    bands = calibrate_bands(scores, labels, score="geometric", refusals=4, origin="x.jsonl (64 rows)")
    path = tmp_path / "bands.json"
    bands.save(path)
    back = Bands.load(path)
    assert back == bands
    assert back.score == "geometric" and back.origin == "x.jsonl (64 rows)"
    assert back.fit["refusals_left_out"] == 4


def test_the_fit_is_deterministic() -> None:
    scores, labels = overlapping()
    first = calibrate_bands(scores, labels, score="q25")
    assert calibrate_bands(scores, labels, score="q25").to_dict() == first.to_dict()
    assert stratified_folds(labels, 5) == stratified_folds(labels, 5)


def test_folds_are_stratified() -> None:
    labels = [1] * 50 + [0] * 25
    folds = stratified_folds(labels, 5)
    for f in range(5):
        held = [y for y, k in zip(labels, folds, strict=True) if k == f]
        assert (sum(held), len(held) - sum(held)) == (10, 5)


@pytest.mark.parametrize(
    ("scores", "labels", "options", "parameter", "words"),
    [
        ([0.5] * 19 + [-0.5] * 40, [1] * 19 + [0] * 40, {}, "min_per_class", "19 grounded"),
        ([0.5] * 40 + [-0.5] * 3, [1] * 40 + [0] * 3, {"min_per_class": 2, "folds": 5}, "folds", "3"),
        ([0.5, -0.5], [1, 2], {"min_per_class": 1}, "labels", "label 1 is 2"),
        ([0.5, math.nan], [1, 0], {"min_per_class": 1}, "scores", "nan"),
        ([0.5, 0.6, -0.5, -0.6], [1, 1, 0, 0], {"min_per_class": 1, "folds": 1}, "folds", "between 2"),
        ([0.5, -0.5], [1, 0], {"min_per_class": 1}, "folds", "at least 2 rows of each class"),
        (
            [0.5] * 20 + [-0.5] * 20,
            [1] * 20 + [0] * 20,
            {"target_precision": 0.0},
            "target_precision",
            "(0, 1]",
        ),
    ],
)
def test_unusable_input_is_refused_naming_the_parameter(
    scores: list[float], labels: list[int], options: dict[str, Any], parameter: str, words: str
) -> None:
    with pytest.raises(ParameterError) as caught:
        calibrate_bands(scores, labels, score="q25", **options)
    assert caught.value.parameter == parameter and words in str(caught.value)


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module("ragsense.consens._calibrate"))
    assert result.attempted >= 5 and result.failed == 0


def test_bands_save_refuses_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    from ragsense.errors import OutputExistsError

    path = tmp_path / "bands.json"
    first = Bands("support", grounded_at=0.8, ungrounded_below=-0.2)
    first.save(path)
    with pytest.raises(OutputExistsError, match="overwrite=True"):
        Bands("support", grounded_at=0.9, ungrounded_below=-0.1).save(path)
    assert Bands.load(path) == first  # the refused save left the file as it was
    Bands("support", grounded_at=0.9, ungrounded_below=-0.1).save(path, overwrite=True)
    assert Bands.load(path).grounded_at == 0.9
