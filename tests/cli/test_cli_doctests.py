"""The doctests of the modules behind ``calibrate`` and ``--bands`` (the docstrings' examples run);
``ragsense.consens._shown`` writes the bands ``runs show`` prints."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "ragsense.cli._calibrate",
        "ragsense.consens._shown",
        "ragsense.report._summary",
        "ragsense.evaluation._registry",
        "ragsense.evaluation._api",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0
