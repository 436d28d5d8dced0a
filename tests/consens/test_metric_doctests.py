"""The docstring examples of each method's metric, the one-row ``ragsense.grounding`` and the package's
front page run (they show ``evaluate`` as the way in)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "ragsense",
        "ragsense._grounding",
        "ragsense.consens",
        "ragsense.consens._metric",
        "ragsense.consens._select",
        "ragsense.experiments._distractors",
        "ragsense.correctness",
        "ragsense.similarity",
        "ragsense.similarity._metric",
        "ragsense.vera._metric",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0
