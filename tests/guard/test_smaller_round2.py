"""The smaller holes of issue 47, each the way the review found it: a real guard on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import time
import warnings
from pathlib import Path

import pytest

from ragsense.guard import ApiKeys, GuardConfig, RunningGuard

from ._helpers import ROW, httpx, post, running

KEY = "k" * 32


def test_ready_needs_no_key_but_names_the_model_only_to_a_key_holder() -> None:
    """``/ready`` answers without a key (load balancers probe it so), but it told anyone the model."""
    with running(GuardConfig(model="fake", api_keys=ApiKeys([KEY]))) as guard:
        anonymous = httpx.get(guard.url + "/ready")
        assert anonymous.status_code == 200 and anonymous.json() == {"status": "ready"}
        keyed = httpx.get(guard.url + "/ready", headers={"authorization": f"Bearer {KEY}"})
        assert keyed.json()["model"] == "fake"


def test_a_key_file_other_users_can_read_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text(KEY + "\n")
    path.chmod(0o644)
    with pytest.warns(UserWarning, match="readable by other users"):
        assert ApiKeys.load(path)
    path.chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ApiKeys.load(path)


def test_a_compressed_check_is_415(open_guard: RunningGuard) -> None:
    """gzip on /v1/check was read as broken JSON (400)."""
    url = open_guard.url
    zipped = post(url, gzip.compress(json.dumps(ROW).encode()), {"content-encoding": "gzip"})
    assert zipped.status_code == 415 and zipped.json()["error"]["field"] == "content-encoding"


def test_empty_events_in_a_protobuf_export_cost_almost_nothing(open_guard: RunningGuard) -> None:
    """500,000 empty events (one megabyte) cost 1.5 s of CPU and 70 MB."""
    url = open_guard.url
    trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    request = trace_service.ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = b"\x01" * 16, b"\x02" * 8
    for _ in range(500_000):
        span.events.add()
    body = request.SerializeToString()
    assert len(body) > 1_000_000
    cpu = time.process_time()
    reply = httpx.post(url + "/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
    assert reply.status_code == 200
    assert time.process_time() - cpu < 0.4  # client and server in this process: 0.8 s before
