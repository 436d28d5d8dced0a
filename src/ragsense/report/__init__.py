"""One run (or two compared) as a self-contained web page: ``ragsense report RUN [RUN_B] -o page.html``.

The page opens offline (no CDN, no font, nothing fetched; style, script and data inline) and shows the
run's summary with 95% intervals, a histogram of each score (ConSens with its verdict bands), a
sortable, filterable table of the rows (worst first, a page at a time), and each row's question,
documents and answer, every scored word shaded by how much the context raised its likelihood, with
leave-one-out attribution and VERA's decisions. Two runs give their paired differences
(:func:`ragsense.runs.compare_rows`) and the rows that got worse first. docs/report.md has the size
policy for long documents and 10,000 rows.

>>> from ragsense.runs import StoredRun
>>> run = StoredRun(id="0123abcd", created="2026-01-01T00:00:00Z", finished="2026-01-01T00:00:01Z",
...                 status="complete", tag="demo", command=None, version="0", dataset=None,
...                 input_hash=None, n_rows=1,
...                 metrics=[{"name": "consens", "scores": ["consens"], "verdict": "verdict"}])
>>> rows = [{"id": "1", "question": "Who?", "contexts": ["Ada wrote it."], "answer": "<script>x</script>",
...          "consens": 0.4, "verdict": "grounded", "errors": [], "_row": 0}]
>>> page = render_report(run, rows, compress=False)
>>> page.startswith("<!DOCTYPE html>"), "<script>x</script>" in page, "\\\\u003cscript\\\\u003ex" in page
(True, False, True)
"""

from ragsense.report._fit import Report
from ragsense.report._render import build_report, default_output, render_report, write_report
from ragsense.report._texts import ReportLimits

__all__ = [
    "Report",
    "ReportLimits",
    "build_report",
    "default_output",
    "render_report",
    "write_report",
]
