"""The page: one self-contained HTML file (inline style and script, data in ``<script>`` blocks).

Nothing is fetched: the page has no external reference, and its Content-Security-Policy allows only
its own inline style and script (by hash), so even a text that slipped through as markup could not
run or load anything. The data is embedded as JSON (``<`` written ``\\u003c``, so no ``</script>`` or
``<!--`` can appear in it) or as gzip + base64 that the browser's ``DecompressionStream`` inflates.

>>> page = assemble(title="t <b>", meta={"a": "</script><!--"}, blobs=[("ragsense-rows", "e30=", "json")])
>>> "</script><!--" in page, "\\\\u003c/script\\\\u003e\\\\u003c!--" in page, "t &lt;b&gt;" in page
(False, True, True)
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from typing import Any

from ragsense.report._script import SCRIPT_MAIN
from ragsense.report._script_row import SCRIPT_ROW
from ragsense.report._script_summary import SCRIPT_SUMMARY

STYLE = """
:root {
  --ink: #16181d; --muted: #5b6270; --faint: #8a909c; --line: #e3e6eb; --bg: #f6f7f9; --card: #fff;
  --accent: #2456c7; --accent-soft: #e8eefb; --good: #177a3c; --good-soft: #e3f4e8; --warn: #a35a00;
  --warn-soft: #fdf0dc; --bad: #b42318; --bad-soft: #fde7e5; --mono: ui-monospace, SFMono-Regular,
  "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--ink); font: 14px/1.5 system-ui, -apple-system,
  "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif; }
code, .mono { font-family: var(--mono); font-size: 12.5px; }
h1 { font-size: 20px; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
h2 { font-size: 15px; margin: 0 0 12px; font-weight: 650; }
h3 { font-size: 13px; margin: 18px 0 8px; font-weight: 650; text-transform: uppercase;
  letter-spacing: 0.04em; color: var(--muted); }
h4 { font-size: 13.5px; margin: 14px 0 6px; font-weight: 650; }
button, select, input { font: inherit; color: inherit; }
.top { background: #11151c; color: #e9edf3; }
.top .wrap { display: flex; align-items: baseline; gap: 10px; padding-top: 10px; padding-bottom: 10px; }
.brand { font-weight: 700; letter-spacing: 0.02em; }
.top .sub { color: #aab3c2; }
.wrap { max-width: 1320px; margin: 0 auto; padding: 0 24px; }
main.wrap { padding-top: 20px; padding-bottom: 40px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px;
  margin-bottom: 18px; box-shadow: 0 1px 2px rgba(16, 24, 40, 0.04); }
.banner { border-radius: 10px; padding: 12px 16px; margin-bottom: 18px; border: 1px solid; }
.banner.warn { background: var(--warn-soft); border-color: #f1c889; color: #5c3400; }
.banner.bad { background: var(--bad-soft); border-color: #f3b1ab; color: #6e1610; }
.banner strong { font-weight: 650; }
.run-title { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; margin-bottom: 12px; }
.run-letter { display: inline-grid; place-items: center; width: 24px; height: 24px; border-radius: 6px;
  background: var(--accent); color: #fff; font-weight: 700; font-size: 13px; }
.run-letter.b { background: #7a3fc4; }
.pill { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 12px; font-weight: 600;
  background: #eef0f3; color: var(--muted); white-space: nowrap; }
.pill.complete { background: var(--good-soft); color: var(--good); }
.pill.incomplete, .pill.running { background: var(--bad-soft); color: var(--bad); }
.pill.tag { background: var(--accent-soft); color: var(--accent); }
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px;
  margin-bottom: 14px; }
.tile { background: #f9fafb; border: 1px solid var(--line); border-radius: 8px; padding: 7px 12px; }
.tile-k { font-size: 12px; color: var(--muted); }
.tile-v { font-size: 14.5px; font-weight: 600; font-variant-numeric: tabular-nums; }
p .verdicts { display: inline-flex; }
.score-grid { width: auto; min-width: 360px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line);
  vertical-align: baseline; }
.worst { display: flex; flex-wrap: wrap; gap: 6px; align-items: baseline; margin: 6px 0; }
.worst button { border: 1px solid var(--line); background: #fff; border-radius: 6px; padding: 1px 8px;
  cursor: pointer; font-size: 12.5px; }
.worst button:hover { background: var(--accent-soft); }
#rows-table td:nth-child(2) { white-space: nowrap; }
th { font-weight: 600; color: var(--muted); font-size: 12.5px; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.metrics-table { margin-top: 4px; }
.metrics-table td:first-child { font-weight: 600; }
.ci { color: var(--muted); font-size: 12.5px; }
.verdicts { display: flex; gap: 6px; flex-wrap: wrap; }
.v { display: inline-block; border-radius: 5px; padding: 0 7px; font-size: 12px; font-weight: 600;
  background: #eef0f3; color: #3d4350; white-space: nowrap; }
.v.grounded, .v.true { background: var(--good-soft); color: var(--good); }
.v.unsure, .v.refusal { background: var(--warn-soft); color: var(--warn); }
.v.ungrounded, .v.false { background: var(--bad-soft); color: var(--bad); }
.better { color: var(--good); }
.worse { color: var(--bad); }
details.settings { margin-top: 14px; }
details summary { cursor: pointer; color: var(--accent); font-weight: 600; }
.settings-grid { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 8px 0 0; }
.settings-grid dt { color: var(--muted); }
.settings-grid dd { margin: 0; overflow-wrap: anywhere; white-space: pre-wrap; font-family: var(--mono);
  font-size: 12px; }
.hists { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 14px; }
.hist { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px 8px; }
.hist-title { display: flex; justify-content: space-between; align-items: baseline; gap: 8px; }
.hist-title b { font-weight: 650; }
.hist-title span { text-align: right; font-size: 12px; }
.hist svg { display: block; width: 100%; height: auto; margin-top: 4px; }
.hist .bar { cursor: pointer; }
.hist .bar:hover { opacity: 0.75; }
.legend { display: flex; gap: 12px; flex-wrap: wrap; font-size: 12px; color: var(--muted); margin-top: 4px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
.filters { display: flex; flex-wrap: wrap; gap: 10px 14px; align-items: end; margin-bottom: 12px; }
.filters label { display: flex; flex-direction: column; gap: 3px; font-size: 12px; color: var(--muted);
  font-weight: 600; }
.filters input, .filters select { border: 1px solid #cfd4dc; border-radius: 6px; padding: 5px 8px;
  background: #fff; min-height: 32px; font-weight: 400; color: var(--ink); }
.filters input[type=search] { width: 240px; }
.filters input[type=number] { width: 88px; }
.btn { border: 1px solid #cfd4dc; background: #fff; border-radius: 6px; padding: 5px 12px;
  min-height: 32px; cursor: pointer; }
.btn:hover:not(:disabled) { background: #f1f3f6; }
.btn:disabled { color: var(--faint); cursor: default; }
.count { color: var(--muted); margin: 0 0 8px; }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 8px; }
#rows-table th { position: sticky; top: 0; background: #f9fafb; cursor: pointer; user-select: none; }
#rows-table th[aria-sort=ascending]::after { content: " ▲"; font-size: 10px; }
#rows-table th[aria-sort=descending]::after { content: " ▼"; font-size: 10px; }
#rows-table tbody tr { cursor: pointer; }
#rows-table tbody tr:nth-child(even) { background: #fbfbfc; }
#rows-table tbody tr:hover, #rows-table tbody tr:focus { background: var(--accent-soft); outline: none; }
#rows-table td.q { max-width: 460px; }
.clip { display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; overflow: hidden; }
.delta { display: block; font-size: 11.5px; }
.muted { color: var(--muted); }
.faint { color: var(--faint); }
.err-count { color: var(--bad); font-weight: 600; }
.pager { display: flex; gap: 8px; align-items: center; margin-top: 10px; flex-wrap: wrap; }
.pager .spacer { flex: 1; }
footer.policy { color: var(--muted); font-size: 12.5px; margin-top: 8px; }
footer.policy p { margin: 4px 0; }
#backdrop { position: fixed; inset: 0; background: rgba(17, 21, 28, 0.35); z-index: 10; }
#detail { position: fixed; top: 0; right: 0; bottom: 0; width: min(1000px, 100vw); background: #fff;
  z-index: 11; box-shadow: -8px 0 24px rgba(16, 24, 40, 0.18); display: flex; flex-direction: column; }
#detail[hidden], #backdrop[hidden] { display: none; }
.detail-head { display: flex; align-items: center; gap: 10px; padding: 12px 20px;
  border-bottom: 1px solid var(--line); }
.detail-head .title { flex: 1; min-width: 0; }
.detail-body { overflow-y: auto; padding: 6px 22px 40px; }
.text-block { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.65; }
.question { font-size: 15.5px; font-weight: 600; margin: 6px 0 2px; }
.answer { font-size: 15px; line-height: 1.9; padding: 12px 14px; border: 1px solid var(--line);
  border-radius: 8px; background: #fff; }
.w { border-radius: 3px; padding: 1px 1px; border-bottom: 1.5px dotted #9aa1ad; cursor: default; }
.w:focus { outline: 2px solid var(--accent); }
.word-legend { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; font-size: 12px;
  color: var(--muted); margin: 8px 0 4px; }
.gradient { width: 220px; height: 12px; border-radius: 3px; border: 1px solid var(--line); }
.gradient-labels { display: flex; justify-content: space-between; width: 220px; font-size: 11px; }
.cut-flag { display: inline-block; margin-left: 4px; color: var(--warn); background: var(--warn-soft);
  border-radius: 4px; padding: 0 6px; font-size: 12px; white-space: normal; }
.doc { border: 1px solid var(--line); border-radius: 8px; margin: 10px 0; }
.doc-head { display: flex; gap: 10px; align-items: center; padding: 7px 12px; background: #f9fafb;
  border-bottom: 1px solid var(--line); border-radius: 8px 8px 0 0; flex-wrap: wrap; }
.doc-body { padding: 10px 12px; font-size: 13.5px; }
.kept { background: #e6effd; border-radius: 3px; }
.scroll-x { overflow-x: auto; }
.side > div { min-width: 0; }
.attr-label { white-space: nowrap; }
.attr { display: grid; grid-template-columns: max-content 1fr 70px; gap: 4px 10px; align-items: center; }
.attr-track { position: relative; height: 16px; background: #f1f3f6; border-radius: 4px; }
.attr-bar { position: absolute; top: 2px; bottom: 2px; border-radius: 3px; background: var(--accent); }
.attr-bar.b { background: #7a3fc4; }
.attr-bar.neg { background: #c2410c; }
.attr-axis { position: absolute; top: 0; bottom: 0; width: 1px; background: #9aa1ad; }
.star { color: #c27c00; font-weight: 700; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; }
.kv dt { color: var(--muted); }
.kv dd { margin: 0; overflow-wrap: anywhere; }
.score-grid td, .score-grid th { padding: 5px 10px; }
.decisions td { font-size: 13px; }
.errors li { color: var(--bad); margin: 4px 0; }
.side { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 14px; }
.run-label { font-size: 12px; font-weight: 700; color: var(--muted); margin: 10px 0 4px; }
#tip { position: fixed; z-index: 20; pointer-events: none; background: #11151c; color: #f3f5f8;
  border-radius: 6px; padding: 7px 10px; font-size: 12px; line-height: 1.45; max-width: 340px;
  box-shadow: 0 4px 14px rgba(0, 0, 0, 0.25); }
#tip[hidden] { display: none; }
#tip b { font-weight: 650; }
#tip .tip-row { font-variant-numeric: tabular-nums; white-space: nowrap; }
.loading { color: var(--muted); padding: 30px 0; }
@media print { #detail, #backdrop, .filters, .pager { display: none; } }
"""

BODY = """<header class="top"><div class="wrap"><span class="brand">ragsense</span>
<span class="sub" id="top-title">report</span></div></header>
<main class="wrap" id="app">
<div id="banners"></div>
<section id="summary" class="card"><p class="loading">Loading the report…</p></section>
<section id="distributions" class="card"><h2>Distributions</h2><div class="hists" id="hists"></div></section>
<section id="rows" class="card"><h2>Rows</h2>
<div class="filters" id="filters"></div>
<p class="count" id="count"></p>
<div class="table-wrap"><table id="rows-table"><thead></thead><tbody></tbody></table></div>
<div class="pager" id="pager"></div>
</section>
<footer class="policy" id="policy"></footer>
</main>
<div id="backdrop" hidden></div>
<aside id="detail" hidden aria-label="row details"></aside>
<div id="tip" role="tooltip" hidden></div>
<noscript><p class="wrap">This report is drawn by JavaScript; enable it to see the page.</p></noscript>
"""


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


SCRIPT = "(() => {\n'use strict';\n" + SCRIPT_ROW + SCRIPT_SUMMARY + SCRIPT_MAIN + "\n})();\n"


def assemble(*, title: str, meta: Any, blobs: Sequence[tuple[str, str, str]], version: str = "") -> str:
    """The HTML page: ``meta`` as JSON, each blob ``(id, text, encoding)`` (``json`` text from
    :func:`json_for_script`, or ``gzip-base64``), the inline style and script, and a
    Content-Security-Policy that allows nothing else."""
    csp = (
        f"default-src 'none'; script-src {_csp_hash(SCRIPT)}; style-src {_csp_hash(STYLE)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">\n',
        f'<meta name="generator" content="ragsense {html.escape(version)}">\n',
        f"<title>{html.escape(title)}</title>\n",
        f"<style>{STYLE}</style>\n</head>\n<body>\n",
        BODY,
        f'<script type="application/json" id="ragsense-meta">{json_for_script(meta)}</script>\n',
    ]
    for name, text, encoding in blobs:
        if encoding not in ("json", "gzip-base64"):
            raise ValueError(f"unknown encoding {encoding!r}")
        mime = "application/json" if encoding == "json" else "application/octet-stream"
        if not name.replace("-", "").isalnum():
            raise ValueError(f"bad blob id {name!r}")
        parts += [f'<script type="{mime}" id="{name}" data-encoding="{encoding}">', text, "</script>\n"]
    parts.append(f"<script>{SCRIPT}</script>\n</body>\n</html>\n")
    return "".join(parts)
