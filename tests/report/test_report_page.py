"""The rendered page is byte for byte what it was before its style, script and markup moved out of
Python strings into ``ragsense/report/assets/`` (tests/report/make_page_fixture.py wrote the expected
pages with the code of the time; regenerate them only when the page is meant to change)."""

from __future__ import annotations

import json

import pytest

from ragsense._version import __version__

from .make_page_fixture import INPUT, PAGES, VERSION, render_pages, with_version


def first_difference(got: str, expected: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
    if at is None:
        return f"one page is a prefix of the other ({len(got)} vs {len(expected)} characters)"
    lo, hi = max(0, at - 60), at + 60
    return f"first difference at {at}: got {got[lo:hi]!r}, expected {expected[lo:hi]!r}"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return render_pages(json.loads(INPUT.read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_is_unchanged(pages: dict[str, str], name: str) -> None:
    got = with_version(pages[name], __version__, VERSION)
    expected = PAGES[name].read_bytes().decode("utf-8")
    assert got == expected, first_difference(got, expected)


def test_the_fixture_pages_hold_the_runs() -> None:
    """The expected pages are real reports (a guard against an emptied fixture)."""
    single, comparison = (PAGES[n].read_bytes().decode("utf-8") for n in ("single", "comparison"))
    assert single.startswith("<!DOCTYPE html>") and single.endswith("</html>\n")
    assert single.count("<script") == 5 and single.count("<style>") == 1
    assert "bbbb33334444" in comparison and "bbbb33334444" not in single
    assert "xss-row" in single and "<script>window.__xss" not in single
