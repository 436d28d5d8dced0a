"""Fit verdict bands on labelled scores: the arithmetic behind ``ragsense calibrate`` (no model here).

Each side of the bands is fitted for precision, not for accuracy, because a verdict is acted on:

* ``grounded_at`` is the smallest edge at which the rows scoring at or above it are label 1 with
  precision at least ``target_precision`` (the smallest such edge calls the most rows grounded);
* ``ungrounded_below`` is the largest edge at which the rows scoring below it are label 0 with that
  precision;
* rows between the two are ``unsure``. Where the two edges would cross, ``ungrounded_below`` is
  clipped down to ``grounded_at`` (a score at or above ``grounded_at`` is ``grounded`` whatever the
  other edge says, so the clip changes nothing the verdict did, it only makes the bands valid);
* a side that reaches the target at no edge calls nothing: its edge is put beyond every score the
  aggregation can give.

Edges sit between two neighbouring observed scores, so a new score equal to an observed one falls
where that observed score did and the edge does not hug one sample: at their midpoint, rounded to the
fewest decimals that keep it strictly between them (:func:`between`), so that an edge shown at every
digit it has (``+0.4``, not ``+0.40000000000000002``) is short.

The in-sample precision of a fitted edge is optimistic (the edge was chosen on those rows), so the
fit also reports cross-validated figures: stratified folds with a fixed seed, the edges fitted on the
other folds and applied to the held one, the counts pooled over folds. Each proportion carries a
Wilson 95% interval. Everything lands in :attr:`Bands.fit`, so a bands file carries its own evidence.

>>> scores = [-0.9, -0.6, -0.5, -0.3, -0.2, 0.3, 0.4, 0.6, 0.7, 0.9]
>>> labels = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
>>> b = calibrate_bands(scores, labels, score="q25", min_per_class=5, folds=5, min_called=2)
>>> b.grounded_at, b.ungrounded_below
(0.0, 0.0)
>>> b.fit["grounded"]["in_sample"]["precision"], b.fit["grounded"]["cross_validated"]["called"]
(1.0, 5)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ragsense.consens._verdicts import Bands
from ragsense.errors import ParameterError
from ragsense.stats import wilson_ci

SCORE_RANGE = (-1.0, 1.0)
"""Every ConSens aggregation lies in [-1, 1] (tanh of a log ratio, or a share in [0, 1]); a side that
calls nothing puts its edge outside this range, so no future score can fall on it either."""
DEFAULT_TARGET_PRECISION = 0.9
DEFAULT_FOLDS = 5
DEFAULT_MIN_PER_CLASS = 20
DEFAULT_MIN_CALLED = 5
"""An edge must call at least this many rows: one row at precision 1 is no evidence."""
SEED = 0
"""The fold assignment's seed: fixed, so the same rows always give the same bands file."""


def _sorted_pairs(scores: Sequence[float], labels: Sequence[int]) -> list[tuple[float, int]]:
    return sorted(zip(scores, labels, strict=True))


def _distinct(pairs: list[tuple[float, int]]) -> list[tuple[float, int, int]]:
    """(score, rows with it, label-1 rows with it) per distinct score, ascending."""
    out: list[tuple[float, int, int]] = []
    for score, label in pairs:
        if out and out[-1][0] == score:
            s, n, ones = out[-1]
            out[-1] = (s, n + 1, ones + label)
        else:
            out.append((score, 1, label))
    return out


def between(low: float, high: float) -> float:
    """The midpoint of ``low < high`` rounded to the fewest decimals that keep it strictly between them.

    >>> between(0.1, 0.2), between(0.31, 0.43), between(0.123456, 0.123457)
    (0.15, 0.4, 0.1234565)
    """
    middle = (low + high) / 2
    for digits in range(1, 17):
        edge = round(middle, digits)
        if low < edge < high:
            return edge
    return middle


