"""API keys (missing, wrong, right), hashed storage, per-key limits, and the loopback rule."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragsense.errors import ParameterError
from ragsense.guard import ApiKeys, GuardConfig, KeyLimiter, RunningGuard
from ragsense.guard._server import check_bind

from ._helpers import ROW, SlowFake, metric_value, post, running

KEY = "guard-test-key-0123456789"
OTHER = "guard-other-key-9876543210"


@pytest.fixture(scope="module")
def keyed_guard() -> Iterator[RunningGuard]:
    with running(GuardConfig(model="fake", api_keys=ApiKeys([KEY, OTHER]))) as guard:
        yield guard


def test_a_missing_key_is_401(keyed_guard: RunningGuard) -> None:
    reply = post(keyed_guard.url, ROW)
    assert reply.status_code == 401
    assert reply.json()["error"]["field"] == "authorization"
    assert reply.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_a_wrong_key_is_401_and_a_right_one_is_served(keyed_guard: RunningGuard, header: str) -> None:
    value = (lambda k: f"Bearer {k}") if header == "Authorization" else (lambda k: k)
    wrong = post(keyed_guard.url, ROW, headers={header: value(KEY[:-1] + "X")})
    assert wrong.status_code == 401 and "not valid" in wrong.json()["error"]["message"]
    right = post(keyed_guard.url, ROW, headers={header: value(KEY)})
    assert right.status_code == 200 and right.json()["results"][0]["verdict"] == "grounded"


def test_metrics_need_the_key_but_health_and_ready_do_not(keyed_guard: RunningGuard) -> None:
    assert httpx.get(keyed_guard.url + "/metrics").status_code == 401
    auth = {"Authorization": f"Bearer {KEY}"}
    assert metric_value(keyed_guard.url, 'ragsense_guard_rejected_total{reason="auth"}', auth) >= 1
    assert httpx.get(keyed_guard.url + "/health").status_code == 200
    assert httpx.get(keyed_guard.url + "/ready").status_code == 200


def test_keys_are_stored_hashed_and_load_from_a_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.txt"
    path.write_text(f"# guard keys\n{KEY}\n\n{OTHER}  # the second\n", encoding="utf-8")
    monkeypatch.setenv("GUARD_KEYS_TEST", "env-key-abcdefghijklmnop, ")
    keys = ApiKeys.load(path, env="GUARD_KEYS_TEST")
    assert len(keys.ids) == 3
    assert keys.identify(OTHER) == keys.ids[1] and keys.identify("env-key-abcdefghijklmnop") == keys.ids[2]
    assert keys.identify("nope") is None and keys.identify(None) is None
    assert KEY not in repr(vars(keys)) and KEY.encode() not in b"".join(keys._digests)
    with pytest.raises(ValueError, match="at least 16"):
        ApiKeys(["short"])


def test_per_key_concurrency_is_429_with_retry_after() -> None:
    config = GuardConfig(model=SlowFake(0.6), api_keys=ApiKeys([KEY, OTHER]), concurrency_per_key=1)
    with running(config) as guard, concurrent.futures.ThreadPoolExecutor(3) as pool:
        same = [pool.submit(post, guard.url, ROW, {"X-API-Key": KEY}) for _ in range(2)]
        other = pool.submit(post, guard.url, ROW, {"X-API-Key": OTHER})
        statuses = sorted(f.result().status_code for f in same)
        assert statuses == [200, 429]
        assert other.result().status_code == 200  # another key has its own slot
        refused = next(f.result() for f in same if f.result().status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1


def test_per_key_rate_limit() -> None:
    config = GuardConfig(model="fake", api_keys=ApiKeys([KEY]), rate_per_key=0.5, burst=1)
    with running(config) as guard:
        assert post(guard.url, ROW, {"X-API-Key": KEY}).status_code == 200
        limited = post(guard.url, ROW, {"X-API-Key": KEY})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


def test_key_limiter_releases_slots() -> None:
    limiter = KeyLimiter(concurrency=2)
    assert limiter.acquire("k") is None and limiter.acquire("k") is None and limiter.acquire("k") == 1
    limiter.release("k")
    assert limiter.acquire("k") is None


def test_no_keys_refuses_a_non_loopback_bind_unless_insecure() -> None:
    open_config = GuardConfig(model="fake")
    check_bind("127.0.0.1", open_config)
    check_bind("::1", open_config)
    with pytest.raises(ParameterError, match="without API keys"):
        check_bind("0.0.0.0", open_config)
    check_bind("0.0.0.0", open_config, insecure=True)
    check_bind("0.0.0.0", GuardConfig(model="fake", api_keys=ApiKeys([KEY])))
