"""``ragsense serve``: the OpenAI-compatible HTTP server, through real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("httpx")

import httpx

from ragsense._access import ApiKeys
from ragsense.cli._main import main
from ragsense.errors import ParameterError
from ragsense.models import Generation, GenerationConfig, ModelInfo, ScoreRequest, load_model
from ragsense.models._fake import FakeModel
from ragsense.models._transformers import TransformersModel
from ragsense.serve import serve, start_in_thread


class _Broken(FakeModel):
    """Generation fails inside the model."""

    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        raise RuntimeError("out of memory")


class _InfoOnly:
    """A model with neither log-probabilities nor generation."""

    info = ModelInfo(name="bare", backend="none", context_window=64, fingerprint="bare")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None


@pytest.fixture
def fake_server() -> Iterator[str]:
    server, url = start_in_thread(FakeModel(), log_requests=False)
    yield url
    server.close()


def _post(url: str, path: str, **body: Any) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=30)


def test_models_and_health(fake_server: str) -> None:
    body = httpx.get(fake_server + "/models").json()
    assert body["object"] == "list"
    [card] = body["data"]
    assert card["id"] == "fake" and card["object"] == "model" and card["max_model_len"] == 4096
    assert httpx.get(fake_server.removesuffix("/v1") + "/health").status_code == 200


def test_echo_logprobs_format(fake_server: str) -> None:
    r = _post(
        fake_server, "/completions", model="fake", prompt="Paris is big", max_tokens=0, echo=True, logprobs=0
    )
    assert r.status_code == 200
    [choice] = r.json()["choices"]
    assert choice["text"] == "Paris is big" and choice["finish_reason"] == "length"
    lp = choice["logprobs"]
    assert lp["tokens"] == ["Paris", " is", " big"]
    assert lp["text_offset"] == [0, 5, 8] and lp["text_end_offset"] == [5, 8, 12]
    assert all(isinstance(v, float) for v in lp["token_logprobs"])  # a generic model scores from ""
    assert r.json()["usage"]["prompt_tokens"] == 3


def test_generation_and_prompt_lists(fake_server: str) -> None:
    r = _post(fake_server, "/completions", prompt=["Q: one", "Q: two"], max_tokens=4, temperature=0)
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    assert choices[0]["text"] == "fake answer about Q:"
    assert choices[0]["logprobs"] is None
    r = _post(fake_server, "/completions", prompt="Q: one", max_tokens=4, echo=True)
    assert r.json()["choices"][0]["text"].startswith("Q: onefake answer")


def test_tokenize_endpoint(fake_server: str) -> None:
    root = fake_server.removesuffix("/v1")
    assert _post(root, "/tokenize", prompt="a b c").json()["count"] == 3
    assert _post(root, "/tokenize", content="a b").json()["count"] == 2  # llama.cpp's field name


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/completions", {"max_tokens": 0}, 400, "'prompt' must be"),
        ("/completions", {"prompt": [1, 2, 3]}, 400, "token ids are not supported"),
        ("/completions", {"prompt": "a", "max_tokens": "3"}, 400, "'max_tokens' must be int"),
        ("/completions", {"prompt": "a", "echo": "yes"}, 400, "'echo' must be bool"),
        ("/completions", {"prompt": "a", "max_tokens": -1}, 422, "'max_tokens' must be a finite number"),
        ("/completions", {"prompt": "a", "logprobs": 99, "echo": True}, 422, "between 0 and 20"),
        ("/completions", {"prompt": "a", "logprobs": 1}, 400, "use echo=true"),
        ("/completions", {"prompt": "a", "n": 2}, 400, "only n=1"),
        ("/completions", {"prompt": "a", "model": "other"}, 404, "does not exist"),
        ("/nowhere", {}, 404, "no route"),
    ],
)
def test_bad_requests_get_openai_errors(
    fake_server: str, path: str, body: dict[str, Any], status: int, message: str
) -> None:
    r = httpx.post(fake_server + path, json=body, timeout=30)
    assert r.status_code == status
    error = r.json()["error"]
    assert message in error["message"] and error["code"] == status and error["type"]


def test_invalid_json_and_server_survives(fake_server: str) -> None:
    r = httpx.post(fake_server + "/completions", content=b"{oops", timeout=30)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(fake_server + "/completions", content=b"[1]", timeout=30)
    assert r.status_code == 400
    assert httpx.get(fake_server + "/models").status_code == 200


def test_model_failures_are_500_and_missing_capabilities_400() -> None:
    server, url = start_in_thread(_Broken(), log_requests=False)
    try:
        r = _post(url, "/completions", prompt="a", max_tokens=3)
        assert r.status_code == 500 and "out of memory" in r.json()["error"]["message"]
        assert (
            _post(url, "/completions", prompt="a b", max_tokens=0, echo=True, logprobs=0).status_code == 200
        )
    finally:
        server.close()
    server, url = start_in_thread(_InfoOnly(), log_requests=False)  # type: ignore[arg-type]
    try:
        r = _post(url, "/completions", prompt="a", max_tokens=0, echo=True, logprobs=0)
        assert r.status_code == 400 and "cannot return log-probabilities" in r.json()["error"]["message"]
        assert "cannot generate" in _post(url, "/completions", prompt="a").json()["error"]["message"]
    finally:
        server.close()


def _ignore_sigint() -> None:
    # What a shell does to a background job without job control; the child inherits it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("sig", "started_ignoring_sigint"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["sigint", "sigint-ignored-at-start", "sigterm"],
)
def test_run_server_logs_and_stops_on_ctrl_c(sig: signal.Signals, started_ignoring_sigint: bool) -> None:
    """``ragsense serve --model fake`` starts, logs, and stops on SIGINT or SIGTERM with exit 0.

    Found: the server stopped only through Python's KeyboardInterrupt, which a process started with
    SIGINT ignored (a background job of a shell without job control) never gets: it did not exit.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "ragsense", "serve", "--model", "fake", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    preexec = _ignore_sigint if started_ignoring_sigint else None
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=preexec)
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(1)]
        while "serving 'fake'" not in lines[-1]:  # skip any warnings printed at import
            assert lines[-1] and len(lines) < 50, lines
            lines.append(proc.stderr.readline())
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        rest = proc.stderr.read()
        assert '"GET /v1/models" 200' in rest and "stopping" in rest
    finally:
        if proc.poll() is None:
            proc.kill()


