"""render_table and shorten: fixed-width, left-aligned, one line per cell."""

from __future__ import annotations

import doctest
import importlib

import pytest

from ragsense.tables import render_table, shorten


def test_shorten_keeps_short_text_and_flattens_whitespace() -> None:
    assert shorten("  a\n b\tc ", 10) == "a b c"
    assert shorten("abcdef", 6) == "abcdef"
    assert shorten("abcdefg", 6) == "abcde…"


def test_render_table_pads_cuts_and_rules() -> None:
    table = render_table(["name", "score"], [["a very long name", "0.5"], ["b", ""]], [6, 5])
    assert table.splitlines() == [
        "name    score",
        "------  -----",
        "a ver…  0.5",
        "b",
    ]


def test_render_table_without_rows_and_with_mismatched_widths() -> None:
    assert render_table(["x"], [], [2]) == "x\n--"
    with pytest.raises(ValueError):
        render_table(["a", "b"], [], [3])


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module("ragsense.tables"))
    assert result.attempted > 0
    assert result.failed == 0
