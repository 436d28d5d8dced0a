"""Plain-text tables for the terminal (no dependency)."""

from __future__ import annotations

from collections.abc import Sequence


def shorten(text: str, width: int) -> str:
    """One line of at most ``width`` characters, ending in an ellipsis when cut.

    >>> shorten("a long sentence here", 10)
    'a long se…'
    """
    flat = " ".join(text.split())
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