def _reaches(correct: int, called: int, target: float) -> bool:
    # A tolerance, because 7 of 10 must reach a 0.7 target although 0.7 * 10 is 7.000000000000001.
    return correct >= target * called - 1e-9


def grounded_edge(
    scores: Sequence[float], labels: Sequence[int], target: float, min_called: int = DEFAULT_MIN_CALLED
) -> float | None:
    """The smallest edge whose rows at or above it are label 1 with precision >= ``target`` (at least
    ``min_called`` of them); None when no edge reaches it.

    >>> round(grounded_edge([0.1, 0.2, 0.5, 0.8], [0, 1, 1, 1], 1.0, min_called=2), 6)
    0.15
    >>> grounded_edge([0.1, 0.2], [1, 0], 1.0, min_called=1) is None
    True
    """
    levels = _distinct(_sorted_pairs(scores, labels))
    called = len(scores)
    correct = sum(labels)
    for i, (score, n, ones) in enumerate(levels):
        # Here the edge calls this level and every level above it.
        if called >= min_called and _reaches(correct, called, target):
            return score if i == 0 else between(levels[i - 1][0], score)
        called -= n
        correct -= ones
    return None


def ungrounded_edge(
    scores: Sequence[float], labels: Sequence[int], target: float, min_called: int = DEFAULT_MIN_CALLED
) -> float | None:
    """The largest edge whose rows below it are label 0 with precision >= ``target`` (at least
    ``min_called`` of them); None when no edge reaches it.

    >>> round(ungrounded_edge([-0.5, -0.1, 0.3, 0.4], [0, 0, 1, 0], 1.0, min_called=2), 6)
    0.1
    """
    levels = _distinct(_sorted_pairs(scores, labels))
    called = len(scores)
    correct = called - sum(labels)
    for i in range(len(levels) - 1, -1, -1):
        # Here the edge calls this level and every level below it.
        score, n, ones = levels[i]
        if called >= min_called and _reaches(correct, called, target):
            last = i == len(levels) - 1
            return math.nextafter(score, math.inf) if last else between(score, levels[i + 1][0])
        called -= n
        correct -= n - ones
    return None


def supported_precision(
    scores: Sequence[float], labels: Sequence[int], side: str, min_called: int = DEFAULT_MIN_CALLED
) -> dict[str, Any] | None:
    """The highest in-sample precision any ``side`` (``grounded`` or ``ungrounded``) edge reaches while
    calling at least ``min_called`` rows: ``{"precision", "called", "correct"}``, None when no edge calls
    that many. A target at or below it finds an edge; what a side that calls nothing can say instead.

    >>> supported_precision([0.1, 0.2, 0.5, 0.8], [0, 1, 0, 1], "grounded", min_called=2)
    {'precision': 0.6666666666666666, 'called': 3, 'correct': 2}
    >>> supported_precision([0.1, 0.2, 0.5, 0.8], [0, 1, 1, 1], "ungrounded", min_called=2)
    {'precision': 0.5, 'called': 2, 'correct': 1}
    """
    levels = _distinct(_sorted_pairs(scores, labels))
    if side == "ungrounded":  # below an edge, counting label 0: the same walk from the other end
        levels = [(-s, n, n - ones) for s, n, ones in reversed(levels)]
    called, correct = len(scores), sum(y if side == "grounded" else 1 - y for y in labels)
    best: dict[str, Any] | None = None
    for _, n, ones in levels:
        if called >= min_called and (best is None or correct * best["called"] > best["correct"] * called):
            best = {"precision": correct / called, "called": called, "correct": correct}
        called -= n
        correct -= ones
    return best


