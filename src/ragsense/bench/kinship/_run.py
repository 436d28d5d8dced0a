"""Run the kinship benchmark: every condition x k, one question at a time, scored by string match.

An answer is correct when it contains one of the correct names as a whole word, case-insensitive
(the paper's string comparison, made robust to "Ann" matching inside "Anna"). Retrieval recall per
query is the share of the needed documents (the shortest evidence chain, see ``_evidence``) among the
retrieved ones, so a wrong answer can be told apart as a retrieval or a generation failure.

The sweep runs on ragsense's one runner (:func:`ragsense.evaluation.run_rows`): every (condition, k,
query) is an item, the system under test is its one step, and ``answers.jsonl`` is the runner's
output. So fixed chunks are appended and fsynced as they finish, ``resume=True`` continues an
interrupted sweep computing exactly what a fresh run would, and a system call that fails for a whole
chunk is retried question by question so that only the failing questions are marked (``errors``).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.bench.kinship._evidence import retrieval_recall
from ragsense.bench.kinship._source import ConditionQuery, HoldOut, KinshipCondition, KinshipSource
from ragsense.bench.kinship._systems import KinshipSystem, SystemAnswer
from ragsense.data import dumps_json, write_output
from ragsense.errors import OutputExistsError, ParameterError
from ragsense.evaluation import Needs, RowOutcome, run_rows
from ragsense.stats import wilson_ci

ANSWERS_FILE = "answers.jsonl"
RUN_FILE = "run.json"
ANSWER_FIELDS = ("answer", "correct", "retrieved_ids", "retrieval_recall", "documents_dropped")
"""What the system step adds to each question's record (all None when the question failed)."""
CI_LEVEL = 0.95
"""The level of every interval in the results (Wilson score intervals)."""
SYSTEM_STEP = "system"
"""The ``metric`` of an error record the system under test caused."""


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
    settings: dict[str, Any] = field(default_factory=dict)
    """What ``run.json`` records (the caller's settings, the source, and ``system_settings``)."""


def system_settings(system: KinshipSystem) -> dict[str, Any] | None:
    """What the system reports about itself that changes its answers (retrieval mode, stop strings,
    prompt format, document order, token cap, ...), or None for a system that reports nothing (a user
    system: its settings are its own)."""
    describe = getattr(system, "settings", None)
    if not callable(describe):
        return None
    reported = describe()
    return dict(reported) if isinstance(reported, Mapping) else None


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


# ---------------------------------------------------------------------------------- items and step


@dataclass(frozen=True)
class KinshipItem:
    """One question asked in one condition at one k: the runner's input item.

    >>> from ragsense.bench.kinship import generate_kinship_source
    >>> control = generate_kinship_source(4, 2, seed=0).control()
    >>> item = KinshipItem(control, 5, control.queries[0])
    >>> item.id == f"control/5/{control.queries[0].query.id}", sorted(item.to_record())
    (True, ['answers', 'condition', 'hops', 'k', 'query_id', 'question'])
    """

    condition: KinshipCondition = field(repr=False, compare=False)
    k: int
    query: ConditionQuery

    @property
    def id(self) -> str:
        return f"{self.condition.name}/{self.k}/{self.query.query.id}"

    @property
    def group(self) -> tuple[str, int]:
        """The (condition, k) the question belongs to: one system call answers a group's questions."""
        return self.condition.name, self.k

    def to_record(self) -> dict[str, Any]:
        return {
            "condition": self.condition.name,
            "k": self.k,
            "query_id": self.query.query.id,
            "question": self.query.query.text,
            "answers": list(self.query.query.answers),
            "hops": self.query.hops,
        }

    def fields_of(self, result: SystemAnswer) -> dict[str, Any]:
        """The step's fields for the system's answer to this question."""
        recall = None
        if result.retrieved_ids is not None and self.query.evidence:
            recall = retrieval_recall(self.query.evidence, set(result.retrieved_ids))
        return {
            "answer": result.answer,
            "correct": None if result.answer is None else is_correct(result.answer, self.query.query.answers),
            "retrieved_ids": list(result.retrieved_ids) if result.retrieved_ids is not None else None,
            "retrieval_recall": recall,
            "documents_dropped": result.documents_dropped,
        }


def _work_items(
    conditions: Sequence[KinshipCondition], ks: Sequence[int], sampled: Sequence[Sequence[ConditionQuery]]
) -> list[KinshipItem]:
    """Every question in run order: condition by condition, largest k first (the pipeline retrieves
    once per condition at the largest k and every smaller k is a prefix of it)."""
    return [
        KinshipItem(condition, k, cq)
        for condition, queries in zip(conditions, sampled, strict=True)
        for k in sorted(ks, reverse=True)
        for cq in queries
    ]


