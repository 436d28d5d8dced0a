"""The run store: round trip, references, schema refusal, and runs that stop half-way."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragsense.consens import DEFAULT_AGGREGATION
from ragsense.evaluation import evaluate
from ragsense.runs import (
    COMPLETE,
    INCOMPLETE,
    SCHEMA_VERSION,
    RunNotFoundError,
    RunStore,
    StoreVersionError,
)

ROWS = [
    {
        "id": f"r{i}",
        "question": f"Who built tower {i}?",
        "contexts": [f"Tower {i} was built by Ada.", "Bees make honey."],
        "answer": "Ada built it." if i % 2 else "Nobody knows.",
    }
    for i in range(6)
]


def test_round_trip_keeps_settings_rows_and_summary(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    run = evaluate(ROWS, ["attribution", "similarity"], model="fake", progress=False, store=store, tag="v1")
    assert run.run_id is not None
    stored = store.get(run.run_id)
    assert stored.status == COMPLETE and stored.tag == "v1" and stored.n_rows == len(ROWS)
    assert stored.metric_names == ["consens", "similarity"]
    consens = stored.metrics[0]
    assert (
        consens["settings"]["aggregation"] == DEFAULT_AGGREGATION.value
        and consens["settings"]["attribution"] is True
    )
    assert consens["models"] == {"model": "fake:fake"}
    assert stored.metrics[1]["models"]["embedder"].startswith("all-minilm-l6-v2@")
    assert stored.input_hash is not None and len(stored.input_hash) == 64
    assert stored.summary is not None
    assert stored.summary["metrics"]["consens"]["n"] == len(ROWS)
    assert stored.means()["consens"] == pytest.approx(run.summary().metrics["consens"].scores["consens"].mean)
    # The rows come back exactly as the run returned them, in input order.
    assert store.rows(stored.id) == json.loads(json.dumps(run.rows))
    # Same input rows, another field order and file format: the same input hash.
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(dict(reversed(list(r.items())))) + "\n" for r in ROWS))
    again = evaluate(path, ["similarity"], progress=False, store=store)
    assert store.get(again.run_id or "").input_hash == stored.input_hash
    other = evaluate(ROWS[:3], ["similarity"], progress=False, store=store)
    assert store.get(other.run_id or "").input_hash != stored.input_hash


def test_references_by_id_prefix_tag_and_latest(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    first = evaluate(ROWS[:2], "consens", model="fake", progress=False, store=store, tag="baseline")
    second = evaluate(ROWS[:2], "consens", model="fake", progress=False, store=store, tag="baseline")
    assert first.run_id and second.run_id
    assert store.get("baseline").id == second.run_id  # a tag names its newest run
    assert store.get("latest").id == second.run_id
    assert store.get(first.run_id[:6]).id == first.run_id
    assert [r.id for r in store.list_runs()] == [second.run_id, first.run_id]
    assert [r.id for r in store.list_runs(tag="nope")] == []
    with pytest.raises(RunNotFoundError, match="no run 'missing'"):
        store.get("missing")
    with pytest.raises(RunNotFoundError):
        store.get(first.run_id[:2])  # too short to be a prefix
    store.delete(first.run_id)
    assert [r.id for r in store.list_runs()] == [second.run_id]
    assert store.rows(first.run_id) == []


def test_api_records_nothing_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "default.sqlite"
    monkeypatch.setenv("RAGSENSE_STORE", str(target))
    run = evaluate(ROWS[:1], "consens", model="fake", progress=False)
    assert run.run_id is None and not target.exists()
    run = evaluate(ROWS[:1], "consens", model="fake", progress=False, store=True)
    assert RunStore(target).get("latest").id == run.run_id


def test_a_newer_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    RunStore(path).list_runs()  # creates it
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    before = path.read_bytes()
    with pytest.raises(StoreVersionError, match=r"version 2 run store, written by a newer ragsense"):
        RunStore(path).list_runs()
    with pytest.raises(StoreVersionError):
        evaluate(ROWS[:1], "consens", model="fake", progress=False, store=path)
    assert path.read_bytes() == before


def test_an_older_store_without_a_migration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    RunStore(path).list_runs()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(StoreVersionError, match="cannot migrate it to version 1"):
        RunStore(path).list_runs()


def test_an_older_store_is_migrated_in_one_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragsense.runs import _schema

    path = tmp_path / "runs.sqlite"
    RunStore(path).list_runs()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
        connection.execute("DROP INDEX runs_by_created")
    # A version-0 store lacked the index: the step adds it, and the version moves to 1 with it.
    monkeypatch.setitem(
        _schema.MIGRATIONS, 0, lambda c: c.execute("CREATE INDEX runs_by_created ON runs (created)")
    )
    assert RunStore(path).list_runs() == []
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
        assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'runs_by_created'").fetchone()


def test_foreign_and_broken_files_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(StoreVersionError, match="not a ragsense run store"):
        RunStore(other).list_runs()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreVersionError, match="not a readable run store"):
        RunStore(junk).list_runs()


class _Boom(RuntimeError):
    pass


def test_a_run_that_raises_is_incomplete_and_keeps_its_finished_chunks(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")

    class FailsOnThirdChunk:
        name = "flaky"
        fields = ("flaky",)
        scores = ("flaky",)
        verdict = None
        calls = 0

        @property
        def needs(self) -> Any:
            from ragsense.evaluation import Needs

            return Needs(("answer",))

        def settings(self) -> dict[str, Any]:
            return {}

        async def setup(self, pool: Any) -> None:
            return None

        async def score(self, rows: Any) -> list[dict[str, Any]]:
            type(self).calls += 1
            if type(self).calls == 3:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C in the third chunk
            return [{"flaky": 1.0} for _ in rows]

        async def aclose(self) -> None:
            return None

    with pytest.raises(KeyboardInterrupt):
        evaluate(ROWS, [FailsOnThirdChunk()], progress=False, store=store, chunk_size=2)
    stored = store.get("latest")
    assert stored.status == INCOMPLETE and stored.note == "interrupted"
    assert stored.n_rows == 4 and [r["id"] for r in store.rows(stored.id)] == ["r0", "r1", "r2", "r3"]


def test_a_killed_run_shows_as_incomplete_with_its_rows(tmp_path: Path) -> None:
    """A process killed outright (SIGKILL) cannot mark its run: the store sees its pid is gone."""
    store_path = tmp_path / "runs.sqlite"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({**ROWS[i % 6], "id": f"k{i}"}) + "\n" for i in range(400)))
    script = (
        "import time, ragsense.evaluation._runner as r\n"
        "from ragsense.evaluation import evaluate\n"
        "original = r._process_chunk\n"
        "async def slow(*a, **k):\n"
        "    time.sleep(0.05)\n"
        "    return await original(*a, **k)\n"
        "r._process_chunk = slow\n"
        f"evaluate({str(rows)!r}, 'consens', model='fake', progress=False,\n"
        f"         store={str(store_path)!r}, chunk_size=4)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"})
    store = RunStore(store_path)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if store_path.exists():
                runs = store.list_runs()
                if runs and runs[0].n_rows >= 8:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the run recorded no rows in time")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    stored = store.get("latest")
    assert stored.status == INCOMPLETE and "process ended" in (stored.note or "")
    kept = store.rows(stored.id)
    assert 8 <= len(kept) < 400 and len(kept) % 4 == 0  # whole chunks only
    assert [r["_row"] for r in kept] == list(range(len(kept)))


def test_named_vera_takes_the_evaluate_model_as_its_judge(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    run = evaluate(ROWS[:2], "consens,vera", model="fake", progress=False, store=store)
    vera = store.get(run.run_id or "").metrics[1]
    assert vera["settings"]["judge"] == "fake" and vera["models"] == {"judge": "fake:fake"}
