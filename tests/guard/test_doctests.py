"""The guard modules' docstring examples run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "ragsense.guard",
    "ragsense.guard._auth",
    "ragsense.guard._batcher",
    "ragsense.guard._check",
    "ragsense.guard._client",
    "ragsense.guard._config",
    "ragsense.guard._limits",
    "ragsense.guard._metrics",
    "ragsense.guard._schema",
    "ragsense.guard._server",
    "ragsense._access",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
