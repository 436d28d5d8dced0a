"""The engines behind one protocol (issue 26): one request from ``evaluate`` and ``aevaluate``, one
output check and one run-store lifecycle for the local and the Ray engine, no import cycle."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import doctest
import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsense.data import RagRow, sample_rows_path
from ragsense.errors import OutputExistsError
from ragsense.evaluation import (
    Engine,
    EvaluateRequest,
    Evaluation,
    LocalEngine,
    MetricInfo,
    Needs,
    RayEngine,
    ResultCountError,
    RunStats,
    aevaluate,
    evaluate,
)
from ragsense.evaluation._outputs import OutputFile, OutputInUseError, acquire_output_lock, check_free
from ragsense.evaluation._recording import Recording
from ragsense.evaluation.engines._shards import ShardFolder
from ragsense.models import ModelPool
from ragsense.runs import RunStore

EVALUATION = Path(__file__).parents[2] / "src" / "ragsense" / "evaluation"
ROWS = [{"id": f"r{i}", "question": f"Q{i}?", "contexts": [f"C{i}."], "answer": f"A{i}."} for i in range(3)]


# ------------------------------------------------------------------------------------------ layout


def _module_name(path: Path) -> str:
    parts = path.relative_to(EVALUATION.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ``ragsense.evaluation`` modules ``path`` imports (``from pkg import mod`` counted as ``mod``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(n for n in names if n in modules)
            if node.module in modules and not all(n in modules for n in names):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
    return found


def test_no_import_cycle_inside_evaluation() -> None:
    files = sorted(EVALUATION.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    assert {"ragsense.evaluation.engines._local", "ragsense.evaluation.engines._ray"} <= modules
    graph = {_module_name(p): _imports(p, modules) for p in files}
    # No module below the package imports the package itself (it would import every module).
    assert not [m for m, deps in graph.items() if "ragsense.evaluation" in deps]
    # The engines never reach up to the API that dispatches to them.
    for module, deps in graph.items():
        if module.startswith("ragsense.evaluation.engines"):
            assert "ragsense.evaluation._api" not in deps, module
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        for dep in sorted(graph[module]):
            if dep in path:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep != module:
                visit(dep, [*path, dep])

    for module in graph:
        visit(module, [module])
    assert cycles == []


def test_no_module_holds_more_than_about_500_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in EVALUATION.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 500} == {}


@pytest.mark.parametrize(
    "module",
    [
        "ragsense.evaluation._api",
        "ragsense.evaluation._outputs",
        "ragsense.evaluation._recording",
        "ragsense.evaluation.engines",
        "ragsense.evaluation.engines._base",
        "ragsense.evaluation.engines._local",
        "ragsense.evaluation.engines._ray",
        "ragsense.evaluation.engines._shards",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0


# ----------------------------------------------------------------------------------- one request


class SpyEngine:
    """An engine of one's own: keeps the requests it is given and returns an empty evaluation."""

    def __init__(self) -> None:
        self.requests: list[EvaluateRequest] = []

    def run(self, request: EvaluateRequest) -> Evaluation:
        self.requests.append(request)
        return Evaluation([], [], RunStats())

    async def arun(self, request: EvaluateRequest) -> Evaluation:
        return self.run(request)


def test_evaluate_and_aevaluate_take_the_same_arguments() -> None:
    assert inspect.signature(evaluate).parameters == inspect.signature(aevaluate).parameters


def test_evaluate_and_aevaluate_hand_the_engine_the_same_request(tmp_path: Path) -> None:
    spy = SpyEngine()
    assert isinstance(spy, Engine) and isinstance(LocalEngine(), Engine) and isinstance(RayEngine(), Engine)
    options: dict[str, Any] = {
        "model": "fake",
        "output": tmp_path / "out.csv",
        "chunk_size": 4,
        "resume": True,
        "progress": False,
        "store": tmp_path / "runs.db",
        "tag": "v2",
        "engine": spy,
    }
    evaluate(ROWS, "consens,similarity", **options)
    asyncio.run(aevaluate(ROWS, "consens,similarity", **options))
    first, second = spy.requests
    plain = [f.name for f in dataclasses.fields(EvaluateRequest) if f.name not in ("metrics", "store")]
    assert [getattr(first, n) for n in plain] == [getattr(second, n) for n in plain]
    assert (first.chunk_size, first.resume, first.tag, first.command) == (4, True, "v2", "python")
    assert [m.name for m in first.metrics] == [m.name for m in second.metrics] == ["consens", "similarity"]
    assert first.store is not None and second.store is not None and first.store.path == second.store.path
    assert not (tmp_path / "runs.db").exists()  # resolving a request records nothing


# ------------------------------------------------------------------------------ one output check


class Found:
    """A :class:`RunOutput` that reports what is there."""

    lock_location = None

    def __init__(self, found: tuple[str, bool] | None) -> None:
        self.found = found

    def existing(self) -> tuple[str, bool] | None:
        return self.found


