"""The Ray engine's rules without Ray: shard plans aligned with the runner's chunks, the manifest checked
on resume, shard files that give back exactly what was written, input files parsed as ``read_rows``
parses them, the worker's scoring equal to ``evaluate``'s, and the missing extra named."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ragsense import evaluate
from ragsense.cli import main
from ragsense.consens import ConSens
from ragsense.data import RowError, parse_rows, read_rows, sample_rows_path, write_csv, write_parquet
from ragsense.errors import BackendUnavailableError, InputError, ParameterError
from ragsense.evaluation import RayEngine, read_shards
from ragsense.evaluation._api import engine_of
from ragsense.evaluation._runner import with_fingerprint
from ragsense.evaluation.engines import LocalEngine, require_ray
from ragsense.evaluation.engines._ray import _prepare
from ragsense.evaluation.engines._ray_worker import ShardScorer
from ragsense.evaluation.engines._shards import (
    MANIFEST,
    Manifest,
    ShardFolder,
    ShardPlan,
    auto_shard_chunks,
    check_shard,
    decode_shard,
    encode_shard,
    input_files,
    input_fingerprint,
    parse_files,
)

SAMPLE = [row.to_record() for row in read_rows(sample_rows_path())]


# ------------------------------------------------------------------------------------------------ plan


@pytest.mark.parametrize(
    ("n_rows", "chunk_size", "shard_chunks"), [(0, 16, 1), (1, 16, 1), (70, 16, 2), (64, 4, 3)]
)
def test_shards_are_whole_runner_chunks(n_rows: int, chunk_size: int, shard_chunks: int) -> None:
    plan = ShardPlan(n_rows, chunk_size, shard_chunks)
    covered = [i for s in plan.shards for i in range(s.start, s.stop)]
    assert covered == list(range(n_rows))  # every row in exactly one shard, in order
    assert all(s.start % chunk_size == 0 for s in plan.shards)  # chunk k = rows k*chunk_size.. in both
    assert all(len(s) == chunk_size * shard_chunks for s in plan.shards[:-1])
    names = [s.name(plan.n_shards, "parquet") for s in plan.shards]
    assert names == sorted(names) and len(set(names)) == plan.n_shards


def test_the_plan_depends_on_the_input_only() -> None:
    assert [auto_shard_chunks(n, 16) for n in (0, 16, 512, 513, 20_000, 10**7)] == [1, 1, 1, 2, 40, 64]
    assert ShardPlan(100, 16, auto_shard_chunks(100, 16)).n_shards == 7
    with pytest.raises(ParameterError, match="shard_chunks"):
        ShardPlan(10, 16, 0)


# -------------------------------------------------------------------------------------------- manifest


def _manifest(**changes: Any) -> Manifest:
    fields: dict[str, Any] = {
        "n_rows": 20,
        "chunk_size": 2,
        "shard_chunks": 1,
        "n_shards": 10,
        "shard_format": "parquet",
        "input": "abc",
        "metrics": [{"name": "consens", "settings": {"aggregation": "q25"}}],
    }
    return Manifest(**{**fields, **changes})


def test_manifest_round_trip_and_checks() -> None:
    manifest = _manifest()
    assert Manifest.from_json(manifest.to_json(), "out") == manifest
    manifest.check(_manifest(), "out")
    # Another input is not refused as a whole: its shards are matched row by row (_prepare).
    manifest.check(_manifest(input="def"), "out")
    with pytest.raises(ValueError, match="metrics"):
        manifest.check(_manifest(metrics=[{"name": "consens", "settings": {"aggregation": "mean"}}]), "out")
    with pytest.raises(ValueError, match="shard_format 'parquet', this run has 'jsonl'"):
        manifest.check(_manifest(shard_format="jsonl"), "out")
    with pytest.raises(ValueError, match="not readable"):
        Manifest.from_json("{}", "out")


def test_fingerprint_sees_bad_rows() -> None:
    def rows(bad: str) -> list[Any]:
        return parse_files([("a.jsonl", (json.dumps(SAMPLE[0]) + "\n" + bad + "\n").encode())])

    assert input_fingerprint(rows("{x")) == input_fingerprint(rows("{x"))
    assert input_fingerprint(rows("{x")) != input_fingerprint(rows("{y"))


# ----------------------------------------------------------------------------------------- shard files

RECORDS: list[dict[str, Any]] = [
    {"id": "a", "question": "Q?", "contexts": ["c1", "c2"], "answer": "A.", "consens": 0.1234567890123,
     "detail": {"q25": -0.5, "words": [["w", 1.5]]}, "n": 3, "flag": True, "errors": [], "_row": 4},
    {"id": "b", "question": "Ü?", "contexts": [], "answer": None, "consens": None, "detail": None,
     "n": 2.5, "errors": [{"metric": "consens", "field": "answer", "message": "empty"}], "_row": 5},
    {"id": "c", "errors": [], "_row": 6, "extra": "only here"},
]  # fmt: skip


@pytest.mark.parametrize("shard_format", ["parquet", "jsonl"])
def test_shards_give_back_what_was_written(shard_format: Any) -> None:
    decoded = decode_shard(encode_shard(RECORDS, shard_format), shard_format)
    assert decoded == RECORDS
    assert [type(r.get("n")) for r in decoded] == [int, float, type(None)]  # 3 stays an int


def test_parquet_shards_are_plain_tables(tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    folder = ShardFolder(tmp_path)
    folder.write("part-00000-of-00001.parquet", encode_shard(RECORDS, "parquet"))
    folder.write_manifest(_manifest())
    table = ds.dataset(tmp_path, format="parquet").to_table()  # the manifest is skipped (leading _)
    assert table.column("id").to_pylist() == ["a", "b", "c"]
    assert json.loads(table.column("detail")[0].as_py()) == RECORDS[0]["detail"]  # nested: JSON text


def test_check_shard_refuses_foreign_rows() -> None:
    shard = ShardPlan(10, 2, 1).shards[2]  # rows 4, 5
    check_shard(RECORDS[:2], shard, "part-00002")
    with pytest.raises(ValueError, match=r"not input rows 4\.\.5"):
        check_shard(RECORDS[1:], shard, "part-00002")


# ---------------------------------------------------------------------------------------- output folder


def test_folder_refuses_clears_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    plan = ShardPlan(4, 2, 1)
    manifest = _manifest(n_rows=4, n_shards=2)
    items = list(
        parse_rows([{"id": f"r{i}", "question": "Q?", "context": "C.", "answer": "A."} for i in range(4)])
    )
    assert _prepare(ShardFolder(out), manifest, plan, items, resume=False, overwrite=False) == ({}, 0)
    folder = ShardFolder(out)
    shard_1 = [with_fingerprint({"id": f"r{i}", "_row": i}, items[i]) for i in (2, 3)]
    folder.write("part-00001-of-00002.parquet", encode_shard(shard_1, "parquet"))
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="resume=True"):
        _prepare(folder, manifest, plan, items, resume=False, overwrite=False)
    kept = [{"id": "r2", "_row": 2}, {"id": "r3", "_row": 3}]  # read back without the fingerprints
    assert _prepare(folder, manifest, plan, items, resume=True, overwrite=False) == ({1: kept}, 0)
    with pytest.raises(ValueError, match="chunk_size 2, this run has 4"):
        _prepare(
            folder,
            _manifest(n_rows=4, chunk_size=4, n_shards=1),
            ShardPlan(4, 4, 1),
            items,
            resume=True,
            overwrite=False,
        )
    assert _prepare(folder, manifest, plan, items, resume=False, overwrite=True) == ({}, 0)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "notes.txt"]  # only its own files went
    assert read_shards(out) == []
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ParameterError, match="is a file"):
        ShardFolder(tmp_path / "file.txt").holds_run()


def test_a_shard_whose_input_changed_is_scored_again(tmp_path: Path) -> None:
    # Issue 25: the local runner's rule (finished_row_matches), on shards: same ids, one answer edited.
    rows = [{"id": f"r{i}", "question": "Q?", "context": "C.", "answer": "A."} for i in range(4)]
    old = list(parse_rows(rows))
    new = list(parse_rows([*rows[:3], {**rows[3], "answer": "Edited."}]))
    plan, manifest = ShardPlan(4, 2, 1), _manifest(n_rows=4, n_shards=2)
    folder = ShardFolder(tmp_path / "out")
    _prepare(folder, manifest, plan, old, resume=False, overwrite=False)
    for shard in plan.shards:
        written = [
            with_fingerprint({"id": f"r{i}", "_row": i}, old[i]) for i in range(shard.start, shard.stop)
        ]
        folder.write(shard.name(2, "parquet"), encode_shard(written, "parquet"))
    now = _manifest(n_rows=4, n_shards=2, input="changed")
    done, changed = _prepare(folder, now, plan, new, resume=True, overwrite=False)
    assert sorted(done) == [0] and changed == 1  # shard 1 holds the edited row: scored again
    assert folder.read_manifest() == now  # the folder now says which input it holds
    with pytest.raises(ValueError, match="has id 'r0' but the input's has 'x0'"):
        _prepare(
            folder,
            now,
            plan,
            list(parse_rows([{**r, "id": "x" + r["id"][1:]} for r in rows])),
            resume=True,
            overwrite=False,
        )


# ------------------------------------------------------------------------------------------ input files


def _same(a: list[Any], b: list[Any]) -> None:
    assert [type(x) for x in a] == [type(x) for x in b]
    assert a == b  # RagRow and RowError are dataclasses: every field compared


def test_files_parse_as_read_rows_parses_them(tmp_path: Path) -> None:
    rows = [*SAMPLE[:3], {"id": SAMPLE[0]["id"], "question": "Dup?", "context": "C.", "answer": "A."}]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(
        "\ufeff" + json.dumps(rows[0]) + "\r\n\n{bad\n" + "\n".join(json.dumps(r) for r in rows[1:])
    )
    csv = tmp_path / "rows.csv"
    write_csv(csv, rows)
    with csv.open("a") as handle:
        handle.write("x,y,z,w,v,u,t,s,r,q,p\n")  # more cells than the header
    parquet = tmp_path / "rows.parquet"
    write_parquet(parquet, rows)
    as_json = tmp_path / "rows.json"
    as_json.write_text(json.dumps([*rows, 7]))
    for path in (jsonl, csv, parquet, as_json):
        _same(parse_files([(str(path), path.read_bytes())]), list(read_rows(path, require_answer=False)))
    parsed = parse_files([(jsonl.name, jsonl.read_bytes())])
    assert [type(r).__name__ for r in parsed] == ["RagRow", "RowError", "RagRow", "RagRow", "RowError"]


def test_several_files_are_one_input(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_text(json.dumps(SAMPLE[1]) + "\n" + json.dumps(SAMPLE[0]) + "\n")
    (tmp_path / "a.jsonl").write_text(json.dumps(SAMPLE[0]) + "\n")
    (tmp_path / "_skipped.jsonl").write_text("{")
    (tmp_path / "notes.txt").write_text("not rows")
    files = input_files(tmp_path)
    assert [Path(f).name for f in files] == ["a.jsonl", "b.jsonl"]
    rows = parse_files((f, Path(f).read_bytes()) for f in files)
    assert [r.index if isinstance(r, RowError) else r.id for r in rows] == [
        SAMPLE[0]["id"],
        SAMPLE[1]["id"],
        2,
    ]
    assert isinstance(rows[2], RowError) and rows[2].field == "id"  # ids are checked across files


def test_input_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        input_files(tmp_path / "missing.jsonl")
    (tmp_path / "rows.txt").write_text("x")
    with pytest.raises(InputError, match="unsupported file type"):
        input_files(tmp_path / "rows.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no \.jsonl"):
        input_files(tmp_path / "empty")


# --------------------------------------------------------------------------------------- the worker


def test_worker_scores_as_evaluate_does() -> None:
    """What an actor does, without Ray: a shard at its offset equals that slice of a local run."""
    pa = pytest.importorskip("pyarrow")
    import pickle

    items = list(read_rows(sample_rows_path(), require_answer=False))
    local = evaluate(sample_rows_path(), [ConSens(model="fake")], chunk_size=2, progress=False)
    scorer = ShardScorer([ConSens(model="fake")], chunk_size=2, shape=None, threads=1)
    assert scorer.score(4, items[4:8]) == local.rows[4:8]
    batch = pa.table({"shard": [2], "start": [4], "items": [pickle.dumps(items[4:8])]})
    answer = scorer(batch).to_pylist()[0]
    assert answer["shard"] == 2 and json.loads(answer["records"]) == local.rows[4:8]
    assert json.loads(answer["infos"])[0]["name"] == "consens"


# ---------------------------------------------------------------------------------- engine and extra


def test_engine_settings() -> None:
    assert engine_of("local") == LocalEngine()
    assert engine_of("ray") == RayEngine()
    assert engine_of(RayEngine(workers=3)) == RayEngine(workers=3)
    with pytest.raises(ParameterError, match="engine"):
        engine_of("spark")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="shard_format"):
        RayEngine(shard_format="csv")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="pool"):
        from ragsense.models import ModelPool

        evaluate(SAMPLE, "consens", model="fake", engine="ray", pool=ModelPool())


@pytest.fixture
def without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ray", "ray.data"):
        monkeypatch.setitem(sys.modules, name, None)  # import ray now raises ImportError


def test_missing_extra_is_named(without_ray: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BackendUnavailableError, match=r"pip install 'ragsense\[ray\]'"):
        require_ray()
    with pytest.raises(BackendUnavailableError, match=r"ragsense\[ray\]"):
        evaluate(SAMPLE, "consens", model="fake", engine="ray", progress=False)
    assert main(["evaluate", "--sample", "--model", "fake", "--engine", "ray", "-o", "out"]) == 2
    assert "pip install 'ragsense[ray]'" in capsys.readouterr().err


def test_cli_ray_flags_need_the_ray_engine(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="--workers needs --engine ray"):
        main(["evaluate", "--sample", "--model", "fake", "--workers", "2"])
    with pytest.raises(SystemExit, match="give -o FOLDER"):
        main(["evaluate", "--sample", "--model", "fake", "--engine", "ray", "-o", "-"])


class _FakeRay:
    """Records how the engine starts Ray (no Ray needed): the arguments and the environment at init."""

    def __init__(self) -> None:
        self.inits: list[tuple[dict[str, Any], str | None]] = []
        self.running = False
        context = types.SimpleNamespace(enable_progress_bars=True)
        self.data = types.SimpleNamespace(DataContext=types.SimpleNamespace(get_current=lambda: context))

    def is_initialized(self) -> bool:
        return self.running

    def init(self, **kwargs: Any) -> None:
        self.inits.append((kwargs, os.environ.get("RAY_USAGE_STATS_ENABLED")))
        self.running = True

    def shutdown(self) -> None:
        self.running = False


def test_a_local_ray_sends_no_usage_statistics_and_listens_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 25: Ray collects usage statistics by default and its local processes listened on every
    # interface.
    from ragsense.evaluation.engines._ray import _session

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    ray = _FakeRay()
    with _session(ray, RayEngine(), progress=False):
        assert ray.running
    [(kwargs, usage)] = ray.inits
    assert usage == "0" and kwargs["address"] == "local" and kwargs["_node_ip_address"] == "127.0.0.1"
    assert not ray.running  # the Ray it started is shut down
    # A user's own opt-in is kept; a cluster the user names is theirs to configure (docs/cluster.md).
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "1")
    with _session(ray, RayEngine(), progress=False):
        pass
    assert ray.inits[-1][1] == "1"
    with _session(ray, RayEngine(address="ray://head:10001"), progress=False):
        pass
    assert ray.inits[-1][0] == {"address": "ray://head:10001"}
