"""The kinship runner and the systems it tests: Python callables, HTTP endpoints, resume, bad input."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, cast

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
            result: tuple[str, list[str]] = inner(question)
            return result

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
    run = run_kinship(
        source, CallableSystem(cast(Any, lambda docs, k: lambda q: 42)), [5], tmp_path, relations=[]
    )
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


# ------------------------------------------------------------------------ intervals and run.json


def test_every_cell_carries_counts_and_a_wilson_interval(tmp_path: Path) -> None:
    from ragsense.stats import wilson_ci

    def half_right(documents: Sequence[str], k: int) -> Any:
        """Right on every other question it is asked; retrieves what the oracle retrieves."""
        inner = oracle(documents, k)
        asked = []

        def answer(question: str) -> tuple[str, list[str]]:
            asked.append(question)
            text, hits = inner(question)
            return (text if len(asked) % 2 else "nobody"), hits

        return answer

    source = generate_kinship_source(12, 3, seed=0)
    run = run_kinship(source, CallableSystem(half_right), [5], tmp_path, relations=["grandfather"])
    by = {r["condition"]: r for r in run.results}
    control, grandfather = by["control"], by["grandfather"]
    assert (control["n_correct"], control["n_scored"]) == (104, 208)
    assert control["accuracy_ci"] == list(wilson_ci(104, 208))
    low, high = control["accuracy_ci"]
    assert low < control["accuracy"] == 0.5 < high and high - low < 0.15
    # Nothing right out of 8: the interval still reaches far above zero.
    assert grandfather["n_correct"] == 0 and grandfather["accuracy_ci"][0] == 0.0
    assert grandfather["accuracy_ci"][1] > 0.3
    # Recall intervals count documents: every control answer is in the store and retrieved (208 of
    # 208); grandfather needs 2 documents per question and the oracle retrieves none (0 of 16).
    assert (control["documents_found"], control["documents_needed"]) == (208, 208)
    assert control["retrieval_recall_ci"] == list(wilson_ci(208, 208))
    assert (grandfather["documents_found"], grandfather["documents_needed"]) == (0, 16)
    assert grandfather["retrieval_recall_ci"] == list(wilson_ci(0, 16))
    assert control["n_empty_answers"] == 0


def test_retriever_alone_has_recall_intervals_and_no_accuracy_interval(tmp_path: Path) -> None:
    from ragsense.bench.kinship import RetrievalOnlySystem
    from ragsense.embeddings import load_embedder

    source = generate_kinship_source(6, 3, seed=0)
    system = RetrievalOnlySystem(None, load_embedder("minilm", cache=True), retrieval="dense")
    run = run_kinship(source, system, [5], tmp_path, relations=["grandfather"])
    grandfather = next(r for r in run.results if r["condition"] == "grandfather")
    assert grandfather["accuracy"] is None and grandfather["accuracy_ci"] is None
    assert grandfather["documents_needed"] == 2 * grandfather["n"]
    low, high = grandfather["retrieval_recall_ci"]
    assert low <= grandfather["retrieval_recall"] <= high
    settings = json.loads((tmp_path / "run.json").read_text())["settings"]["system_settings"]
    assert settings["retrieval"] == "dense" and "stop" not in settings  # nothing is generated


def test_run_json_records_what_changes_the_answers(tmp_path: Path) -> None:
    """Retrieval mode, stop strings, token cap, prompt format and the document order it resolves to
    are in run.json, and a resume with other stop strings is refused."""
    from ragsense.bench.kinship import PipelineSystem
    from ragsense.embeddings import load_embedder
    from ragsense.models import GenerationConfig, load_model

    source = generate_kinship_source(4, 2, seed=0)
    embedder = load_embedder("minilm", cache=True)

    def system(stop: tuple[str, ...], **kwargs: Any) -> PipelineSystem:
        generation = GenerationConfig(max_new_tokens=7, stop=stop)
        return PipelineSystem(load_model("fake"), embedder, generation=generation, **kwargs)

    run = run_kinship(
        source,
        system(("\n",), retrieval="dense", prompt_format="plain"),
        [5],
        tmp_path / "plain",
        max_queries=2,
    )
    recorded = json.loads((tmp_path / "plain" / "run.json").read_text())["settings"]
    assert recorded == run.settings
    answering = recorded["system_settings"]
    assert answering["retrieval"] == "dense" and answering["stop"] == ["\n"]
    assert answering["max_new_tokens"] == 7 and answering["prompt_format"] == "plain"
    assert answering["document_order"] == "best_first" and answering["model"] == "fake"

    run_kinship(source, system(("\n\n",)), [5], tmp_path / "chat", max_queries=2)
    answering = json.loads((tmp_path / "chat" / "run.json").read_text())["settings"]["system_settings"]
    assert answering["retrieval"] == "hybrid" and answering["stop"] == ["\n\n"]
    assert answering["prompt_format"] == "chat" and answering["document_order"] == "best_last"
    with pytest.raises(ParameterError, match="other settings"):
        run_kinship(source, system(("\n",)), [5], tmp_path / "chat", max_queries=2, resume=True)
