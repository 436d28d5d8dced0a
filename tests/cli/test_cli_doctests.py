"""The doctests of the modules behind ``calibrate`` and ``--bands`` (the docstrings' examples run)."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "ragsense.cli._calibrate",
        "ragsense.cli._runs",
        "ragsense.report._summary",
        "ragsense.evaluation._registry",
        "ragsense.evaluation._api",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0


def test_the_python_example_of_docs_calibrate_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(__file__).parents[2] / "docs" / "calibrate.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(tmp_path)  # it writes my-bands.json
    exec(compile(example, "docs/calibrate.md", "exec"), {})
    assert (tmp_path / "my-bands.json").is_file()
