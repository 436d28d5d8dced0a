"""Read a report page's embedded data back in Python (what the page's script decodes)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from typing import Any

BLOB = re.compile(
    r'<script type="[^"]+" id="(ragsense-[a-z]+)"(?: data-encoding="([a-z0-9-]+)")?>(.*?)</script>', re.S
)


def _strict(token: str) -> Any:
    raise ValueError(f"non-standard JSON constant {token}")


def page_data(html: str) -> dict[str, Any]:
    """Each embedded block by id (``meta``, ``rows``, ``docs``, ``ctx``), decoded; NaN or Infinity
    anywhere raises."""
    out: dict[str, Any] = {}
    for name, encoding, text in BLOB.findall(html):
        if encoding == "gzip-base64":
            text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
        out[name.removeprefix("ragsense-")] = json.loads(text, parse_constant=_strict)
    return out


def words_of(view: dict[str, Any], scale: int = 1000) -> list[tuple[str, float, float]]:
    """A view's scored words as ``(text, nll_context, nll_empty)``, sliced from its answer by code point."""
    out, position, flat = [], 0, view.get("w", [])
    for k in range(0, len(flat), 4):
        start = position + flat[k]
        end = start + flat[k + 1]
        out.append((view["a"][start:end], flat[k + 2] / scale, flat[k + 3] / scale))
        position = end
    return out