def choose_folds(ones: int, zeros: int, folds: int | None = None) -> int:
    """``folds`` when given (it must be 2 to the smaller class's row count), else chosen from the data:
    :data:`DEFAULT_FOLDS`, or fewer when a class has fewer rows (every fold needs one of each).

    >>> choose_folds(40, 30), choose_folds(3, 12), choose_folds(3, 12, folds=3)
    (5, 3, 3)
    """
    smaller = min(ones, zeros)
    if smaller < 2:
        raise ParameterError(
            f"cross-validation needs at least 2 rows of each class; {ones} grounded and {zeros} not",
            parameter="folds",
        )
    if folds is None:
        return min(DEFAULT_FOLDS, smaller)
    if not 2 <= folds <= smaller:
        raise ParameterError(
            f"must be between 2 and the smaller class's row count ({smaller}), got {folds}; leave it out "
            "to choose the folds from the data",
            parameter="folds",
        )
    return folds


def _edges(
    scores: Sequence[float], labels: Sequence[int], target: float, min_called: int
) -> tuple[float, float, bool, bool, bool]:
    """(grounded_at, ungrounded_below, grounded calls, ungrounded calls, clipped)."""
    g = grounded_edge(scores, labels, target, min_called)
    u = ungrounded_edge(scores, labels, target, min_called)
    grounded_at = g if g is not None else math.nextafter(max(SCORE_RANGE[1], *scores), math.inf)
    ungrounded_below = u if u is not None else min(SCORE_RANGE[0], *scores)
    clipped = ungrounded_below > grounded_at
    return grounded_at, min(ungrounded_below, grounded_at), g is not None, u is not None, clipped


def _figures(called: int, correct: int, n: int) -> dict[str, Any]:
    """Precision (None when nothing is called: never NaN) and coverage, with Wilson 95% intervals."""
    return {
        "called": called,
        "correct": correct,
        "precision": correct / called if called else None,
        "precision_ci95": list(wilson_ci(correct, called)),
        "coverage": called / n,
        "coverage_ci95": list(wilson_ci(called, n)),
    }


def _counts(
    scores: Sequence[float], labels: Sequence[int], grounded_at: float, ungrounded_below: float
) -> tuple[int, int, int, int]:
    """(grounded called, of them label 1, ungrounded called, of them label 0)."""
    g = [y for s, y in zip(scores, labels, strict=True) if s >= grounded_at]
    u = [y for s, y in zip(scores, labels, strict=True) if s < ungrounded_below]
    return len(g), sum(g), len(u), len(u) - sum(u)


def stratified_folds(labels: Sequence[int], folds: int, seed: int = SEED) -> list[int]:
    """The fold of each row: each class shuffled with ``seed`` and dealt round the folds, so every
    fold holds about the same share of each class.

    >>> stratified_folds([1, 1, 0, 0, 1, 0], 3)
    [2, 1, 0, 2, 0, 1]
    """
    fold = [0] * len(labels)
    rng = random.Random(seed)
    for cls in (0, 1):
        members = [i for i, y in enumerate(labels) if y == cls]
        rng.shuffle(members)
        for k, i in enumerate(members):
            fold[i] = k % folds
    return fold


def check_classes(ones: int, zeros: int, min_per_class: int = DEFAULT_MIN_PER_CLASS) -> None:
    """Refuse a fit with fewer than ``min_per_class`` rows of label 1 or of label 0 (a caller that
    scores the rows first calls this on the labels alone, before any model is loaded).

    >>> check_classes(25, 20)
    >>> check_classes(25, 4, 5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: min_per_class: too few labelled rows to calibrate: 25 grounded ...
    """
    if min(ones, zeros) < min_per_class:
        raise ParameterError(
            f"too few labelled rows to calibrate: {ones} grounded (label 1) and {zeros} not (label 0); "
            f"each class needs at least {min_per_class}",
            parameter="min_per_class",
        )


