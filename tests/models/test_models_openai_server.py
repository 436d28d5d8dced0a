"""The OpenAI-compatible client backend: response parsing, HTTP failures, and agreement with the
local backend through a real HTTP server on 127.0.0.1 serving the same model."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from ragsense.errors import ModelCallError
from ragsense.models import GenerationConfig, ScoreRequest, SupportsGeneration, SupportsLogprobs, load_model
from ragsense.models._openai_server import parse_echo
from ragsense.serve import start_in_thread


def _choice(
    tokens: list[str], values: list[float | None], offsets: list[int] | None, text: str | None = None
):
    lp: dict[str, Any] = {"tokens": tokens, "token_logprobs": values}
    if offsets is not None:
        lp["text_offset"] = offsets
    choice: dict[str, Any] = {"logprobs": lp}
    if text is not None:
        choice["text"] = text
    return choice


def _cumulative(tokens: list[str]) -> list[int]:
    """vLLM's text_offset: running sum of the decoded tokens' lengths."""
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out


# -- parsing hand-made responses ------------------------------------------------------------------
def test_parse_selects_continuation_tokens_without_bos() -> None:
    tokens = ["Paris", " is", " in", " France"]
    s = parse_echo("Paris is in", " France", _choice(tokens, [None, -1.0, -2.0, -0.5], [0, 5, 8, 11]))
    assert s.tokens == (" France",)
    assert s.offsets == ((0, 7),)
    assert s.logprobs == (-0.5,)
    assert s.prompt_tokens == 3
    assert not s.straddles_boundary


def test_parse_hidden_bos_counts_it_and_allows_an_empty_prompt() -> None:
    # ragsense serve with a BOS tokenizer: the BOS is not listed and the first token has a logprob.
    s = parse_echo("", "Paris is", _choice(["Paris", " is"], [-3.0, -1.0], [0, 5]))
    assert s.logprobs == (-3.0, -1.0)
    assert s.prompt_tokens == 1  # the unlisted BOS, as the local backend counts it


def test_parse_listed_bos_with_drifting_vllm_offsets_is_realigned() -> None:
    tokens = ["<s>", "Paris", " is", " in", " France"]
    choice = _choice(tokens, [None, -4.0, -1.0, -2.0, -0.5], _cumulative(tokens), "Paris is in France")
    s = parse_echo("Paris is in", " France", choice)
    assert s.tokens == (" France",)
    assert s.offsets == ((0, 7),)
    assert s.prompt_tokens == 4  # BOS + three prompt tokens, like the local backend
    # A BOS listed as an empty string at offset 0 has no width.
    s = parse_echo("", "Paris is", _choice(["", "Paris", " is"], [None, -3.0, -1.0], [0, 0, 5]))
    assert s.logprobs == (-3.0, -1.0) and s.prompt_tokens == 1


def test_parse_straddling_token() -> None:
    tokens = ["The", " answer", " is", " Paris", ","]
    s = parse_echo(
        "The answer is Par", "is,", _choice(tokens, [None, -1, -1, -2.5, -0.1], [0, 3, 10, 13, 19])
    )
    assert s.tokens == (" Paris", ",")
    assert s.offsets == ((0, 2), (2, 3))
    assert s.straddles_boundary
    assert s.prompt_tokens == 3


def test_parse_ignores_a_generated_token_after_the_text() -> None:
    tokens = ["Hi", " there", "!"]
    s = parse_echo("Hi", " there", _choice(tokens, [None, -1.0, -0.3], [0, 2, 8], "Hi there!"))
    assert s.tokens == (" there",)
    assert s.logprobs == (-1.0,)


def test_parse_split_characters_are_realigned() -> None:
    # "ö" split across two byte tokens that decode to U+FFFD each (vLLM decodes tokens one by one).
    tokens = ["w", "\ufffd", "\ufffdr", "ld"]
    s = parse_echo("w", "örld", _choice(tokens, [None, -1.0, -2.0, -3.0], _cumulative(tokens)))
    assert s.offsets == ((0, 1), (0, 2), (2, 4))
    assert s.logprobs == (-1.0, -2.0, -3.0)


def test_parse_opaque_tokens_use_the_offsets() -> None:
    # Byte-level BPE token strings do not spell the text; the offsets are right.
    tokens = ["Hello", "Ġw", "Ã¶r", "ld"]
    s = parse_echo("Hello", " wörld", _choice(tokens, [None, -1.0, -2.0, -3.0], [0, 5, 7, 9]))
    assert s.offsets == ((0, 2), (2, 4), (4, 6))


def test_parse_exact_ends_extension() -> None:
    choice = _choice(["▁Answer", ":", "▁Paris"], [None, -1.0, -2.0], [0, 6, 8])
    choice["logprobs"]["text_end_offset"] = [6, 7, 13]
    s = parse_echo("Answer:", " Paris", choice)
    assert s.offsets == ((1, 6),)
    assert s.prompt_tokens == 2


def test_parse_null_logprob_in_continuation_is_an_error() -> None:
    with pytest.raises(ModelCallError, match="no log-probability for continuation token 1"):
        parse_echo("a", " b", _choice(["a", " b"], [None, None], [0, 1]))
    with pytest.raises(ValueError, match="no log-probability for continuation token 0"):
        parse_echo("", "a b", _choice(["a", " b"], [None, -1.0], [0, 1]))


@pytest.mark.parametrize("value", [math.nan, -math.inf])
def test_parse_non_finite_logprob_is_an_error(value: float) -> None:
    with pytest.raises(ModelCallError, match="non-finite"):
        parse_echo("a", " b", _choice(["a", " b"], [None, value], [0, 1]))


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ({"text": "a b"}, r"choices\[0\]\.logprobs is missing"),
        ({"logprobs": {"tokens": ["a"]}}, "token_logprobs is missing"),
        ({"logprobs": {"tokens": ["a", " b"], "token_logprobs": [None]}}, "differ in length"),
        ({"logprobs": {"tokens": ["a", 3], "token_logprobs": [None, -1]}}, "wrong type"),
        ({"logprobs": {"tokens": [], "token_logprobs": []}}, "no prompt tokens"),
        ({"text": "", "logprobs": None}, "did not echo"),
        (_choice(["zz", "yy"], [None, -1.0], [0, 9]), "cannot map"),
    ],
)
def test_parse_malformed_responses(choice: Any, message: str) -> None:
    with pytest.raises(ModelCallError, match=message):
        parse_echo("a", " b", choice)


# -- factory ---------------------------------------------------------------------------------------
def test_factory_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGSENSE_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="base_url"):
        load_model("openai:m")
    with pytest.raises(TypeError, match="threads"):
        load_model("openai:m", base_url="http://x/v1", threads=1)
    monkeypatch.setenv("RAGSENSE_API_KEY", "secret")
    model = load_model("openai:m", base_url="http://127.0.0.1:1/v1/", context_window=512)
    assert isinstance(model, SupportsLogprobs) and isinstance(model, SupportsGeneration)
    assert model.info.name == "openai:m" and model.info.context_window == 512
    assert model.info.fingerprint == "openai:m@http://127.0.0.1:1/v1"
    assert model._headers == {"Authorization": "Bearer secret"}  # type: ignore[attr-defined]
    plain = load_model("openai:m", base_url="http://127.0.0.1:1/v1", supports_logprobs=False)
    assert not isinstance(plain, SupportsLogprobs) and isinstance(plain, SupportsGeneration)


# -- HTTP failures against tiny stub servers --------------------------------------------------------
Behaviour = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


def _reply(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _stub(behaviour: Behaviour) -> tuple[ThreadingHTTPServer, str, list[str]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            seen.append(self.path)
            behaviour(self, body)

        do_GET = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1", seen


@pytest.fixture
def stub() -> Iterator[Callable[[Behaviour], tuple[str, list[str]]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(behaviour: Behaviour) -> tuple[str, list[str]]:
        server, url, seen = _stub(behaviour)
        servers.append(server)
        return url, seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _score(url: str, *reqs: ScoreRequest, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    model = load_model("openai:m", base_url=url, **options)
    return asyncio.run(model.score(list(reqs) or [ScoreRequest("a", " b")]))


def test_unreachable_server_names_the_url_quickly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(
        ModelCallError, match=rf"cannot reach the server at http://127.0.0.1:{port}/v1: connection refused"
    ):
        _score(f"http://127.0.0.1:{port}/v1", timeout=2.0)
    assert time.perf_counter() - started < 2.0


def test_invalid_json_and_missing_logprobs(stub: Any) -> None:
    url, _ = stub(lambda h, b: _reply(h, 200, b"{not json"))
    with pytest.raises(ModelCallError, match="invalid JSON"):
        _score(url)
    url, _ = stub(lambda h, b: _reply(h, 200, json.dumps({"choices": [{"text": b["prompt"]}]}).encode()))
    with pytest.raises(ModelCallError, match=r"choices\[0\]\.logprobs is missing"):
        _score(url)
    url, _ = stub(lambda h, b: _reply(h, 200, b"[]"))
    with pytest.raises(ModelCallError, match="not an object"):
        _score(url)


def test_client_error_is_not_retried_and_carries_the_message(stub: Any) -> None:
    body = json.dumps({"error": {"message": "prompt too long", "type": "invalid_request_error", "code": 400}})
    url, seen = stub(lambda h, b: _reply(h, 400, body.encode()))
    with pytest.raises(ModelCallError, match="HTTP 400: prompt too long"):
        _score(url, max_retries=3)
    assert len(seen) == 1


def test_server_errors_are_retried(stub: Any) -> None:
    calls: list[int] = []

    def flaky(h: BaseHTTPRequestHandler, b: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) < 3:
            _reply(h, 503, b'{"error": {"message": "overloaded"}}')
        else:
            _reply(
                h, 200, json.dumps({"choices": [_choice(["a", " b"], [None, -1.25], [0, 1], "a b")]}).encode()
            )

    url, _ = stub(flaky)
    [s] = _score(url, max_retries=2)
    assert s.logprobs == (-1.25,)
    url, seen = stub(lambda h, b: _reply(h, 500, b'{"error": {"message": "boom"}}'))
    with pytest.raises(ModelCallError, match=r"HTTP 500: boom \(tried 2 times\)"):
        _score(url, max_retries=1)
    assert len(seen) == 2


def test_timeout(stub: Any) -> None:
    url, _ = stub(lambda h, b: (time.sleep(1.0), _reply(h, 200, b"{}")))
    with pytest.raises(ModelCallError, match="timeout"):
        _score(url, timeout=0.2)


def test_dedup_order_and_several_event_loops(stub: Any) -> None:
    def echo_words(h: BaseHTTPRequestHandler, b: dict[str, Any]) -> None:
        words = b["prompt"].split(" ")
        tokens = [words[0]] + [" " + w for w in words[1:]]
        values = [None] + [-float(len(t)) for t in tokens[1:]]
        _reply(h, 200, json.dumps({"choices": [_choice(tokens, values, _cumulative(tokens))]}).encode())

    url, seen = stub(echo_words)
    model = load_model("openai:m", base_url=url)
    reqs = [ScoreRequest("a", " bb"), ScoreRequest("a b", " cccc"), ScoreRequest("a", " bb")]
    first = asyncio.run(model.score(reqs))
    assert [s.logprobs for s in first] == [(-3.0,), (-5.0,), (-3.0,)]
    assert len(seen) == 2  # the duplicate was sent once
    assert asyncio.run(model.score(reqs[:1]))[0] == first[0]  # a second event loop works too
    asyncio.run(model.aclose())


def test_count_tokens_and_window_fallbacks(stub: Any) -> None:
    url, _ = stub(lambda h, b: _reply(h, 404, b'{"detail": "Not Found"}'))
    model = load_model("openai:m", base_url=url)
    assert model.count_tokens("abcdefgh") == 2  # rough estimate: no /tokenize
    assert model.info.context_window == 8192
    assert "default" in model.info.extra["context_window_source"]


# -- a real server with the bundled model ----------------------------------------------------------
REQUESTS = [
    ScoreRequest(
        "Context: The Eiffel Tower is in Paris, France. It was completed in 1889.\n"
        "Question: Where is the Eiffel Tower?\nAnswer:",
        " It is in Paris, France.",
    ),
    ScoreRequest("Hi", " there"),
    ScoreRequest("Prix: 42,50 € — wörld café naïve 東京", " 3.14 ünïcödé 🤗 done"),
    ScoreRequest("The answer is Par", "is, of course"),
]


@pytest.fixture(scope="module")
def served(smollm2: Any) -> Iterator[tuple[Any, Any]]:
    local = smollm2  # the session's model (tests/conftest.py), served from a thread of this process
    server, url = start_in_thread(local, log_requests=False)
    remote = load_model("openai:smollm2-135m", base_url=url, max_retries=0)
    yield local, remote
    asyncio.run(remote.aclose())
    server.close()


@pytest.mark.model
def test_server_scores_match_local(served: tuple[Any, Any]) -> None:
    local, remote = served
    remote_scores = asyncio.run(remote.score(REQUESTS))
    local_scores = local.score_sync(REQUESTS)
    worst = 0.0
    for r, lo in zip(remote_scores, local_scores, strict=True):
        assert r.tokens == lo.tokens
        assert r.offsets == lo.offsets
        assert r.prompt_tokens == lo.prompt_tokens
        assert r.straddles_boundary == lo.straddles_boundary
        worst = max(worst, *(abs(a - b) for a, b in zip(r.logprobs, lo.logprobs, strict=True)))
    assert worst < 1e-4
    assert remote_scores[3].straddles_boundary


@pytest.mark.model
def test_server_generation_count_and_info_match_local(served: tuple[Any, Any]) -> None:
    local, remote = served
    config = GenerationConfig(max_new_tokens=8)
    [r] = asyncio.run(remote.generate(["The capital of France is"], config))
    [lo] = local.generate_sync(["The capital of France is"], config)
    assert r.text == lo.text and r.n_tokens == lo.n_tokens
    assert remote.count_tokens("Hello wörld 42") == local.count_tokens("Hello wörld 42")
    assert remote.info.context_window == local.info.context_window


@pytest.mark.model
@pytest.mark.parametrize("bos", [False, True])
def test_vllm_style_responses_give_local_scores(served: tuple[Any, Any], bos: bool) -> None:
    # vLLM decodes each token alone (split characters become U+FFFD), sums their lengths into
    # text_offset, and lists a BOS. The realigned result must equal the local one.
    local, _ = served
    tok = local.tokenizer
    for req in REQUESTS:
        text = req.prompt + req.continuation
        [echo] = local.prompt_logprobs_sync([text])
        tokens = [tok.decode([i]) for i in tok(text)["input_ids"]]
        values = list(echo.logprobs)
        if bos:
            tokens, values = ["<s>", *tokens], [None, -9.0, *values[1:]]
        [lo] = local.score_sync([req])
        s = parse_echo(req.prompt, req.continuation, _choice(tokens, values, _cumulative(tokens), text))
        assert s.offsets == lo.offsets
        assert s.logprobs == pytest.approx(lo.logprobs, abs=1e-4)
        assert s.prompt_tokens == lo.prompt_tokens + bos
        assert s.straddles_boundary == lo.straddles_boundary
