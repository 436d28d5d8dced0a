"""Plain-text tables for the terminal (no dependency), and the escaping of text printed to one."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["echo", "render_table", "shorten", "terminal_safe"]

# Bidirectional embeddings, overrides and isolates: they reorder what a terminal shows ("Trojan
# Source"), so they are escaped like control characters.
_BIDI = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    r"""``text`` with every control character escaped as Python's ``repr`` writes it (``\x1b``,
    ``\t``, ``\x9b``, ``\u202e``): C0 and C1 controls, DEL, ESC and bidirectional overrides.

    Ids, tags, questions and error messages come from users' files and models; printed raw, an escape
    sequence in one would drive the terminal (move the cursor, rewrite lines, set the title).
    ``keep_newlines``: leave ``\n`` as a line break (for multi-line text ragsense itself composed).

    >>> terminal_safe("id\x1b[2J\x9b!"), terminal_safe("a\nb", keep_newlines=True)
    ('id\\x1b[2J\\x9b!', 'a\nb')
    """
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char == "\n" and keep_newlines:
            out.append(char)
        elif code < 0x20 or 0x7F <= code <= 0x9F or code in _BIDI:
            out.append(char.encode("unicode_escape").decode("ascii"))  # as repr() writes it
        else:
            out.append(char)
    return "".join(out)


def echo(*lines: str, file: TextIO | None = None, keep_newlines: bool = False) -> None:
    r"""Print ``lines`` to the terminal (stderr unless ``file``), one per line, each escaped with
    :func:`terminal_safe`: the one way the command line writes text that may hold a user's input
    (error messages, notes, row errors, summaries). ``keep_newlines`` as in :func:`terminal_safe`, for
    multi-line text ragsense composed; else a line break inside a line is escaped too, so input cannot
    forge a line of its own.

    >>> import io; out = io.StringIO()
    >>> echo("ragsense: error: span \x1b]0;PWNED\x07", "a\nb", file=out); print(out.getvalue(), end="")
    ragsense: error: span \x1b]0;PWNED\x07
    a\nb
    """
    text = "\n".join(terminal_safe(line, keep_newlines=keep_newlines) for line in lines)
    print(text, file=sys.stderr if file is None else file)


def shorten(text: str, width: int) -> str:
    r"""One line of at most ``width`` characters, ending in an ellipsis when cut; control characters
    escaped (:func:`terminal_safe`).

    >>> shorten("a long sentence here", 10), shorten("evil\x1b]0;pwned\x07", 20)
    ('a long se…', 'evil\\x1b]0;pwned\\x07')
    """
    flat = terminal_safe(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int]) -> str:
    """Left-aligned columns of the given widths, with a rule under the header.

    >>> print(render_table(["a", "b"], [["x", "y"]], [3, 3]))
    a    b
    ---  ---
    x    y
    """

    def line(cells: Sequence[str]) -> str:
        return "  ".join(shorten(c, w).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)
