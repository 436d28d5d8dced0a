"""The rendered page is byte for byte what it was before its style, script and markup moved out of
Python strings into ``ragsense/report/assets/`` (tests/report/make_page_fixture.py wrote the expected
pages with the code of the time; regenerate them only when the page is meant to change)."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from ragsense._version import __version__
from ragsense.report._page import ASSETS, SCRIPT_PARTS, asset

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


def test_every_asset_goes_into_the_page(pages: dict[str, str]) -> None:
    """The assets are the template, the style and the script's parts, and each reaches the page
    (without its opening comment, which is for the file's readers)."""
    shipped = sorted(p.name for p in resources.files("ragsense.report").joinpath(ASSETS).iterdir())
    assert shipped == sorted(["page.html", "style.css", *SCRIPT_PARTS])
    page = pages["single"]
    for name in ("style.css", *SCRIPT_PARTS):
        assert asset(name) in page
        raw = resources.files("ragsense.report").joinpath(ASSETS).joinpath(name).read_text(encoding="utf-8")
        opening = raw[: raw.index("*/\n") + 3]
        assert raw.startswith("/*") and opening not in page
    fields = re.findall(r"\{\{(\w*)\}\}", asset("page.html"))
    assert sorted(fields) == ["csp", "data", "meta", "script", "style", "title", "version"]