# -- hostile requests and access (issue 25) ---------------------------------------------------------
def test_deeply_nested_json_is_400_without_the_exception_text(fake_server: str) -> None:
    """Found: 500 with the RecursionError's text."""
    r = httpx.post(fake_server + "/completions", content=b"[" * 100_000 + b"]" * 100_000, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["message"] == "the request body is nested too deeply"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"prompt": "a", "temperature": NaN}', "temperature"),
        (b'{"prompt": "a", "temperature": 1e999}', "temperature"),
        (b'{"prompt": "a", "temperature": -Infinity}', "temperature"),
        (b'{"prompt": "a", "temperature": 3}', "temperature"),
        (b'{"prompt": "a", "max_tokens": 100000000000}', "max_tokens"),
        (b'{"prompt": "a", "seed": -1}', "seed"),
    ],
)
def test_non_finite_and_out_of_range_numbers_are_422_naming_the_field(
    fake_server: str, body: bytes, param: str
) -> None:
    """Found: a temperature of NaN or 1e999 was accepted."""
    for path in ("/completions", "/chat/completions"):
        if path == "/chat/completions":
            body = body.replace(b'"prompt": "a"', b'"messages": [{"role": "user", "content": "a"}]')
        r = httpx.post(fake_server + path, content=body, timeout=30)
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["param"] == param and f"'{param}'" in error["message"]


def test_control_characters_in_a_path_are_escaped_in_the_log(capfd: pytest.CaptureFixture[str]) -> None:
    """Found: a request path with escape sequences reached the log (the terminal) raw."""
    server, url = start_in_thread(FakeModel())
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"GET /v1/models\x1b[2J\x1b]0;pwned\x07 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port
            )
            assert sock.recv(100).startswith(b"HTTP/1.1 404")
    finally:
        server.close()
    err = capfd.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "/v1/models\\x1b[2J\\x1b]0;pwned\\x07" in err


KEY = "serve-test-key-0123456789"


