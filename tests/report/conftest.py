"""Fixtures of the report tests: synthetic runs, a 10,000-row report shared by the size and
open-time tests, and one headless Chromium for the browser tests."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from ragsense.report import Report, build_report
from ragsense.runs import StoredRun

from ._cdp import Browser, find_chromium
from ._rows import METRICS, quick_summary, synthetic_rows


def stored_run(
    rows: list[dict[str, Any]],
    *,
    run_id: str = "0123456789ab",
    tag: str | None = "synthetic",
    status: str = "complete",
    metrics: list[dict[str, Any]] | None = None,
) -> StoredRun:
    """A run entry for ``rows`` without a store (its summary computed from the rows)."""
    run = StoredRun(
        id=run_id,
        created="2026-01-02T03:04:05Z",
        finished="2026-01-02T03:05:00Z",
        status=status,
        tag=tag,
        command="ragsense evaluate rows.jsonl --metrics attribution,vera,similarity --model fake",
        version="0.1.0",
        dataset="/data/rows.jsonl",
        input_hash="ab" * 32,
        n_rows=len(rows),
        metrics=metrics or METRICS,
    )
    if status != "complete":
        return run
    summary = {"n_rows": len(rows), "n_resumed": 0, "seconds": 12.5, "metrics": quick_summary(rows)}
    return dataclasses.replace(run, summary=summary)


def replicate(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` rows cycling through ``rows`` with new ids and positions (shared nested values)."""
    return [{**rows[k % len(rows)], "id": f"row-{k:05d}", "_row": k} for k in range(n)]


@pytest.fixture(scope="session")
def big_rows() -> list[dict[str, Any]]:
    """10,000 rows in the exact output format: 400 distinct synthetic rows (answers, documents, word
    scores, attribution, VERA decisions all different) cycled with new ids."""
    return replicate(synthetic_rows(400, seed=1, docs=2, doc_chars=600), 10_000)


@pytest.fixture(scope="session")
def big_report(
    big_rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Report, float]:
    start = time.perf_counter()
    report = build_report(stored_run(big_rows, tag="ten-thousand"), big_rows)
    seconds = time.perf_counter() - start
    path = tmp_path_factory.mktemp("big-report") / "report-10000.html"
    path.write_text(report.html, encoding="utf-8")
    return path, report, seconds


@pytest.fixture(scope="session")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (chromium or chromium-browser): browser tests skipped")
    return binary


@pytest.fixture(scope="module")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Browser(chromium, tmp_path_factory.mktemp("chromium-profile")) as b:
        b.open_page()
        yield b
