"""docs/results.md opens with one screen of headline figures (issue 48): every figure, interval and
command in that table is copied from the details below it, and every link lands on a heading, so the
summary cannot drift from the evidence it points to."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).parents[2] / "docs" / "results.md"
NUMBER = re.compile(r"[+-]?\d+\.\d+%?|\[[+-]?\d+\.\d+, [+-]?\d+\.\d+\]|\d+ of \d+")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _flat(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def headline_and_rest() -> tuple[list[list[str]], str]:
    text = RESULTS.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| question |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[start + 2 : end]]
    return rows, "\n".join(lines[end:])


def test_the_headline_table_is_on_the_first_screen() -> None:
    lines = RESULTS.read_text(encoding="utf-8").splitlines()
    assert next(i for i, line in enumerate(lines) if line.startswith("| question |")) < 10


def test_every_headline_figure_and_command_is_in_the_details() -> None:
    rows, rest = headline_and_rest()
    assert len(rows) >= 8
    details = _flat(rest)
    for question, figure, baseline, command, _ in rows:
        for cell in (figure, baseline):
            for number in NUMBER.findall(cell):
                assert number in details, (question, number)
        if command != "the same":
            assert _flat(command.strip("`")) in details, question


def test_every_headline_link_lands_on_a_heading() -> None:
    rows, rest = headline_and_rest()
    anchors = {_slug(line.lstrip("#")) for line in rest.splitlines() if line.startswith("#")}
    for row in rows:
        for anchor in re.findall(r"\]\(#([^)]+)\)", row[-1]):
            assert anchor in anchors, anchor
