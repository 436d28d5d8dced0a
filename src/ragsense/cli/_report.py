"""``ragsense report RUN [RUN_B] [-o page.html]``: a run (or two compared) as one offline web page."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "report",
        help="write a run (or two compared) as one self-contained HTML page",
        description=(
            "Write one HTML file that opens offline: the run's summary with 95% intervals, a histogram "
            "of each score, a sortable and filterable table of the rows (worst first), and each row's "
            "question, documents and answer with every scored word shaded by how much the context "
            "raised its likelihood, leave-one-out attribution and VERA's decisions. With two runs: "
            "their paired differences (B - A) and the rows that got worse first. RUN is a run id, a "
            "unique id prefix, a tag (its newest run) or 'latest'; docs/report.md has the size policy."
        ),
    )
    parser.add_argument("ref", metavar="RUN", help="the run (A when comparing)")
    parser.add_argument("ref_b", metavar="RUN_B", nargs="?", help="a second run to compare with (B)")
    parser.add_argument(
        "-o", "--output", help="the HTML file (default: ragsense-report-<id>.html in the working directory)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing report file")
    parser.add_argument(
        "--store", help="run store file (default: $RAGSENSE_STORE or runs.sqlite in the user data directory)"
    )
    parser.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ragsense.report import write_report
    from ragsense.runs import RunStore
    from ragsense.tables import echo

    store = RunStore(args.store) if args.store else RunStore()
    path = write_report(store, args.ref, args.ref_b, output=args.output, overwrite=args.overwrite)
    size = path.stat().st_size
    echo(f"wrote {path} ({size / 1e6:.2f} MB)")
    return 0