@pytest.mark.parametrize(
    ("found", "resume", "overwrite", "refused", "can_resume"),
    [
        (None, False, False, False, None),
        (("output file 'o' already exists", True), False, False, True, True),
        (("output file 'o' already exists", True), True, False, False, None),
        (("output file 'o' already exists", False), True, False, True, False),
        (("output file 'o' already exists", False), False, True, False, None),
    ],
)
def test_one_rule_for_an_existing_output(
    found: tuple[str, bool] | None, resume: bool, overwrite: bool, refused: bool, can_resume: bool | None
) -> None:
    if not refused:
        check_free(Found(found), resume=resume, overwrite=overwrite)
        return
    with pytest.raises(OutputExistsError, match="output file 'o' already exists") as caught:
        check_free(Found(found), resume=resume, overwrite=overwrite)
    assert caught.value.can_resume is can_resume


def test_files_and_folders_say_what_is_there(tmp_path: Path) -> None:
    csv = OutputFile.of(tmp_path / "out.csv")
    assert csv.existing() is None
    csv.path.write_text("id\n")  # type: ignore[union-attr]
    assert csv.existing() == (f"output file {str(tmp_path / 'out.csv')!r} already exists", False)
    Path(csv.working).write_text("")
    assert csv.existing() is not None and csv.existing()[1] is True  # type: ignore[index]
    assert OutputFile.of("-").existing() is None and OutputFile.of("-").lock_location is None
    folder = ShardFolder(tmp_path / "shards")
    assert folder.existing() is None
    folder.write("part-00000-of-00001.jsonl", b"")
    assert folder.existing() == (f"output folder {folder.location!r} already holds a ragsense run", True)


# ---------------------------------------------------------------------------- one run lifecycle


class BrokenMetric:
    """A metric with a bug: it returns one result too few, which stops the run (ResultCountError)."""

    name = "broken"
    needs = Needs(("answer",))
    fields = ("broken",)
    scores = ("broken",)
    verdict = None

    def settings(self) -> dict[str, Any]:
        return {}

    async def setup(self, pool: ModelPool) -> None:
        return None

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any]]:
        return [{"broken": 1.0}] * (len(rows) - 1)

    async def aclose(self) -> None:
        return None


def test_a_failed_local_run_is_kept_incomplete_with_its_reason(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    with pytest.raises(ResultCountError):
        evaluate(ROWS, [BrokenMetric()], store=store, progress=False)
    [run] = store.list_runs()
    assert run.status == "incomplete" and run.note is not None
    assert run.note.startswith("ResultCountError: metric 'broken' returned 2 results for 3 rows")


def test_a_refused_run_leaves_no_trace(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    out = tmp_path / "out.jsonl"
    evaluate(ROWS, "consens", model="fake", output=out, store=store, progress=False)
    assert [r.status for r in store.list_runs()] == ["complete"]
    with pytest.raises(OutputExistsError):
        evaluate(ROWS, "consens", model="fake", output=out, store=store, progress=False)
    lock = acquire_output_lock(tmp_path / "busy.jsonl")
    try:
        with pytest.raises(OutputInUseError):
            evaluate(
                ROWS, "consens", model="fake", output=tmp_path / "busy.jsonl", store=store, progress=False
            )
    finally:
        lock.unlink()
    assert len(store.list_runs()) == 1 and not (tmp_path / "busy.jsonl").exists()


def test_a_refused_ray_run_leaves_no_trace(tmp_path: Path) -> None:
    pytest.importorskip("ray.data")
    store = RunStore(tmp_path / "runs.db")
    folder = ShardFolder(tmp_path / "shards")
    folder.write("part-00000-of-00001.parquet", b"")
    # Refused before Ray starts, a row is read or the run is entered in the store.
    with pytest.raises(OutputExistsError, match="already holds a ragsense run"):
        evaluate(
            sample_rows_path(), "consens", model="fake", engine="ray", output=folder.location, store=store
        )
    assert not store.path.exists()


def test_a_recording_starts_once_and_records_earlier_chunks_first(tmp_path: Path) -> None:
    info = MetricInfo("m", ("m",), ("m",), None, {})
    assert Recording(None, tag=None, command="python", dataset="d").sink() is None
    store = RunStore(tmp_path / "runs.db")
    recording = Recording(store, tag="t", command="ragsense evaluate", dataset="d")
    assert recording.sink() is None and recording.run_id is None  # nothing before it starts
    recording.start([info], earlier=[[{"_row": 0, "m": 1.0}], [{"_row": 1, "m": 2.0}]])
    run_id = recording.run_id
    recording.start([info], earlier=[[{"_row": 9, "m": 0.0}]])  # started already: nothing more
    assert recording.run_id == run_id and recording.sink() is not None
    with pytest.raises(KeyboardInterrupt), recording.abandoned_on_failure():
        raise KeyboardInterrupt
    stored = store.get(str(run_id))
    assert (stored.status, stored.note, stored.n_rows, stored.tag) == ("incomplete", "interrupted", 2, "t")
    finished = Recording(store, tag=None, command="python", dataset="d")
    finished.start([info])
    rows = [{"_row": 0, "m": 1.0, "errors": []}]
    finished.add_rows(rows, inputs=None)
    evaluation = finished.finish(rows, [info], RunStats(1))
    assert evaluation.run_id == finished.run_id and evaluation.rows == rows
    stored = store.get(str(finished.run_id))
    assert stored.status == "complete" and stored.summary is not None and stored.summary["n_rows"] == 1
