"""The page: one self-contained HTML file (inline style and script, data in ``<script>`` blocks).

Nothing is fetched: the page has no external reference, and its Content-Security-Policy allows only
its own inline style and script (by hash), so even a text that slipped through as markup could not
run or load anything. The data is embedded as JSON (``<`` written ``\\u003c``, so no ``</script>`` or
``<!--`` can appear in it) or as gzip + base64 that the browser's ``DecompressionStream`` inflates.

The markup, style and script are files in ``assets/`` (package data, linted by Biome: biome.jsonc),
read once per process and inlined here, so the page stays one file that opens offline.

>>> page = assemble(title="t <b>", meta={"a": "</script><!--"}, blobs=[("ragsense-rows", "e30=", "json")])
>>> "</script><!--" in page, "\\\\u003c/script\\\\u003e\\\\u003c!--" in page, "t &lt;b&gt;" in page
(False, True, True)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

ASSETS = "assets"
"""The page's files, package data of :mod:`ragsense.report` (``assets/``): ``page.html``, ``style.css``
and the script in three parts, joined in :data:`SCRIPT_PARTS`'s order."""
SCRIPT_PARTS = ("row.js", "summary.js", "main.js")
_FIELD = re.compile(r"\{\{(\w+)\}\}")


@functools.cache
def asset(name: str) -> str:
    """The text of ``assets/<name>`` as it goes into the page: without the comment the file opens with
    (``/* ... */`` or ``<!-- ... -->``), which is for its readers, not the page's.

    >>> asset("style.css").startswith(":root {"), asset("page.html").startswith("<!DOCTYPE html>")
    (True, True)
    """
    # Read once per process: the files do not change while it runs, and a report is rendered several
    # times over while the size policy fits it (ragsense.report._fit).
    text = resources.files("ragsense.report").joinpath(ASSETS).joinpath(name).read_text(encoding="utf-8")
    for opening, closing in (("/*", "*/\n"), ("<!--", "-->\n")):
        if text.startswith(opening):
            text = text[text.index(closing) + len(closing) :]
    return text


def style() -> str:
    """The text of the page's ``<style>`` element (on its own lines, as the CSP hash covers it)."""
    return "\n" + asset("style.css")


def script() -> str:
    """The page's script: the parts in one strict-mode function, so their names stay out of
    ``window`` (the script is one scope split into files; the linter checks it joined, scripts/test.sh).
    """
    return "(() => {\n'use strict';\n" + "".join("\n" + asset(p) for p in SCRIPT_PARTS) + "\n})();\n"


def json_for_script(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` are
    written as ``\\u`` escapes (so neither ``</script>`` nor ``<!--`` can occur), and so are U+2028
    and U+2029. Never NaN (``allow_nan=False``).

    >>> json_for_script({"x": "</script><!-- & \\u2028"})
    '{"x":"\\\\u003c/script\\\\u003e\\\\u003c!-- \\\\u0026 \\\\u2028"}'
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def assemble(*, title: str, meta: Any, blobs: Sequence[tuple[str, str, str]], version: str = "") -> str:
    """The HTML page: ``meta`` as JSON, each blob ``(id, text, encoding)`` (``json`` text from
    :func:`json_for_script`, or ``gzip-base64``), the inline style and script, and a
    Content-Security-Policy that allows nothing else."""
    inline_style, inline_script = style(), script()
    csp = (
        f"default-src 'none'; script-src {_csp_hash(inline_script)}; style-src {_csp_hash(inline_style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    data = []
    for name, text, encoding in blobs:
        if encoding not in ("json", "gzip-base64"):
            raise ValueError(f"unknown encoding {encoding!r}")
        mime = "application/json" if encoding == "json" else "application/octet-stream"
        if not name.replace("-", "").isalnum():
            raise ValueError(f"bad blob id {name!r}")
        data += [f'<script type="{mime}" id="{name}" data-encoding="{encoding}">', text, "</script>\n"]
    fields = {
        "csp": html.escape(csp),
        "version": html.escape(version),
        "title": html.escape(title),
        "style": inline_style,
        "meta": json_for_script(meta),
        "data": "".join(data),
        "script": inline_script,
    }
    # One pass over the template: a field's value is never searched for fields itself (the data could
    # hold "{{...}}").
    return _FIELD.sub(lambda m: fields[m[1]], asset("page.html"))
