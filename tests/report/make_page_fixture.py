"""Write the fixture of the page test (tests/report/fixtures/): a fixed input (two runs and their rows)
and the pages the report renders from it. Run it only when the page is meant to change::

    PYTHONPATH=src python -m tests.report.make_page_fixture

The version of ragsense is written ``{{version}}`` in the expected pages, so a release does not
change them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ragsense._version import __version__
from ragsense.report import render_report
from ragsense.runs import StoredRun

FIXTURES = Path(__file__).parent / "fixtures"
INPUT = FIXTURES / "page-input.json"
PAGES = {"single": FIXTURES / "page-single.html", "comparison": FIXTURES / "page-comparison.html"}
VERSION = "{{version}}"
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> & \u2028 😀'


def make_input() -> dict[str, Any]:
    """Two runs of 10 synthetic rows (one with markup and an emoji); B's rows are made from A's."""
    from ._rows import synthetic_rows
    from .conftest import stored_run

    rows_a = synthetic_rows(10, seed=41, docs=2, doc_chars=240)
    rows_a[2] = {**rows_a[2], "id": "xss-row", "question": XSS, "contexts": [XSS, *rows_a[2]["contexts"][1:]]}
    run_a = stored_run(rows_a, run_id="aaaa11112222", tag="baseline")
    run_b = stored_run(rows_b(rows_a), run_id="bbbb33334444", tag=XSS)
    return {"run_a": dataclasses.asdict(run_a), "run_b": dataclasses.asdict(run_b), "rows": rows_a}


def rows_b(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run B: ConSens 0.5 lower on every third row, 0.1 higher on the others."""
    return [{**r, "consens": r["consens"] - (0.5 if k % 3 == 0 else -0.1)} for k, r in enumerate(rows)]


def render_pages(data: dict[str, Any]) -> dict[str, str]:
    """The pages of the fixed input, uncompressed (gzip's bytes depend on the zlib build)."""
    run_a, run_b = StoredRun(**data["run_a"]), StoredRun(**data["run_b"])
    rows = data["rows"]
    single = render_report(run_a, rows, compress=False)
    comparison = render_report(run_a, rows, other=(run_b, rows_b(rows)), compress=False)
    return {"single": single, "comparison": comparison}


def with_version(page: str, version: str, placeholder: str) -> str:
    """``page`` with ragsense's version (in the generator tag and the meta's first key) swapped."""
    for template in ('<meta name="generator" content="ragsense {}">', 'id="ragsense-meta">{{"version":"{}",'):
        old, new = template.format(version), template.format(placeholder)
        if page.count(old) != 1:
            raise ValueError(f"expected {old!r} once in the page")
        page = page.replace(old, new)
    return page


def main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    data = make_input()
    INPUT.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    # Render from the file just written, as the test does.
    pages = render_pages(json.loads(INPUT.read_text(encoding="utf-8")))
    for name, page in pages.items():
        PAGES[name].write_text(with_version(page, __version__, VERSION), encoding="utf-8", newline="")


if __name__ == "__main__":
    main()