def test_api_keys_guard_every_endpoint_but_health() -> None:
    """Found: ``ragsense serve`` had no authentication at all."""
    server, url = start_in_thread(FakeModel(), log_requests=False, api_keys=ApiKeys([KEY]))
    try:
        root = url.removesuffix("/v1")
        assert httpx.get(root + "/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer " + KEY[:-1] + "X"}):
            r = httpx.get(url + "/models", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            r = httpx.post(url + "/completions", json={"prompt": "a"}, headers=headers)
            assert r.status_code == 401
        for headers in ({"Authorization": "Bearer " + KEY}, {"X-API-Key": KEY}):
            assert httpx.get(url + "/models", headers=headers).status_code == 200
        remote = load_model("openai:fake", base_url=url, api_key=KEY, max_retries=0)
        try:  # ragsense's own client sends the key as a bearer token
            [scored] = asyncio.run(remote.score([ScoreRequest("Paris", " is big")]))
            assert len(scored.logprobs) == 2
        finally:
            asyncio.run(remote.aclose())
    finally:
        server.close()


def test_a_foreign_host_or_origin_is_refused(fake_server: str) -> None:
    port = fake_server.rsplit(":", 1)[1].split("/")[0]
    for headers in ({"Host": f"rebound.example:{port}"}, {"Origin": "http://evil.example"}):
        r = httpx.post(fake_server + "/completions", json={"prompt": "a"}, headers=headers)
        assert r.status_code == 403, headers
    assert httpx.get(fake_server + "/models", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_a_public_bind_without_keys_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Found: ``ragsense serve --host 0.0.0.0`` served anyone, without keys."""
    with pytest.raises(ParameterError, match="without API keys"):
        serve(FakeModel(), "0.0.0.0", 0)
    assert main(["serve", "--model", "fake", "--host", "0.0.0.0", "--api-key-env", "NO_SUCH_VAR_X"]) == 2
    assert "without API keys" in capsys.readouterr().err


# -- the transformers path -------------------------------------------------------------------------
class _BosTokenizer:
    """The bundled tokenizer with a BOS added, to exercise the BOS path with a real model."""

    def __init__(self, inner: Any, bos: int) -> None:
        self._inner, self._bos = inner, bos

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, text: Any, add_special_tokens: bool = True, **kw: Any) -> Any:
        enc = self._inner(text, add_special_tokens=add_special_tokens, **kw)
        if not add_special_tokens or not isinstance(text, str) or "return_tensors" in kw:
            return enc
        out = {"input_ids": [self._bos, *enc["input_ids"]]}
        if kw.get("return_offsets_mapping"):
            out["offset_mapping"] = [(0, 0), *map(tuple, enc["offset_mapping"])]
        return out


@pytest.mark.model
def test_prompt_logprobs_match_local_scoring(smollm2: Any) -> None:
    text = "Context: Marie Curie won two Nobel prizes.\nAnswer: Marie Curie"
    [echo] = smollm2.prompt_logprobs_sync([text], top=3)
    enc = smollm2.tokenizer(text, return_offsets_mapping=True)
    assert list(echo.tokens) == smollm2.tokenizer.convert_ids_to_tokens(enc["input_ids"])
    assert list(echo.offsets) == [tuple(o) for o in enc["offset_mapping"]]
    assert echo.logprobs[0] is None  # no BOS: the first token cannot be scored
    end = echo.offsets[0][1]
    [ref] = smollm2.score_sync([ScoreRequest(text[:end], text[end:])])
    assert list(echo.logprobs[1:]) == list(ref.logprobs)  # one kernel: bit-identical
    assert echo.top is not None and echo.top[0] is None
    for token, value, top in zip(echo.tokens[1:], echo.logprobs[1:], echo.top[1:], strict=True):
        assert top is not None and len(top) == 3 and max(top.values()) >= value
        assert top.get(token, value) == value
    # The server lists the chosen token too, as OpenAI does.
    server, url = start_in_thread(smollm2, log_requests=False)
    try:
        body = {"prompt": text, "max_tokens": 0, "echo": True, "logprobs": 3}
        lp = httpx.post(url + "/completions", json=body, timeout=60).json()["choices"][0]["logprobs"]
    finally:
        server.close()
    assert lp["token_logprobs"] == list(echo.logprobs)
    for token, value, top in zip(
        lp["tokens"][1:], lp["token_logprobs"][1:], lp["top_logprobs"][1:], strict=True
    ):
        assert top[token] == value and 3 <= len(top) <= 4  # the top 3, plus the chosen token


@pytest.mark.model
def test_bos_tokenizer_round_trip(smollm2: Any) -> None:
    bos_model = TransformersModel(
        smollm2._model, _BosTokenizer(smollm2.tokenizer, 1), name="bos", fingerprint="bos"
    )
    text = "Paris is the capital of France."
    [echo] = bos_model.prompt_logprobs_sync([text])
    assert echo.tokens[0] == "Paris" and echo.logprobs[0] is not None  # BOS hidden, first token scored
    server, url = start_in_thread(bos_model, log_requests=False)
    try:
        remote = load_model("openai:bos", base_url=url, max_retries=0)
        reqs = [ScoreRequest("", text), ScoreRequest("Paris is", " the capital of France.")]
        got = asyncio.run(remote.score(reqs))
        for r, lo in zip(got, bos_model.score_sync(reqs), strict=True):
            assert r.prompt_tokens == lo.prompt_tokens and r.offsets == lo.offsets
            assert r.logprobs == pytest.approx(lo.logprobs, abs=1e-4)
        asyncio.run(remote.aclose())
    finally:
        server.close()


@pytest.mark.model
def test_transformers_server_errors_and_tokenize(smollm2: Any) -> None:
    server, url = start_in_thread(smollm2, log_requests=False)
    try:
        r = _post(url, "/completions", prompt="word " * 9000, max_tokens=0, echo=True, logprobs=0)
        assert r.status_code == 400 and "over the context window" in r.json()["error"]["message"]
        r = _post(url, "/completions", prompt="", max_tokens=0, echo=True, logprobs=0)
        assert r.status_code == 400 and "empty" in r.json()["error"]["message"]
        body = _post(
            url.removesuffix("/v1"), "/tokenize", prompt="Hello wörld", add_special_tokens=False
        ).json()
        assert body["tokens"] == smollm2.tokenizer("Hello wörld", add_special_tokens=False)["input_ids"]
        assert body["count"] == len(body["tokens"]) and body["max_model_len"] == smollm2.info.context_window
    finally:
        server.close()


def test_chat_completions_fake(fake_server: str) -> None:
    resp = _post(
        fake_server,
        "/chat/completions",
        model="fake",
        messages=[{"role": "user", "content": "Who is the father of Oliver?"}],
        max_tokens=8,
        temperature=0,
    )
    assert resp.status_code == 200
    message = resp.json()["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "fake answer about user: Who is the father"  # fake: its last line
    bad = _post(fake_server, "/chat/completions", model="fake", messages=[{"role": "robot", "content": "x"}])
    assert bad.status_code == 400
    assert "messages[0]" in bad.json()["error"]["message"]


@pytest.mark.model
def test_chat_through_server_equals_local(smollm2: Any) -> None:
    from ragsense.models import ChatMessage

    conversation = [ChatMessage("user", "Henry is the father of Oliver. Who is the father of Oliver?")]
    config = GenerationConfig(max_new_tokens=12, stop=("\n",))
    local = smollm2.chat_sync([conversation], config)[0]
    server, url = start_in_thread(smollm2, model_name="smol", log_requests=False)
    try:
        remote_model = load_model("openai:smol", base_url=url)
        [remote] = asyncio.run(remote_model.chat([conversation], config))
    finally:
        server.close()
    assert remote.text == local.text
    assert local.text.strip()


@pytest.mark.model
def test_generation_stops_early_at_stop_string(smollm2: Any) -> None:
    prompt = (
        "Question: What is the capital of France?\nAnswer: Paris.\n"
        "Question: What is the capital of Italy?\nAnswer:"
    )
    stopped = smollm2.generate_sync([prompt], GenerationConfig(max_new_tokens=40, stop=("\n",)))[0]
    assert "\n" not in stopped.text
    assert stopped.n_tokens < 40  # decoding ended at the newline, not at max_new_tokens
    full = smollm2.generate_sync([prompt], GenerationConfig(max_new_tokens=stopped.n_tokens))[0]
    assert full.text.startswith(stopped.text)


def test_slow_headers_are_cut_off_and_cannot_fill_the_server() -> None:
    """A client trickling header bytes held a thread and a file descriptor for ever (no socket timeout);
    now its headers have a deadline, and past the connection cap a new client closes the oldest."""
    server, url = start_in_thread(FakeModel(), log_requests=False)
    server.header_timeout, server.max_connections = 1.0, 20
    port = server.server_address[1]
    slow: list[socket.socket] = []
    try:
        for _ in range(30):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(sock)
        assert httpx.get(url + "/models", timeout=5).status_code == 200  # served while they trickle
        started = time.monotonic()
        last = slow[-1]
        last.settimeout(5)
        assert last.recv(1) == b""  # closed by the server, not by the 5 s timeout here
        assert time.monotonic() - started < 3
        assert server._open <= 21
    finally:
        for sock in slow:
            sock.close()
        server.close()