@dataclass
class _SystemStep:
    """The system under test as the runner's one step: one ``answer_condition`` call per (condition, k)
    group of the chunk, awaited on the runner's event loop."""

    system: KinshipSystem
    tag: str
    name: str = SYSTEM_STEP
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = ANSWER_FIELDS

    async def score(self, rows: Sequence[Any]) -> list[Mapping[str, Any] | Exception]:
        out: list[Mapping[str, Any] | Exception] = []
        for _, grouped in groupby(rows, key=lambda item: item.group):
            items: list[KinshipItem] = list(grouped)
            condition, k = items[0].condition, items[0].k
            answers = await self.system.answer_condition(
                condition,
                [item.query.query.text for item in items],
                k,
                source_id=f"{self.tag}/{condition.name}",
            )
            if len(answers) != len(items):
                raise ValueError(f"the system returned {len(answers)} answers for {len(items)} questions")
            for item, answer in zip(items, answers, strict=True):
                out.append(answer if isinstance(answer, Exception) else item.fields_of(answer))
        return out


# ----------------------------------------------------------------------------------------- results


def _failed(record: Mapping[str, Any]) -> bool:
    return bool(record.get("errors"))


def _documents_found(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(needed documents retrieved, needed documents) summed over the questions with a recall.

    A question needs ``hops`` documents (its shortest chains all have that many steps) and its recall
    is the best chain's share of them, so ``recall * hops`` is a whole number of documents."""
    found = needed = 0
    for r in rows:
        recall, steps = r.get("retrieval_recall"), r.get("hops")
        if recall is None or not steps:
            continue
        found += round(recall * steps)
        needed += steps
    return found, needed


def _interval(successes: int, n: int) -> list[float] | None:
    if n == 0:
        return None
    lo, hi = wilson_ci(successes, n, CI_LEVEL)
    return [lo, hi]


def aggregate(
    records: Sequence[Mapping[str, Any]], ks: Sequence[int], names: Sequence[str]
) -> list[dict[str, Any]]:
    """One result per (k, condition): accuracy (failed questions, those with ``errors``, count as
    wrong; None when nothing was answered, as with a retriever alone), mean retrieval recall over the
    queries that have evidence (None when no system reported documents), n, errors, mean hops.

    Each share comes with its counts and a 95% Wilson interval (:func:`ragsense.stats.wilson_ci`):
    ``n_correct`` of ``n_scored`` for ``accuracy_ci``; for ``retrieval_recall_ci``, the needed
    documents retrieved (``documents_found``) of those needed (``documents_needed``), each document
    counted as one trial. The intervals are None where there is nothing to count.

    >>> rows = [{"k": 5, "condition": "c", "correct": c, "retrieval_recall": 1.0, "hops": 1}
    ...         for c in (True, True, False)]
    >>> [cell] = aggregate(rows, [5], ["c"])
    >>> cell["n_correct"], cell["n_scored"], [round(x, 3) for x in cell["accuracy_ci"]]
    (2, 3, [0.208, 0.939])
    """
    out = []
    for k in ks:
        for name in names:
            rows = [r for r in records if r["k"] == k and r["condition"] == name]
            recalls = [r["retrieval_recall"] for r in rows if r.get("retrieval_recall") is not None]
            hops = [r["hops"] for r in rows if r["hops"] is not None]
            scored = [r for r in rows if r.get("correct") is not None or _failed(r)]
            n_correct = sum(bool(r.get("correct")) for r in scored)
            found, needed = _documents_found(rows)
            out.append(
                {
                    "k": k,
                    "condition": name,
                    "accuracy": (n_correct / len(scored)) if scored else None,
                    "accuracy_ci": _interval(n_correct, len(scored)),
                    "n_correct": n_correct,
                    "n_scored": len(scored),
                    "retrieval_recall": (sum(recalls) / len(recalls)) if recalls else None,
                    "retrieval_recall_ci": _interval(found, needed) if recalls else None,
                    "documents_found": found,
                    "documents_needed": needed,
                    "n": len(rows),
                    "n_errors": sum(1 for r in rows if _failed(r)),
                    "n_empty_answers": sum(1 for r in rows if r.get("answer") == ""),
                    "mean_hops": (sum(hops) / len(hops)) if hops else None,
                    "n_unanswerable": sum(1 for r in rows if r["hops"] is None),
                }
            )
    return out


class _GroupProgress:
    """Reports each (condition, k) group's figures once all its questions are answered.

    It sees the runner's fresh records through its ``shape`` hook (each chunk's records just before
    they are appended); groups taken wholly or partly from an earlier run are reported at the end."""

    def __init__(self, items: Sequence[KinshipItem], callback: Callable[[str], None]) -> None:
        self.callback = callback
        self.group_of = [item.group for item in items]
        self.rows: dict[tuple[str, int], list[int]] = {}
        for index, group in enumerate(self.group_of):
            self.rows.setdefault(group, []).append(index)
        self.fresh: dict[int, dict[str, Any]] = {}
        self.reported: set[tuple[str, int]] = set()

    def shape(self, outcome: RowOutcome) -> dict[str, Any]:
        record = outcome.to_record()
        self.fresh[outcome.index] = record
        group = self.group_of[outcome.index]
        if all(index in self.fresh for index in self.rows[group]):
            self._report(group, [self.fresh[index] for index in self.rows[group]])
        return record

    def finish(self, records: Sequence[Mapping[str, Any]]) -> None:
        for group, indices in self.rows.items():  # in run order
            self._report(group, [records[index] for index in indices])

    def _report(self, group: tuple[str, int], records: Sequence[Mapping[str, Any]]) -> None:
        if group in self.reported:
            return
        self.reported.add(group)
        name, k = group
        [summary] = aggregate(records, [k], [name])
        acc, rec = summary["accuracy"], summary["retrieval_recall"]
        self.callback(
            f"{name:>18} k={k:<4} accuracy {'-' if acc is None else f'{acc:.2f}'} "
            f"retrieval recall {'-' if rec is None else f'{rec:.2f}'} (n={len(records)})"
        )


# --------------------------------------------------------------------------------------------- run


def _check_previous(out: Path, settings: Mapping[str, Any], resume: bool, overwrite: bool) -> None:
    """Refuse before ``run.json`` is rewritten: the runner raises the same way, but only after it."""
    answers = out / ANSWERS_FILE
    if not answers.exists():
        return
    if not resume:
        if overwrite:
            return
        raise OutputExistsError(f"output file {str(answers)!r} already exists")
    run_file = out / RUN_FILE
    if run_file.exists() and json.loads(run_file.read_text()).get("settings") != dict(settings):
        raise ParameterError(
            f"{run_file} was written with other settings; resume needs the same ones (or use another --out)",
            parameter="resume",
        )


async def arun_kinship(
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
    """The async form of :func:`run_kinship` (same arguments), for code already on an event loop."""
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
    answering = system_settings(system)
    if answering is not None:
        full_settings["system_settings"] = answering
    _check_previous(out, full_settings, resume, overwrite)
    write_output(out / RUN_FILE, dumps_json({"settings": full_settings}) + "\n", overwrite=True)
    sampled = [_sample(c.queries, max_queries, source.seed) for c in conditions]
    items = _work_items(conditions, ks, sampled)
    # One chunk per (condition, k) group where possible: a group is what the system gets in one call
    # (the pipeline batches its generation by call, and batch composition can change a local model's
    # floats). Every k of a condition asks the same sampled queries, so with one chunk size for the run
    # the chunks are exactly the groups whenever every condition samples as many queries (the usual
    # --max-queries run). Otherwise (conditions of different sizes) a chunk can end inside a group, and
    # that group is answered in two calls. Either way chunks are fixed by position, so a resumed run
    # computes exactly what a fresh run computes.
    chunk_size = max([len(queries) for queries in sampled] + [1])
    tag = (
        f"kinship-n{source.names}-g{source.generations}-s{source.seed}-d{source.distractor_share}-{hold_out}"
    )
    reporter = None if progress is None else _GroupProgress(items, progress)
    start = time.perf_counter()
    records, stats = await run_rows(
        items,
        [_SystemStep(system, tag)],
        output=answers_path,
        chunk_size=chunk_size,
        resume=resume,
        overwrite=overwrite,
        progress=False,
        desc="kinship",
        shape=None if reporter is None else reporter.shape,
    )
    if reporter is not None:
        reporter.finish(records)
    return KinshipRun(
        results=aggregate(records, ks, [c.name for c in conditions]),
        answers_path=answers_path,
        settings=full_settings,
        seconds=time.perf_counter() - start,
        n_answered=stats.n_rows - stats.n_resumed,
        n_resumed=stats.n_resumed,
        timings=system.timings.as_dict(),
    )


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
    must match for ``resume``. An existing ``answers.jsonl`` is an error unless ``resume`` (continue
    it; finished chunks are not asked again) or ``overwrite``. ``progress`` gets one line per
    (condition, k) with its accuracy and retrieval recall.
    """
    return run_sync(
        arun_kinship(
            source,
            system,
            ks,
            out_dir,
            relations=relations,
            hold_out=hold_out,
            max_queries=max_queries,
            resume=resume,
            overwrite=overwrite,
            settings=settings,
            progress=progress,
        )
    )
