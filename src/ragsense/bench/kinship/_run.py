"""Run the kinship benchmark: every condition x k, one question at a time, scored by string match.

An answer is correct when it contains one of the correct names as a whole word, case-insensitive
(the paper's string comparison, made robust to "Ann" matching inside "Anna"). Retrieval recall per
query is the share of the needed documents (the shortest evidence chain, see ``_evidence``) among the
retrieved ones, so a wrong answer can be told apart as a retrieval or a generation failure.

Each answered (condition, k) chunk is appended to ``answers.jsonl`` and flushed, so an interrupted
sweep resumes where it stopped (``resume=True``) and computes exactly what a fresh run would.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.bench.kinship._evidence import retrieval_recall
from ragsense.bench.kinship._source import ConditionQuery, HoldOut, KinshipCondition, KinshipSource
from ragsense.bench.kinship._systems import KinshipSystem, SystemAnswer
from ragsense.data import dumps_json
from ragsense.errors import ParameterError

ANSWERS_FILE = "answers.jsonl"
RUN_FILE = "run.json"


def is_correct(answer: str, names: Sequence[str]) -> bool:
    """Whether ``answer`` contains one of ``names`` as a whole word, ignoring case.

    >>> is_correct("The brother of Amelia is Oliver.", ["Oliver"])
    True
    >>> is_correct("Anna", ["Ann"]), is_correct("", ["Ann"])
    (False, False)
    """
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", answer, re.IGNORECASE) for n in names)


def parse_ks(text: str | Sequence[int]) -> list[int]:
    """``"5,15,30"`` -> ``[5, 15, 30]`` (sorted, unique); each k a positive integer.

    >>> parse_ks("30, 5,15")
    [5, 15, 30]
    """
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    ks: set[int] = set()
    for item in items:
        try:
            k = int(item)
        except (TypeError, ValueError):
            raise ParameterError(f"each k must be a whole number, got {item!r}", parameter="k") from None
        if k < 1:
            raise ParameterError(f"each k must be at least 1, got {k}", parameter="k")
        ks.add(k)
    if not ks:
        raise ParameterError("give at least one k", parameter="k")
    return sorted(ks)


@dataclass
class KinshipRun:
    """What a run produced: the per-(k, condition) results and where its files are."""

    results: list[dict[str, Any]]
    answers_path: Path
    seconds: float
    n_answered: int
    n_resumed: int
    timings: dict[str, float] = field(default_factory=dict)


def _sample(queries: Sequence[ConditionQuery], limit: int | None, seed: int) -> list[ConditionQuery]:
    if limit is None or len(queries) <= limit:
        return list(queries)
    chosen = set(random.Random(seed).sample(range(len(queries)), limit))
    return [q for i, q in enumerate(queries) if i in chosen]  # keep the source's order


def check_ks(ks: Sequence[int], conditions: Sequence[KinshipCondition]) -> None:
    """Every k must fit every condition's store (the paper left such cells empty; we refuse early)."""
    for condition in conditions:
        too_big = [k for k in ks if k > len(condition.documents)]
        if too_big:
            raise ParameterError(
                f"k={too_big[0]} is larger than the {condition.name!r} store, which holds "
                f"{len(condition.documents)} documents; use k <= {len(condition.documents)} or more names",
                parameter="k",
            )


def _record(
    cq: ConditionQuery, condition: KinshipCondition, k: int, result: SystemAnswer | Exception
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "condition": condition.name,
        "k": k,
        "query_id": cq.query.id,
        "question": cq.query.text,
        "answers": list(cq.query.answers),
        "hops": cq.hops,
    }
    if isinstance(result, Exception):
        return {
            **base,
            "answer": None,
            "correct": False,
            "retrieved_ids": None,
            "retrieval_recall": None,
            "error": f"{type(result).__name__}: {result}",
        }
    recall = None
    if result.retrieved_ids is not None and cq.evidence:
        recall = retrieval_recall(cq.evidence, set(result.retrieved_ids))
    return {
        **base,
        "answer": result.answer,
        "correct": None if result.answer is None else is_correct(result.answer, cq.query.answers),
        "retrieved_ids": list(result.retrieved_ids) if result.retrieved_ids is not None else None,
        "retrieval_recall": recall,
        "documents_dropped": result.documents_dropped,
    }


def aggregate(
    records: Sequence[Mapping[str, Any]], ks: Sequence[int], names: Sequence[str]
) -> list[dict[str, Any]]:
    """One result per (k, condition): accuracy (errors count as wrong; None when nothing was answered,
    as with a retriever alone), mean retrieval recall over the queries that have evidence (None when no
    system reported documents), n, errors, mean hops."""
    out = []
    for k in ks:
        for name in names:
            rows = [r for r in records if r["k"] == k and r["condition"] == name]
            recalls = [r["retrieval_recall"] for r in rows if r["retrieval_recall"] is not None]
            hops = [r["hops"] for r in rows if r["hops"] is not None]
            scored = [r for r in rows if r["correct"] is not None or r.get("error")]
            out.append(
                {
                    "k": k,
                    "condition": name,
                    "accuracy": (sum(bool(r["correct"]) for r in scored) / len(scored)) if scored else None,
                    "retrieval_recall": (sum(recalls) / len(recalls)) if recalls else None,
                    "n": len(rows),
                    "n_errors": sum(1 for r in rows if r.get("error")),
                    "mean_hops": (sum(hops) / len(hops)) if hops else None,
                    "n_unanswerable": sum(1 for r in rows if r["hops"] is None),
                }
            )
    return out


