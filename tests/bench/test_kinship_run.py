"""The kinship runner and the systems it tests: Python callables, HTTP endpoints, resume, bad input."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ragsense.bench.kinship import (
    CallableSystem,
    HttpSystem,
    generate_kinship_source,
    is_correct,
    parse_ks,
    run_kinship,
)
from ragsense.errors import ParameterError

_QUESTION = re.compile(r"Who is the (?P<rel>[\w-]+) of (?P<person>\w+)\?")


def oracle(documents: Sequence[str], k: int) -> Any:
    """A perfect single-document reader: answers only when the exact statement is in the store."""

    def answer(question: str) -> tuple[str, list[str]]:
        m = _QUESTION.fullmatch(question)
        assert m is not None
        suffix = f" is the {m['rel']} of {m['person']}."
        hits = [d for d in documents if d.endswith(suffix)][:k]
        if not hits:
            return "I do not know.", []
        return " and ".join(d.split(" ")[0] for d in hits), hits

    return answer


def test_is_correct_is_whole_word_and_case_insensitive() -> None:
    assert is_correct("oliver", ["Oliver"])
    assert is_correct("It is Oliver.", ["Henry", "Oliver"])
    assert not is_correct("Olivera", ["Oliver"])
    assert not is_correct("", ["Oliver"])


def test_parse_ks_errors() -> None:
    assert parse_ks("15,5,5") == [5, 15]
    for bad in ("0", "five", ""):
        with pytest.raises(ParameterError, match="k"):
            parse_ks(bad)


def test_oracle_scores_control_perfectly_and_experimental_zero(tmp_path: Path) -> None:
    source = generate_kinship_source(12, 3, seed=0)
    run = run_kinship(source, CallableSystem(oracle), [5, 15], tmp_path, relations=["grandfather", "sibling"])
    by = {(r["k"], r["condition"]): r for r in run.results}
    assert by[(5, "control")]["accuracy"] == 1.0
    assert by[(5, "control")]["retrieval_recall"] == 1.0
    assert by[(5, "control")]["n"] == 208
    # Held-out facts are absent: the single-document oracle cannot answer and retrieves nothing needed.
    assert by[(5, "grandfather")]["accuracy"] == 0.0
    assert by[(5, "grandfather")]["retrieval_recall"] == 0.0
    assert by[(5, "grandfather")]["mean_hops"] == 2.0
    assert by[(15, "sibling")]["n"] == 24  # brother and sister queries
    lines = (tmp_path / "answers.jsonl").read_text().splitlines()
    assert len(lines) == 2 * (208 + 8 + 24)


def test_failing_system_marks_the_query_and_goes_on(tmp_path: Path) -> None:
    def flaky(documents: Sequence[str], k: int) -> Any:
        inner = oracle(documents, k)

        def answer(question: str) -> tuple[str, list[str]]:
            if "Eleanor" in question:
                raise RuntimeError("backend down")
            return inner(question)

        return answer

    source = generate_kinship_source(12, 3, seed=0)
    run = run_kinship(source, CallableSystem(flaky), [5], tmp_path, relations=[])
    [control] = run.results
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["errors"]]
    assert failed and all("Eleanor" in r["question"] for r in failed)
    assert all(
        r["errors"] == [{"metric": "system", "field": None, "message": "RuntimeError: backend down"}]
        and r["answer"] is None
        and r["correct"] is None
        for r in failed
    )
    assert control["n_errors"] == len(failed)
    assert control["accuracy"] == pytest.approx((208 - len(failed)) / 208)


def test_bad_return_type_is_a_marked_error(tmp_path: Path) -> None:
    source = generate_kinship_source(4, 2, seed=0)
    run = run_kinship(source, CallableSystem(lambda docs, k: lambda q: 42), [5], tmp_path, relations=[])
    assert run.results[0]["n_errors"] == run.results[0]["n"] > 0


def test_k_larger_than_a_store_is_refused_before_running(tmp_path: Path) -> None:
    source = generate_kinship_source(4, 2, seed=0)  # 48 documents; experimental stores hold fewer
    with pytest.raises(ParameterError, match=r"k=47 is larger than the 'father' store, which holds 40"):
        run_kinship(source, CallableSystem(oracle), [5, 47], tmp_path, relations=["father"])
    assert not (tmp_path / "answers.jsonl").exists()


@pytest.mark.parametrize(
    ("max_queries", "stop_at", "asked_again"),
    [
        # Conditions of different sizes (208 control, 16 aunt questions): chunks of 208, the last one
        # holds both aunt groups; stopping at the third group loses that chunk.
        (None, 3, [15, 5]),
        # Every condition samples 16 questions: each chunk is exactly one (condition, k) group.
        (16, 4, [5]),
    ],
)
def test_resume_continues_and_gives_identical_results(
    tmp_path: Path, max_queries: int | None, stop_at: int, asked_again: list[int]
) -> None:
    source = generate_kinship_source(12, 3, seed=0)
    calls: list[int] = []

    def counting(documents: Sequence[str], k: int) -> Any:
        calls.append(k)
        return oracle(documents, k)

    options: dict[str, Any] = {"relations": ["aunt"], "max_queries": max_queries}
    lines: list[str] = []
    fresh = run_kinship(
        source, CallableSystem(oracle), [5, 15], tmp_path / "a", progress=lines.append, **options
    )
    assert [line.split()[:2] for line in lines] == [
        ["control", "k=15"],
        ["control", "k=5"],
        ["aunt", "k=15"],
        ["aunt", "k=5"],
    ]
    out = tmp_path / "b"
    stop = {"n": 0}

    def interrupt(line: str) -> None:
        stop["n"] += 1
        if stop["n"] == stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_kinship(source, CallableSystem(oracle), [5, 15], out, progress=interrupt, **options)
    with open(out / "answers.jsonl", "a") as fh:
        fh.write('{"condition": "aunt", "k": 5, "qu')  # a half-written line from a crash
    with pytest.raises(FileExistsError):
        run_kinship(source, CallableSystem(oracle), [5, 15], out, **options)
    resumed_lines: list[str] = []
    resumed = run_kinship(
        source, CallableSystem(counting), [5, 15], out, resume=True, progress=resumed_lines.append, **options
    )
    assert calls == asked_again  # only the unfinished chunk was asked again
    assert resumed.n_resumed > 0 and resumed.n_answered > 0
    assert resumed.n_resumed + resumed.n_answered == fresh.n_answered
    assert resumed.results == fresh.results
    assert sorted(resumed_lines) == sorted(lines)  # every group is reported, resumed ones too
    assert (out / "answers.jsonl").read_text() == (tmp_path / "a" / "answers.jsonl").read_text()
    again = run_kinship(source, CallableSystem(counting), [5, 15], out, resume=True, **options)
    assert again.n_answered == 0 and again.results == fresh.results and calls == asked_again
    with pytest.raises(ParameterError, match="other settings"):
        run_kinship(source, CallableSystem(oracle), [5], out, relations=["aunt"], resume=True)
    overwritten = run_kinship(source, CallableSystem(oracle), [5], out, relations=["aunt"], overwrite=True)
    assert overwritten.n_resumed == 0 and overwritten.n_answered == 208 + 16


class _OracleHandler(BaseHTTPRequestHandler):
    sources: ClassVar[dict[str, list[str]]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/index":
            self.sources[body["knowledge_source"]] = body["documents"]
            self._reply(200, {"ok": True})
        elif self.path == "/answer":
            if "Eleanor" in body["question"]:
                self._reply(200, {"wrong": "shape"})
                return
            answer, docs = oracle(self.sources[body["knowledge_source"]], body["k"])(body["question"])
            self._reply(200, {"answer": answer, "documents": docs})
        else:
            self._reply(404, {"error": "no route"})

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def oracle_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OracleHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_system_over_real_http(oracle_server: str, tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    source = generate_kinship_source(12, 3, seed=0)
    run = run_kinship(source, HttpSystem(oracle_server), [5], tmp_path, relations=["uncle"])
    by = {r["condition"]: r for r in run.results}
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    bad = [r for r in records if r["errors"]]
    assert bad and all(
        "Eleanor" in r["question"] and "no string 'answer'" in r["errors"][0]["message"] for r in bad
    )
    good = [r for r in records if r["condition"] == "control" and not r["errors"]]
    assert all(r["correct"] and r["retrieval_recall"] == 1.0 for r in good)
    assert by["control"]["accuracy"] == pytest.approx(len(good) / by["control"]["n"])
    assert by["uncle"]["accuracy"] == 0.0


def test_http_system_unreachable_marks_every_query(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    source = generate_kinship_source(4, 2, seed=0)
    run = run_kinship(source, HttpSystem("http://127.0.0.1:9", timeout=2), [5], tmp_path, relations=[])
    assert run.results[0]["n_errors"] == run.results[0]["n"] == 48


def test_a_system_whose_batch_call_fails_is_retried_question_by_question(tmp_path: Path) -> None:
    """A system that raises for the whole chunk (a server outage mid-batch) loses only the bad queries."""
    from ragsense.bench.kinship import SystemAnswer, Timings

    class Batchy:
        name = "batchy"
        timings = Timings()

        async def answer_condition(
            self, condition: Any, questions: Sequence[str], k: int, *, source_id: str
        ) -> list[Any]:
            if any("Eleanor" in q for q in questions):
                raise ConnectionError("server went away")
            return [SystemAnswer("nobody", ()) for _ in questions]

    source = generate_kinship_source(12, 3, seed=0)
    run = run_kinship(source, Batchy(), [5], tmp_path, relations=[])
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["errors"]]
    assert len(records) == 208
    assert failed and all(
        "Eleanor" in r["question"]
        and r["errors"]
        == [{"metric": "system", "field": None, "message": "ConnectionError: server went away"}]
        for r in failed
    )
    assert all(r["answer"] == "nobody" and r["correct"] is False for r in records if not r["errors"])
    assert run.results[0]["n_errors"] == len(failed) < 208
    assert run.results[0]["accuracy"] == 0.0  # failed questions count as wrong
