"""A URL's ``user:password`` (``--base-url http://user:password@host/v1``) is never stored in the run
store, printed by ``runs show`` nor embedded in the HTML report (issue 47)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from ragsense.cli import main
from ragsense.models import load_model
from ragsense.runs import RunStore
from ragsense.serve import start_in_thread

SECRET = "pa55word-S3CRET"


def test_credentials_in_base_url_are_stored_and_shown_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, url = start_in_thread(load_model("fake"), model_name="served-fake", log_requests=False)
    try:
        base = url.replace("http://", f"http://user:{SECRET}@")
        rows = tmp_path / "rows.jsonl"
        row = {"question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada wrote it."}
        rows.write_text(json.dumps(row) + "\n")
        store = tmp_path / "runs.sqlite"
        argv = ["grounding", str(rows), "--model", "openai:served-fake", "--base-url", base]
        code = main([*argv, "--store", str(store), "-o", str(tmp_path / "out.jsonl"), "--table", "never"])
        assert code == 0, capsys.readouterr().err
    finally:
        server.close()
    with sqlite3.connect(store) as connection:
        stored = " ".join(str(v) for row in connection.execute("SELECT * FROM runs") for v in row)
    assert SECRET not in stored and url in stored  # the URL is kept, its credentials are not
    capsys.readouterr()
    assert main(["runs", "show", "latest", "--store", str(store)]) == 0
    assert main(["runs", "show", "latest", "--store", str(store), "--json"]) == 0
    shown = capsys.readouterr().out
    assert SECRET not in shown
    assert url in shown
    report = tmp_path / "report.html"
    assert main(["report", "latest", "--store", str(store), "-o", str(report)]) == 0
    assert SECRET not in report.read_text(encoding="utf-8")


def test_a_store_written_with_credentials_shows_them_removed(tmp_path: Path) -> None:
    """Runs recorded before the fix keep the password in the file; reading takes it out."""
    store = RunStore(tmp_path / "runs.sqlite")
    recorder = store.start(metrics=[], command="ragsense grounding --base-url http://u:x@h/v1")
    with sqlite3.connect(store.path) as connection:
        connection.execute(
            "UPDATE runs SET command = ?, metrics = ? WHERE id = ?",
            (
                f"ragsense grounding --base-url http://u:{SECRET}@h/v1",
                json.dumps([{"m": f"http://u:{SECRET}@h"}]),
                recorder.run_id,
            ),
        )
    run = store.get("latest")
    assert run.command == "ragsense grounding --base-url http://h/v1" and run.metrics == [{"m": "http://h"}]