def _check(
    scores: Sequence[float], labels: Sequence[int], target: float, folds: int | None, min_per_class: int
) -> tuple[int, int, int]:
    if len(scores) != len(labels):
        raise ParameterError(f"{len(scores)} scores but {len(labels)} labels", parameter="labels")
    bad = next((i for i, y in enumerate(labels) if y not in (0, 1) or isinstance(y, bool)), None)
    if bad is not None:
        raise ParameterError(f"label {bad} is {labels[bad]!r}; labels are 1 or 0", parameter="labels")
    bad = next((i for i, s in enumerate(scores) if not math.isfinite(s)), None)
    if bad is not None:
        raise ParameterError(f"score {bad} is {scores[bad]!r}; scores must be finite", parameter="scores")
    if not 0.0 < target <= 1.0:
        raise ParameterError(f"must be in (0, 1], got {target}", parameter="target_precision")
    ones = sum(labels)
    zeros = len(labels) - ones
    check_classes(ones, zeros, min_per_class)
    return ones, zeros, choose_folds(ones, zeros, folds)


def calibrate_bands(
    scores: Sequence[float],
    labels: Sequence[int],
    *,
    score: str,
    target_precision: float = DEFAULT_TARGET_PRECISION,
    folds: int | None = None,
    min_per_class: int = DEFAULT_MIN_PER_CLASS,
    min_called: int = DEFAULT_MIN_CALLED,
    seed: int = SEED,
    origin: str = "calibrated",
    refusals: int = 0,
) -> Bands:
    """:class:`Bands` for the ``score`` aggregation fitted on ``scores`` with ``labels`` (1 grounded,
    0 not), with their in-sample and cross-validated precision and coverage in ``fit``.

    ``folds``: cross-validation folds (default: chosen from the data, :func:`choose_folds`);
    ``min_called``: the fewest rows an edge may call. A side that reaches ``target_precision`` at no
    edge calls nothing; ``fit[side]["supported_precision"]`` then says what precision it can reach
    (:func:`supported_precision`). ``refusals``: how many refusal rows the caller left out (recorded,
    not used). Raises
    :class:`~ragsense.errors.ParameterError` when a class has fewer than ``min_per_class`` rows.

    >>> calibrate_bands([0.5] * 3 + [-0.5] * 30, [1] * 3 + [0] * 30, score="q25")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: min_per_class: too few labelled rows to calibrate: 3 grounded ...
    """
    if min_called < 1:
        raise ParameterError(f"must be at least 1, got {min_called}", parameter="min_called")
    ones, zeros, folds = _check(scores, labels, target_precision, folds, min_per_class)
    n = len(scores)
    grounded_at, ungrounded_below, g_calls, u_calls, clipped = _edges(
        scores, labels, target_precision, min_called
    )
    g_n, g_ok, u_n, u_ok = _counts(scores, labels, grounded_at, ungrounded_below)
    pooled = [0, 0, 0, 0]
    assignment = stratified_folds(labels, folds, seed)
    for f in range(folds):
        train = [i for i, k in enumerate(assignment) if k != f]
        held = [i for i, k in enumerate(assignment) if k == f]
        train_scores, train_labels = [scores[i] for i in train], [labels[i] for i in train]
        g, u, *_ = _edges(train_scores, train_labels, target_precision, min_called)
        counts = _counts([scores[i] for i in held], [labels[i] for i in held], g, u)
        pooled = [a + b for a, b in zip(pooled, counts, strict=True)]
    fit = {
        "method": "ragsense calibrate",
        "target_precision": target_precision,
        "n": n,
        "label_1": ones,
        "label_0": zeros,
        "refusals_left_out": refusals,
        "folds": folds,
        "seed": seed,
        "min_called": min_called,
        "clipped": clipped,
        "grounded": {
            "calls": g_calls,
            "supported_precision": supported_precision(scores, labels, "grounded", min_called),
            "in_sample": _figures(g_n, g_ok, n),
            "cross_validated": _figures(pooled[0], pooled[1], n),
        },
        "ungrounded": {
            "calls": u_calls,
            "supported_precision": supported_precision(scores, labels, "ungrounded", min_called),
            "in_sample": _figures(u_n, u_ok, n),
            "cross_validated": _figures(pooled[2], pooled[3], n),
        },
    }
    return Bands(score, grounded_at=grounded_at, ungrounded_below=ungrounded_below, origin=origin, fit=fit)
