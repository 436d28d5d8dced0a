"""What a report costs: its size, the time to write it, and the time Chromium takes to open it.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.report_size --rows 1000,10000
    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.report_size --run RUN --store runs.sqlite
    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.report_size --synthetic 10000

The first form builds RAG rows from SQuAD 2.0 dev (``RAGSENSE_DATA_DIR``, default ../shared/data):
each question with its paragraph and another paragraph of the same article as documents, and as the
answer the sentence of the paragraph that holds the gold answer (or, for every third question, a
sentence of another article: an ungrounded answer). The rows are scored by ``ragsense.evaluate``
with the deterministic ``fake`` model (ConSens with attribution, and VERA with the fake judge, its
cache off), which writes rows in exactly the format a real model does at a fraction of the time; the
run is recorded in a temporary run store. The second form measures the report of a run already in a
store (a real model's run); the third a run of synthetic rows whose texts are all distinct (the
report tests' generator), the size policy's worst case. Each way, per run:

- ``bytes``: the report file's size; ``write_s`` and ``write_cpu_s``: ``ragsense.report.write_report``
  wall and CPU time (reading the run from the store included; the CPU time is what a busy machine
  does not inflate);
- ``dom_content_loaded_ms`` and ``table_ready_ms``: in headless Chromium (network off), from
  navigation start to DOMContentLoaded and to the table drawn (``performance.now()`` when the page
  has decoded its data and drawn the first page of rows); skipped without a chromium binary;
- what the size policy kept (``step``, document and answer caps).

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.report._cdp import Browser, find_chromium

from ragsense import evaluate
from ragsense.consens import ConSens
from ragsense.data import load_squad_v2
from ragsense.report import write_report
from ragsense.runs import RunStore
from ragsense.vera import Vera

ROOT = Path(__file__).resolve().parents[1]

SENTENCE = re.compile(r"[^.!?]+[.!?]")


def squad_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` RAG rows from SQuAD 2.0 dev (see the module docstring); questions repeat past 6,078."""
    items = load_squad_v2()
    by_title: dict[str, list[str]] = {}
    for item in items:
        paragraphs = by_title.setdefault(item.title, [])
        if item.context not in paragraphs:
            paragraphs.append(item.context)
    every_sentence = [s.strip() for item in items[::50] for s in SENTENCE.findall(item.context)]
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        item = items[k % len(items)]
        others = [p for p in by_title[item.title] if p != item.context]
        contexts = [item.context] + ([rng.choice(others)] if others else [])
        sentences = [s.strip() for s in SENTENCE.findall(item.context)] or [item.context]
        gold = next((s for s in sentences for a in item.answers if a in s), sentences[0])
        answer = rng.choice(every_sentence) if k % 3 == 2 else gold
        rows.append(
            {"id": f"{item.id}-{k}", "question": item.question, "contexts": contexts, "answer": answer}
        )
    return rows


def page_limits(html: str) -> dict[str, Any]:
    """What the size policy kept, from the page's embedded head."""
    meta = json.loads(re.search(r'id="ragsense-meta">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    limits = meta["limits"]
    keys = (
        "step",
        "document_cap",
        "answer_cap",
        "question_cap",
        "n_documents",
        "documents_cut",
        "answers_cut",
        "questions_cut",
        "words_left_out",
        "context_decisions",
    )
    return {k: limits[k] for k in keys}


def open_in_chromium(path: Path) -> dict[str, float] | None:
    binary = find_chromium()
    if binary is None:
        return None
    with tempfile.TemporaryDirectory() as profile, Browser(binary, Path(profile)) as browser:
        browser.open_page()
        browser.navigate(path.as_uri(), timeout=60)
        browser.wait_for("document.documentElement.dataset.ready === '1'", timeout=60)
        loaded = browser.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
        ready = browser.evaluate("window.__ragsense.ready")
        assert browser.problems() == [] and browser.requests() == [path.as_uri()]
    return {"dom_content_loaded_ms": round(loaded), "table_ready_ms": round(ready)}


def measure(store: RunStore, run_id: str, folder: Path) -> dict[str, Any]:
    out = folder / f"report-{run_id}.html"
    start, cpu = time.perf_counter(), time.process_time()
    write_report(store, run_id, output=out)
    figures: dict[str, Any] = {"run": run_id, "rows": store.get(run_id).n_rows}
    figures["write_s"] = round(time.perf_counter() - start, 2)
    figures["write_cpu_s"] = round(time.process_time() - cpu, 2)  # what a busy machine does not inflate
    figures["bytes"] = out.stat().st_size
    figures |= page_limits(out.read_text(encoding="utf-8"))
    figures |= open_in_chromium(out) or {"browser": "no chromium binary: not opened"}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", default="1000,10000", help="row counts of the fake-model runs (default 1000,10000)"
    )
    parser.add_argument("--run", help="measure this stored run instead (id, prefix, tag or 'latest')")
    parser.add_argument(
        "--synthetic",
        type=int,
        help="measure a run of this many synthetic rows instead, every text distinct (the tests' "
        "generator: 45-word answers, 3 documents of about 1,200 characters, VERA decisions)",
    )
    parser.add_argument("--store", help="the run store of --run")
    parser.add_argument("--keep", help="folder to keep the reports in (default: a temporary folder)")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="ragsense-report-size-"))
    folder.mkdir(parents=True, exist_ok=True)
    results = []
    if args.run:
        store = RunStore(args.store) if args.store else RunStore()
        results.append(measure(store, store.get(args.run).id, folder))
    elif args.synthetic:
        from tests.report._rows import METRICS, quick_summary, synthetic_rows

        store = RunStore(folder / "runs.sqlite")
        rows = synthetic_rows(args.synthetic, docs=3, doc_chars=1200)
        recorder = store.start(metrics=METRICS, tag=f"synthetic-{args.synthetic}", command="report_size.py")
        recorder.add_rows(rows)
        recorder.finish({"n_rows": len(rows), "metrics": quick_summary(rows)})
        results.append(
            {"source": "synthetic, every text distinct", **measure(store, recorder.run_id, folder)}
        )
    else:
        store = RunStore(folder / "runs.sqlite")
        for n in (int(x) for x in args.rows.split(",")):
            start = time.perf_counter()
            rows = squad_rows(n)
            metrics = [ConSens(model="fake", attribution=True), Vera(judge="fake", cache=False)]
            run = evaluate(rows, metrics, store=False, progress=False)
            scored = round(time.perf_counter() - start, 1)
            # Recorded as evaluate records a run, in one transaction (per-chunk commits are slow on a
            # busy disk, and are not what is measured here).
            recorder = store.start(
                metrics=[m.to_dict() for m in run.metrics],
                tag=f"squad-fake-{n}",
                command="report_size.py",
                dataset="SQuAD 2.0 dev (report_size.py)",
            )
            recorder.add_rows(run.rows, rows)
            recorder.finish(run.summary().to_dict())
            run.run_id = recorder.run_id
            figures = measure(store, str(run.run_id), folder)
            results.append({"source": "SQuAD 2.0 dev, fake model", "evaluate_s": scored, **figures})
    for r in results:
        print(json.dumps(r))
    print(
        json.dumps(
            {
                "command": " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
                "reports": str(folder),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
