"""The Ray engine on a real two-node cluster (tests/cluster/conftest.py) with the bundled model.

Every check compares with a single-process ``evaluate`` of the same rows: the same records bit for bit
(error records included), from a fresh run, a resumed run, the CLI, and a run that loses its worker
node midway. The tests share one cluster and run in file order; the node-killing test is last.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from ragsense import evaluate
from ragsense.data import read_rows, sample_rows_path
from ragsense.evaluation import Evaluation, RayEngine, read_shards
from ragsense.evaluation.engines._shards import MANIFEST
from ragsense.runs import RunStore

from ._helpers import LocalRayCluster, kill_all, processes_with

pytest.importorskip("ray", reason="the Ray engine's tests need the extra ragsense[ray]")

pytestmark = [
    pytest.mark.model,
    # Ray Data's own settings object warns about its deprecated fields when it is copied.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

MODEL = "smollm2-135m"
CHUNK = 2  # small chunks and one chunk per shard: many shards from few rows


def _input_lines() -> list[str]:
    """Two copies of the first eight sample rows (new ids), then rows each metric or reader must mark:
    20 lines, 10 shards of 2 (the counts below)."""
    base = [row.to_record() for row in read_rows(sample_rows_path())][:8]
    rows = [{**r, "id": f"{copy}-{r['id']}"} for copy in ("a", "b") for r in base]
    lines = [json.dumps(r) for r in rows]
    lines.insert(5, "{this line is not JSON")
    lines.insert(9, json.dumps({"id": "no-answer", "question": "Who?", "contexts": ["Nobody."]}))
    lines.append(
        json.dumps({"id": "symbols", "question": "Code?", "contexts": ["It is 4711."], "answer": "?!"})
    )
    lines.append(json.dumps({**rows[0], "answer": "A repeated id."}))
    return lines


@dataclass
class FirstRun:
    source: Path
    out: Path
    store: Path
    local: Evaluation
    ray: Evaluation


@pytest.fixture(scope="module")
def first(ray_cluster: LocalRayCluster, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    root = tmp_path_factory.mktemp("ray-engine")
    source = root / "rows.jsonl"
    source.write_text("\n".join(_input_lines()) + "\n")
    store = root / "runs.sqlite"
    engine = RayEngine(address=ray_cluster.address, shard_chunks=1)
    # Bit-identity holds at equal torch thread counts (a matrix product's sums are split by thread):
    # the single-process reference runs on the workers' count, whatever earlier tests left set.
    previous = torch.get_num_threads()
    torch.set_num_threads(engine.threads_per_worker)
    try:
        local = evaluate(
            source, "consens", model=MODEL, chunk_size=CHUNK, progress=False, store=store, tag="local"
        )
    finally:
        torch.set_num_threads(previous)
    ray = evaluate(
        source, "consens", model=MODEL, chunk_size=CHUNK, output=root / "out", engine=engine,
        progress=False, store=store, tag="ray",
    )  # fmt: skip
    return FirstRun(source, root / "out", store, local, ray)


def _shard_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("part-*"))


def _summary(run: Evaluation) -> dict[str, Any]:
    return {k: v for k, v in run.summary().to_dict().items() if k != "seconds"}


def test_same_rows_as_a_single_process(first: FirstRun) -> None:
    n = len(first.local.rows)
    assert n == 20
    assert first.ray.rows == first.local.rows  # every field, every float, bit for bit
    assert read_shards(first.out) == first.local.rows  # what the shard files hold, too
    assert _shard_files(first.out) == [f"part-{k:05d}-of-00010.parquet" for k in range(10)]
    assert _summary(first.ray) == _summary(first.local)
    marked = {
        r["_row"]: [(e["metric"], e["field"]) for e in r["errors"]] for r in first.ray.rows if r["errors"]
    }
    assert marked == {
        5: [("input", None)],  # not JSON
        9: [("consens", "answer")],  # no answer
        18: [("consens", "answer")],  # no word to score
        19: [("input", "id")],  # a repeated id
    }
    assert all(isinstance(r["consens"], float) for r in first.ray.rows if not r["errors"])


def test_recorded_in_the_run_store(first: FirstRun) -> None:
    store = RunStore(first.store)
    ray_run, local_run = store.get("ray"), store.get("local")
    assert ray_run.status == "complete" and ray_run.n_rows == 20
    assert ray_run.input_hash == local_run.input_hash  # the same rows, whatever engine read them
    assert store.rows(ray_run.id) == first.local.rows
    assert ray_run.metrics[0]["models"] == local_run.metrics[0]["models"]  # the workers' fingerprints


def test_resume_recomputes_only_missing_shards(first: FirstRun, ray_cluster: LocalRayCluster) -> None:
    out = first.out
    with pytest.raises(FileExistsError, match="resume"):
        evaluate(
            first.source, "consens", model=MODEL, chunk_size=CHUNK, output=out, engine="ray", progress=False
        )
    with pytest.raises(ValueError, match="chunk_size 2, this run has 4"):
        evaluate(
            first.source, "consens", model=MODEL, chunk_size=4, output=out, engine="ray", resume=True,
            progress=False,
        )  # fmt: skip
    removed = ["part-00003-of-00010.parquet", "part-00007-of-00010.parquet"]
    for name in removed:
        (out / name).unlink()
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}
    engine = RayEngine(address=ray_cluster.address, shard_chunks=1)
    resumed = evaluate(
        first.source, "consens", model=MODEL, chunk_size=CHUNK, output=out, engine=engine, resume=True,
        progress=False,
    )  # fmt: skip
    assert resumed.rows == first.local.rows
    assert resumed.stats.n_resumed == 20 - 4  # two shards of two rows were scored again, nothing else
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("part-*") if p.name in kept} == kept
    assert all((out / name).exists() for name in removed)


def test_cli(first: FirstRun, ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    # The command's wiring (flags, shards, exit code, summary); the fake model keeps it quick, and the
    # bundled model's results on the cluster are checked above.
    out = tmp_path / "cli-out"
    command = [
        sys.executable, "-m", "ragsense", "evaluate", str(first.source), "-o", str(out), "--engine", "ray",
        "--address", ray_cluster.address, "--workers", "2", "--chunk-size", str(CHUNK), "--shard-chunks", "1",
        "--shard-format", "jsonl", "--model", "fake", "--store", str(tmp_path / "runs.sqlite"),
        "--table", "never",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 3, done.stderr[-3000:]  # finished, some rows have errors
    assert "20 rows: 16 ok, 4 with errors" in done.stderr
    assert f"written to {out}" in done.stderr
    assert _shard_files(out) == [f"part-{k:05d}-of-00010.jsonl" for k in range(10)]
    local = evaluate(first.source, "consens", model="fake", chunk_size=CHUNK, progress=False)
    assert read_shards(out) == local.rows
    manifest = json.loads((out / MANIFEST).read_text())
    assert (manifest["n_rows"], manifest["chunk_size"], manifest["n_shards"]) == (20, CHUNK, 10)


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
def test_local_ray_without_address(tmp_path: Path) -> None:
    """No --address: a Ray of its own on this machine, shut down when the run ends."""
    temp = Path(tempfile.mkdtemp(prefix="rs-local-", dir="/tmp"))  # short: Ray's socket paths
    out = tmp_path / "local-out"
    env = {**os.environ, "RAY_TMPDIR": str(temp)}
    command = [
        sys.executable, "-m", "ragsense", "evaluate", "--sample", "-o", str(out), "--engine", "ray",
        "--workers", "1", "--model", "fake", "--no-store", "--table", "never",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert read_shards(out) == evaluate(sample_rows_path(), "consens", model="fake", progress=False).rows
        time.sleep(1)
        assert processes_with(str(temp)) == []  # the run's own Ray is gone with it
    finally:
        kill_all(processes_with(str(temp)))
        shutil.rmtree(temp, ignore_errors=True)


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
def test_worker_node_killed_mid_run(first: FirstRun, ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    """The second node dies after the first shard is written: its actor's shard is retried on the head
    and the run completes with every row exactly once, still equal to a single process."""
    out = tmp_path / "killed"
    killed: list[tuple[int, int]] = []  # (shard files written by then, processes killed)

    def kill_when_a_shard_lands() -> None:
        deadline = time.monotonic() + 240
        while not any(out.glob("part-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        written = len(_shard_files(out))
        killed.append((written, ray_cluster.kill_node(ray_cluster.node_manager_ports[1])))

    killer = threading.Thread(target=kill_when_a_shard_lands, daemon=True)
    killer.start()
    engine = RayEngine(address=ray_cluster.address, shard_chunks=1, workers=2)
    run = evaluate(
        first.source, "consens", model=MODEL, chunk_size=CHUNK, output=out, engine=engine, progress=False
    )
    killer.join(timeout=10)
    assert killed, "the run ended before any shard was written"
    written, victims = killed[0]
    assert victims > 0 and written < 10  # the worker node died with shards still to score
    rows = [r["_row"] for r in run.rows]
    assert rows == list(range(20))  # every row exactly once
    assert run.rows == first.local.rows
    assert read_shards(out) == first.local.rows
    assert _shard_files(out) == [f"part-{k:05d}-of-00010.parquet" for k in range(10)]
