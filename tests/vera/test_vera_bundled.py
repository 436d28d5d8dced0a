"""VERA on real components: the bundled SmolLM2 as judge, locally and behind ragsense's HTTP server on
127.0.0.1 (label scoring and structured output), and misbehaving servers (garbage, timeouts)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from ragsense.data import RagRow, load_squad_v2
from ragsense.models import load_model
from ragsense.serve import start_in_thread
from ragsense.vera import (
    STATEMENT_RELEVANCE,
    ChatJudge,
    JudgeFailure,
    LabelJudge,
    StatementInput,
    VeraEvaluation,
    VeraEvaluator,
    VeraSettings,
)

ITEMS = [
    StatementInput(
        question="Who designed the Orvel bridge?", statement="Mara Quint designed the Orvel bridge."
    ),
    StatementInput(question="Who designed the Orvel bridge?", statement="Goats eat grass."),
]


@pytest.fixture(scope="module")
def squad_rows(shared_data: Path) -> list[RagRow]:
    items = [it for it in load_squad_v2(shared_data / "squad_v2") if it.answers][:3]
    return [
        RagRow(id=it.id, question=it.question, contexts=[it.context], answer=it.answers[0]) for it in items
    ]


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
@pytest.mark.model
def test_bundled_judge_evaluates_real_rows_deterministically(
    smollm2: Any, squad_rows: list[RagRow], tmp_path: Path
) -> None:
    first = VeraEvaluator(smollm2, VeraSettings(cache=False, signals="judge")).evaluate_sync(squad_rows)
    assert all(isinstance(r, VeraEvaluation) for r in first)
    for r in first:
        assert isinstance(r, VeraEvaluation)
        for score in (r.context_relevance, r.response_relevance, r.response_adherence):
            assert score is not None and 0.0 <= score <= 1.0
        assert r.context.decisions and all(
            d.confidence is not None and 0.5 <= d.confidence <= 1.0 for d in r.context.decisions
        )
    second = VeraEvaluator(smollm2, VeraSettings(cache=False, signals="judge")).evaluate_sync(squad_rows)
    assert second == first  # bit for bit: same floats in every decision
    cached = VeraEvaluator(smollm2, VeraSettings(cache_dir=tmp_path, signals="judge"))
    assert cached.evaluate_sync(squad_rows) == first
    again = VeraEvaluator(smollm2, VeraSettings(cache_dir=tmp_path, signals="judge"))
    assert again.evaluate_sync(squad_rows) == first
    judge = again.judge
    assert isinstance(judge, LabelJudge) and judge.misses == 0 and judge.hits > 0


@pytest.fixture(scope="module")
def served(smollm2: Any) -> Iterator[str]:
    server, base_url = start_in_thread(smollm2, model_name="smollm2-135m", log_requests=False)
    yield base_url
    server.close()


@pytest.mark.model
def test_label_judge_through_the_server_matches_local(smollm2: Any, served: str) -> None:
    import asyncio

    remote = load_model("openai:smollm2-135m", base_url=served)
    local = asyncio.run(LabelJudge(smollm2).judge(STATEMENT_RELEVANCE, ITEMS))
    over_http = asyncio.run(LabelJudge(remote).judge(STATEMENT_RELEVANCE, ITEMS))
    assert [v.label for v in over_http] == [v.label for v in local]
    for a, b in zip(local, over_http, strict=True):
        assert a.confidence is not None and b.confidence is not None
        assert abs(a.confidence - b.confidence) < 1e-3


@pytest.mark.model
def test_structured_judge_through_the_server(served: str) -> None:
    import asyncio

    remote = load_model("openai:smollm2-135m", base_url=served, supports_logprobs=False)
    judge = ChatJudge(remote)
    verdicts = asyncio.run(judge.judge(STATEMENT_RELEVANCE, ITEMS[:1]))
    assert verdicts[0].ok, verdicts[0].error
    assert verdicts[0].label in STATEMENT_RELEVANCE.labels and verdicts[0].reason
    [split] = asyncio.run(judge.split([_split_input()]))
    assert isinstance(split, list) and split and all(isinstance(s, str) and s for s in split)


def _split_input() -> Any:
    from ragsense.vera import SplitInput

    return SplitInput(question="Who designed the Orvel bridge?", answer="Mara Quint designed it in 1891.")


# -- misbehaving servers ---------------------------------------------------------------------------


def _start(reply: Callable[[dict[str, Any]], tuple[int, str, float]]) -> tuple[ThreadingHTTPServer, str]:
    """A chat server on 127.0.0.1 whose reply (status, message content, delay) the test decides."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.path.endswith("/chat/completions"):
                self.send_response(404)  # no /tokenize: the client estimates token counts
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status, content, delay = reply(body)
            time.sleep(delay)
            payload = json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ]
                }
            ).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def do_GET(self) -> None:
            payload = json.dumps({"data": [{"id": "m", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


GOOD_REPLY = '{"reason": "fine", "label": "%s"}'


def _labels_reply(body: dict[str, Any]) -> str:
    enum = body["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"]
    return str(GOOD_REPLY % enum[0])


def test_garbage_from_the_judge_server_fails_only_that_row() -> None:
    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        if any("BROKEN" in m["content"] for m in body["messages"]):  # the retry too
            return 200, '{"reason": "cut off", "lab', 0.0
        return 200, _labels_reply(body), 0.0

    server, url = _start(reply)
    try:
        model = load_model("openai:m", base_url=url, supports_logprobs=False, max_retries=0)
        vera = VeraEvaluator(model, VeraSettings(cache=False, splitter="rules", signals="judge"))
        good = RagRow(
            id="ok", question="Who designed it?", contexts=["Mara Quint designed it."], answer="Mara Quint."
        )
        broken = good.model_copy(update={"id": "bad", "answer": "BROKEN answer."})
        results = vera.evaluate_sync([good, broken, good])
    finally:
        server.shutdown()
    assert isinstance(results[0], VeraEvaluation) and isinstance(results[2], VeraEvaluation)
    assert isinstance(results[1], JudgeFailure)
    message = str(results[1])
    assert "did not validate" in message and "after 2 attempts" in message and "cut off" in message


def test_a_judge_server_that_times_out_gives_failed_verdicts() -> None:
    import asyncio

    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        return 200, _labels_reply(body), 2.0

    server, url = _start(reply)
    try:
        model = load_model("openai:m", base_url=url, supports_logprobs=False, max_retries=0, timeout=0.3)
        started = time.perf_counter()
        verdicts = asyncio.run(ChatJudge(model).judge(STATEMENT_RELEVANCE, ITEMS))
        elapsed = time.perf_counter() - started
    finally:
        server.shutdown()
    assert all(not v.ok and "timeout" in str(v.error) for v in verdicts)
    assert elapsed < 4.0  # two attempts of 0.3 s each per item, items in parallel
