"""Finding the runnable examples of the documentation: fenced blocks and their ``docs-test`` markers.

A block is a fenced ```` ```bash ````, ``sh``, ``shell``, ``console`` or ``python`` block of README.md or
docs/*.md (docs/results/ holds generated outputs, not pages). The line right above its fence (blank
lines between are allowed) may hold one marker that tells the harness how to run it::

    <!-- docs-test: skip (needs a GPU) -->          not run; the reason is required
    <!-- docs-test: model=fake -->                  bundled model names become the fake model
    <!-- docs-test: model=fake; exit-ok=4 -->       ... and a command may exit 4 (a failed gate)
    <!-- docs-test: slow (the real model: minutes) -->  runs only with ``-m slow``; the reason is required
    <!-- docs-test: server -->                      the first command is a server: run in the background
    <!-- docs-test: needs=haystack -->              runs only where these modules are installed (an
                                                    optional framework; its tests skip the same way)

Directives are separated by ``;``. An unknown directive, a skip without a reason, or a marker with no
runnable block under it is a :class:`MarkerError`, so a typo cannot silently turn a test off.

>>> text = "<!-- docs-test: model=fake -->\\n```bash\\nragsense models\\n```\\n"
>>> [block] = blocks_of_text(text, "X.md")
>>> block.line, block.language, block.code, block.fake_model, block.skip
(3, 'bash', 'ragsense models\\n', True, None)
>>> try:
...     blocks_of_text("<!-- docs-test: fast -->\\n```bash\\nls\\n```\\n", "X.md")
... except MarkerError as error:
...     print(error)
X.md:1: unknown docs-test directive 'fast' (known: skip (REASON), slow (REASON), model=fake, ...)
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
RUNNABLE_LANGUAGES = SHELL_LANGUAGES | {"python"}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_MARKER = re.compile(r"^\s*<!--\s*docs-test:(?P<body>.*?)-->\s*$")
_SKIP = re.compile(r"^skip\s*\((?P<reason>.*)\)$")
_EXIT_OK = re.compile(r"^exit-ok=(?P<codes>\d+(?:,\d+)*)$")
_SLOW = re.compile(r"^slow\s*\((?P<reason>.*)\)$")
_NEEDS = re.compile(r"^needs=(?P<modules>[\w.]+(?:,[\w.]+)*)$")
_KNOWN = "skip (REASON), slow (REASON), model=fake, exit-ok=N[,N], server, needs=MODULE[,MODULE]"


class MarkerError(ValueError):
    """A ``docs-test`` marker the harness does not understand, or one with no block to apply to."""


@dataclass(frozen=True)
class Block:
    """One runnable fenced block: where it is, its code, and what its marker asks."""

    page: str  # the page, relative to the repository root
    line: int  # the line of the first code line (1-based), for messages and tracebacks
    language: str
    code: str
    skip: str | None = None  # the reason, when the marker says skip
    slow: str | None = None  # the reason, when the block runs only with -m slow
    fake_model: bool = False
    exit_ok: tuple[int, ...] = ()
    server: bool = False  # the first command serves (--port N) while the others run
    needs: tuple[str, ...] = ()  # modules the block imports that an extra installs

    @property
    def missing(self) -> list[str]:
        """The modules of ``needs`` that are not installed here (the block is then skipped)."""
        return [m for m in self.needs if importlib.util.find_spec(m.split(".")[0]) is None]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    """README.md and docs/*.md (not docs/results/, whose files are experiment outputs)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def page_name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def parse_marker(body: str, where: str) -> dict[str, object]:
    """The directives of one marker's body (the text between ``docs-test:`` and ``-->``)."""
    found: dict[str, object] = {}
    for raw in re.split(r";(?![^(]*\))", body):  # a ";" inside a skip's reason does not split
        directive = raw.strip()
        skip = _SKIP.match(directive) or _SLOW.match(directive)
        exit_ok = _EXIT_OK.match(directive)
        if skip:
            kind = directive.split("(")[0].strip()
            if not skip["reason"].strip():
                raise MarkerError(f"{where}: a {kind} needs a reason: {kind} (why)")
            found[kind] = skip["reason"].strip()
        elif directive == "model=fake":
            found["fake_model"] = True
        elif directive == "server":
            found["server"] = True
        elif needs := _NEEDS.match(directive):
            found["needs"] = tuple(needs["modules"].split(","))
        elif exit_ok:
            found["exit_ok"] = tuple(int(code) for code in exit_ok["codes"].split(","))
        else:
            raise MarkerError(f"{where}: unknown docs-test directive {directive!r} (known: {_KNOWN})")
    return found


def blocks_of_text(text: str, page: str) -> list[Block]:
    """Every runnable block of a page's text, in order, with its marker applied."""
    blocks: list[Block] = []
    lines = text.splitlines()
    pending: tuple[int, dict[str, object]] | None = None  # a marker waiting for its block
    number = 0
    while number < len(lines):
        line = lines[number]
        marker = _MARKER.match(line)
        fence = _FENCE.match(line)
        if marker:
            if pending is not None:
                raise MarkerError(f"{page}:{pending[0]}: docs-test marker with no code block under it")
            pending = (number + 1, parse_marker(marker["body"], f"{page}:{number + 1}"))
        elif fence:
            close = fence["fence"]
            end = number + 1
            while end < len(lines) and not lines[end].lstrip().startswith(close):
                end += 1
            language = fence["info"].lower()
            if language in RUNNABLE_LANGUAGES:
                options = pending[1] if pending else {}
                code = "\n".join(lines[number + 1 : end]) + "\n"
                blocks.append(Block(page, number + 2, language, code, **options))  # type: ignore[arg-type]
            elif pending is not None:
                raise MarkerError(
                    f"{page}:{pending[0]}: docs-test marker above a {language or 'plain'} block"
                )
            pending = None
            number = end
        elif pending is not None and line.strip():
            raise MarkerError(f"{page}:{pending[0]}: docs-test marker with no code block under it")
        number += 1
    if pending is not None:
        raise MarkerError(f"{page}:{pending[0]}: docs-test marker with no code block under it")
    return blocks


def page_blocks(path: Path) -> list[Block]:
    return blocks_of_text(path.read_text(encoding="utf-8"), page_name(path))