def _load_previous(
    path: Path, settings: Mapping[str, Any], resume: bool, overwrite: bool
) -> list[dict[str, Any]]:
    run_file = path.parent / RUN_FILE
    if not path.exists():
        return []
    if not resume:
        if overwrite:
            path.unlink()
            return []
        raise FileExistsError(f"{path} exists: pass resume=True (--resume) to continue it or overwrite=True")
    if run_file.exists() and json.loads(run_file.read_text()).get("settings") != dict(settings):
        raise ParameterError(
            f"{run_file} was written with other settings; resume needs the same ones (or use another --out)",
            parameter="resume",
        )
    records = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a half-written last line from an interrupted run: recompute from there
    # Rewrite the file with the complete lines only (atomically), then append to it.
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(dumps_json(r) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)
    return records


def _answer_chunk(
    system: KinshipSystem, condition: KinshipCondition, todo: Sequence[ConditionQuery], k: int, source_id: str
) -> list[SystemAnswer | Exception]:
    """Answers for a chunk; when the whole call fails (a server outage mid-batch), each question is
    asked again on its own so that only the failing ones are marked."""
    try:
        return run_sync(
            system.answer_condition(condition, [cq.query.text for cq in todo], k, source_id=source_id)
        )
    except Exception as exc:
        if len(todo) == 1:
            return [exc]
    out: list[SystemAnswer | Exception] = []
    for cq in todo:
        try:
            out.extend(run_sync(system.answer_condition(condition, [cq.query.text], k, source_id=source_id)))
        except Exception as exc:
            out.append(exc)
    return out


def run_kinship(
    source: KinshipSource,
    system: KinshipSystem,
    ks: Sequence[int],
    out_dir: str | Path,
    *,
    relations: Sequence[str] | None = None,
    hold_out: HoldOut = "fact",
    max_queries: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    settings: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> KinshipRun:
    """Answer every sampled query of every condition at every k and aggregate the results.

    ``max_queries`` samples at most that many queries per condition (seeded by the source's seed;
    the same queries at every k). ``settings`` (model, prompt, ...) are recorded in ``run.json`` and
    must match for ``resume``.
    """
    if max_queries is not None and max_queries < 1:
        raise ParameterError(f"must be at least 1, got {max_queries}", parameter="max_queries")
    ks = parse_ks(ks)
    conditions = source.conditions(relations, hold_out=hold_out)
    check_ks(ks, conditions)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    answers_path = out / ANSWERS_FILE
    full_settings = {
        **dict(settings or {}),
        "source": {
            "names": source.names,
            "generations": source.generations,
            "seed": source.seed,
            "distractor_share": source.distractor_share,
        },
        "ks": ks,
        "conditions": [c.name for c in conditions],
        "hold_out": hold_out,
        "max_queries": max_queries,
        "system": system.name,
    }
    previous = _load_previous(answers_path, full_settings, resume, overwrite)
    (out / RUN_FILE).write_text(dumps_json({"settings": full_settings}) + "\n", encoding="utf-8")
    done = {(r["condition"], r["k"], r["query_id"]): r for r in previous}
    records: list[dict[str, Any]] = []
    tag = (
        f"kinship-n{source.names}-g{source.generations}-s{source.seed}-d{source.distractor_share}-{hold_out}"
    )
    start = time.perf_counter()
    n_answered = n_resumed = 0
    with answers_path.open("a", encoding="utf-8") as fh:
        for condition in conditions:
            sampled = _sample(condition.queries, max_queries, source.seed)
            # Largest k first: the pipeline retrieves once and every smaller k is a prefix of it.
            for k in sorted(ks, reverse=True):
                chunk = [done.get((condition.name, k, cq.query.id)) for cq in sampled]
                todo = [cq for cq, r in zip(sampled, chunk, strict=True) if r is None]
                fresh: dict[str, dict[str, Any]] = {}
                if todo:
                    answers = _answer_chunk(system, condition, todo, k, f"{tag}/{condition.name}")
                    fresh = {
                        cq.query.id: _record(cq, condition, k, a) for cq, a in zip(todo, answers, strict=True)
                    }
                    for r in fresh.values():  # only what the file lacks: resumed lines are already there
                        fh.write(dumps_json(r) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                n_answered += len(fresh)
                n_resumed += len(sampled) - len(fresh)
                new = [
                    r if r is not None else fresh[cq.query.id] for cq, r in zip(sampled, chunk, strict=True)
                ]
                records.extend(new)
                if progress is not None:
                    [summary] = aggregate(new, [k], [condition.name])
                    acc, rec = summary["accuracy"], summary["retrieval_recall"]
                    progress(
                        f"{condition.name:>18} k={k:<4} accuracy {'-' if acc is None else f'{acc:.2f}'} "
                        f"retrieval recall {'-' if rec is None else f'{rec:.2f}'} (n={len(new)})"
                    )
    results = aggregate(records, ks, [c.name for c in conditions])
    return KinshipRun(
        results=results,
        answers_path=answers_path,
        seconds=time.perf_counter() - start,
        n_answered=n_answered,
        n_resumed=n_resumed,
        timings=system.timings.as_dict(),
    )
