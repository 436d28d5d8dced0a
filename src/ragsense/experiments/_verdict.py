"""The labelled development table of issue 36 (a verdict learned from labelled answers), scored by one
ConSens pass per row through ``evaluate``.

The sets and their halves are the rule committed in docs/results.md ("A learned verdict (issue 36)"):
rows are taken in the order of ``sha256("<set>:<row index>")``, and a row is in the development half
when ``int(sha256(document)[:8], 16)`` is even, so a document's rows never straddle the split. The pass
writes, per scored row, its ids, label, half and the ConSens result (every word's NLL with and without
the context and whether the context states it), and nothing of the datasets' text beyond the
answer's scored words. The learned verdict's features are computed afterwards from these results
(``ragsense.consens.learned_features``), so the model can be refitted without a model pass.

``ragsense experiment consens-verdict-table --model smollm2-135m --out docs/results/consens/verdict``
(the reader is the ``--model``; ``--limit`` caps the rows per set; in Python, ``deadline="HH:MM"`` bounds
the wall clock: the rows finished by then are kept, a prefix of each set's fixed order, and a rerun
resumes).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsense.consens import ConSens
from ragsense.data import default_data_dir
from ragsense.evaluation import evaluate
from ragsense.models import LanguageModel

SUMMARY_QUESTION = "Summarize the document."
"""The question every summary is scored under (the summary sets have none)."""

SUMMEDITS_DOMAINS = ("news", "ectsum", "qmsumm", "sales_call", "samsum")

# The pre-registered sizes and order (docs/results.md): pairs for the HaluEval sets, summaries per
# SummEdits domain.
PLAN = (("dialogue", 50), ("summedits", 20), ("qa", 40), ("summarization", 30))
_CHUNK = 8


@dataclass(frozen=True)
class TableRow:
    """One labelled text of the development table (1 grounded / consistent, 0 not)."""

    id: str
    set: str
    group: str  # the pair or document the row belongs to (bootstrap resamples whole groups)
    dev: bool
    label: int
    question: str
    contexts: tuple[str, ...]
    answer: str


def _order(name: str, index: int) -> str:
    return hashlib.sha256(f"{name}:{index}".encode()).hexdigest()


def is_dev(document: str) -> bool:
    """The pre-registered half of a document: development when its sha256's first 8 hex digits are even.

    >>> is_dev("a"), is_dev("c")
    (True, False)
    """
    return int(hashlib.sha256(document.encode("utf-8")).hexdigest()[:8], 16) % 2 == 0


def _gz_lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _pairs(
    name: str, records: list[dict[str, Any]], n: int, keys: tuple[str, str, str, str]
) -> list[TableRow]:
    """``n`` pairs (right, hallucinated) in the fixed order; ``keys``: context, question, right, wrong."""
    context_key, question_key, right, wrong = keys
    chosen = sorted(range(len(records)), key=lambda i: _order(name, i))[:n]
    rows = []
    for i in chosen:
        rec = records[i]
        context = rec[context_key].strip()
        question = rec[question_key].strip() if question_key else SUMMARY_QUESTION
        for key, label in ((right, 1), (wrong, 0)):
            rows.append(
                TableRow(
                    id=f"{name}-{i}-{label}",
                    set=name,
                    group=f"{name}-{i}",
                    dev=is_dev(rec[context_key]),
                    label=label,
                    question=question,
                    contexts=(context,),
                    answer=rec[key].strip(),
                )
            )
    return rows


def _summedits(folder: Path, per_domain: int) -> list[TableRow]:
    rows = []
    for domain in SUMMEDITS_DOMAINS:
        records = json.loads((folder / f"{domain}.json").read_text(encoding="utf-8"))
        name = f"summedits-{domain}"
        chosen = sorted(range(len(records)), key=lambda i: _order(name, i))[:per_domain]
        for i in chosen:
            rec = records[i]
            doc_id = hashlib.sha256(rec["doc"].encode("utf-8")).hexdigest()[:12]
            rows.append(
                TableRow(
                    id=f"{name}-{i}",
                    set=f"summedits/{domain}",
                    group=f"{domain}-{doc_id}",
                    dev=is_dev(rec["doc"]),
                    label=int(rec["label"]),
                    question=SUMMARY_QUESTION,
                    contexts=(rec["doc"].strip(),),
                    answer=rec["summary"].strip(),
                )
            )
    return rows


def verdict_table(data: str | None = None) -> dict[str, list[TableRow]]:
    """The new sets of the rule, each in its fixed order (pairs kept together)."""
    root = Path(data) if data else default_data_dir()
    more = root / "halueval_more"
    out: dict[str, list[TableRow]] = {}
    for name, n in PLAN:
        if name == "dialogue":
            recs = _gz_lines(more / "dialogue.jsonl.gz")
            keys = ("knowledge", "dialogue_history", "right_response", "hallucinated_response")
            out[name] = _pairs("dialogue", recs, n, keys)
        elif name == "qa":
            recs = _gz_lines(more / "qa_rows_501_10000.jsonl.gz")
            out[name] = _pairs(
                "qa", recs, n, ("knowledge", "question", "right_answer", "hallucinated_answer")
            )
        elif name == "summarization":
            recs = _gz_lines(more / "summarization_rows_1_5000.jsonl.gz")
            keys = ("document", "", "right_summary", "hallucinated_summary")
            out[name] = _pairs("summarization", recs, n, keys)
        else:
            out[name] = _summedits(root / "summedits_dev", n)
    return out


def finished_ids(path: Path) -> set[str]:
    """The ids of the rows a JSON Lines output already holds (a rerun skips them)."""
    if not path.exists():
        return set()
    with path.open(encoding="utf-8") as fh:
        return {json.loads(line)["id"] for line in fh if line.strip()}


def _chunks(rows: list[TableRow], size: int) -> Iterator[list[TableRow]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def consens_verdict_table(
    *,
    model: LanguageModel | str | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    deadline: str | None = None,
) -> dict[str, Any]:
    """Score the new sets of the issue-36 table with ConSens (the default aggregation) through
    ``evaluate``, chunk by chunk, appending each finished row to ``OUT/verdict-<set>.jsonl``.

    ``deadline``: a UTC time ``HH:MM`` after which no new chunk starts (the run is bounded; a rerun
    resumes from the rows written). ``limit``: at most this many rows per set (a prefix of its order).
    ``seed`` changes nothing (the order is fixed by sha256); it is accepted as every experiment's option.
    """
    del seed
    started = time.perf_counter()
    folder = Path(out or ".")
    folder.mkdir(parents=True, exist_ok=True)
    stop = None
    if deadline:
        hh, mm = (int(x) for x in deadline.split(":"))
        now = time.gmtime()
        stop = time.time() + ((hh * 60 + mm) - (now.tm_hour * 60 + now.tm_min)) * 60 - now.tm_sec
    metric = ConSens(model)
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for name, rows in verdict_table(data).items():
        path = folder / f"verdict-{name}.jsonl"
        done = finished_ids(path)
        todo = [r for r in rows[:limit] if r.id not in done]
        counts[name] = len(done)
        for chunk in _chunks(todo, _CHUNK):
            if stop is not None and time.time() > stop:
                break
            t0 = time.perf_counter()
            records = [
                {"id": r.id, "question": r.question, "contexts": list(r.contexts), "answer": r.answer}
                for r in chunk
            ]
            run = evaluate(records, [metric], progress=False, desc=f"verdict-{name}")
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
            with path.open("a", encoding="utf-8") as fh:
                for r, rec in zip(chunk, run.rows, strict=True):
                    if rec["errors"]:
                        raise RuntimeError(f"row {r.id}: {rec['errors'][0]}")
                    result = {k: rec[k] for k in rec if k not in ("question", "contexts", "answer", "_row")}
                    line = {"id": r.id, "set": r.set, "group": r.group, "dev": r.dev, "label": r.label}
                    fh.write(json.dumps({**line, "result": result}, allow_nan=False) + "\n")
            counts[name] += len(chunk)
    return {
        "experiment": "consens-verdict-table",
        "rows": counts,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
