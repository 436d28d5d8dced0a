"""Every link from one page of the docs to another lands on a file that exists, and every page the
docs name by path (``docs/cli.md``) exists (issue 48: docs/calibrate.md pointed to a docs/cli.md that
was not there)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
NAMED = re.compile(r"(?<![\w/.])(docs/[\w-]+\.md)\b")


def test_every_link_between_pages_resolves() -> None:
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in PAGES
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).is_file()
    ]
    assert broken == []


def test_every_page_named_by_path_exists() -> None:
    missing = [
        f"{page.relative_to(ROOT)} names {name}"
        for page in PAGES
        for name in NAMED.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / name).is_file()
    ]
    assert missing == []
