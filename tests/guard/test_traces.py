"""``POST /v1/traces``: the real OpenTelemetry SDK exports OpenInference spans to the guard on 127.0.0.1
(protobuf and JSON); RAG traces are scored as ``evaluate`` scores them, the rest reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openinference.semconv.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
otlp_http = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from ragsense.evaluation import evaluate  # noqa: E402
from ragsense.guard import ApiKeys, GuardConfig  # noqa: E402

from ._helpers import ROW, httpx, metric_value, running, sink_records  # noqa: E402

KEY = "trace-key-0123456789abcdef"


def _export(url: str, traces: list[dict[str, Any]], *, key: str | None = KEY, **kw: Any) -> Any:
    """Export one trace per item (root CHAIN span, RETRIEVER and LLM children) through the real SDK."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    exporter = otlp_http.OTLPSpanExporter(endpoint=url + "/v1/traces", headers=headers, **kw)
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # each span as it ends: a trace spans requests
    tracer = provider.get_tracer("ragsense-test")
    ids = []
    for item in traces:
        with tracer.start_as_current_span("query", attributes={"openinference.span.kind": "CHAIN"}) as root:
            ids.append(format(root.get_span_context().trace_id, "032x"))
            if "contexts" in item:
                docs = {
                    f"retrieval.documents.{i}.document.content": c for i, c in enumerate(item["contexts"])
                }
                kind = {"openinference.span.kind": "RETRIEVER", "input.value": item["question"]}
                with tracer.start_as_current_span("retrieve", attributes={**kind, **docs}):
                    pass
            if "answer" in item:
                llm = {"openinference.span.kind": "LLM", "output.value": item["answer"]}
                with tracer.start_as_current_span("llm", attributes=llm):
                    pass
    provider.shutdown()
    return ids


def test_sdk_export_is_scored_like_evaluate_and_reported(tmp_path: Path) -> None:
    sink = tmp_path / "scores.jsonl"
    config = GuardConfig(model="fake", api_keys=ApiKeys([KEY]), trace_sink=str(sink))
    other = {**ROW, "answer": "Marie Curie studied radium in Paris."}
    with running(config) as guard:
        ids = _export(guard.url, [ROW, other, {"question": "ping"}])
        # The JSON encoding of OTLP too (the SDK sends protobuf): one hand-made export.
        records = sink_records(sink, 3)
        head = {"Authorization": f"Bearer {KEY}"}
        assert metric_value(guard.url, 'ragsense_guard_traces_total{outcome="scored"}', head) == 2
        assert metric_value(guard.url, 'ragsense_guard_traces_total{outcome="not_rag"}', head) == 1
        refused = httpx.post(
            guard.url + "/v1/traces", content=b"{}", headers={"content-type": "application/json"}
        )
        assert refused.status_code == 401
        wrong = httpx.post(
            guard.url + "/v1/traces", content=b"x", headers={**head, "content-type": "text/plain"}
        )
        assert wrong.status_code == 415
        bad = httpx.post(
            guard.url + "/v1/traces",
            content=b"\x0a\xff",
            headers={**head, "content-type": "application/x-protobuf"},
        )
        assert bad.status_code == 400 and bad.json()["error"]["field"]
    by_trace = {r["trace_id"]: r for r in records}
    assert "not_rag" in by_trace[ids[2]]
    offline = evaluate([ROW, other], "consens", model="fake", progress=False).rows
    for trace_id, row in zip(ids[:2], offline, strict=True):
        scored = by_trace[trace_id]
        assert scored["consens"] == row["consens"] and scored["verdict"] == row["verdict"]
        assert len(scored["span_id"]) == 16 and scored["weakest_words"]


def test_json_export_with_a_malformed_trace_answers_partial_success(tmp_path: Path) -> None:
    sink = tmp_path / "scores.jsonl"

    def attr(k: str, v: str) -> dict[str, Any]:
        return {"key": k, "value": {"stringValue": v}}

    spans = [
        {
            "traceId": "a" * 32,
            "spanId": "1" * 16,
            "name": "retrieve",
            "attributes": [
                attr("openinference.span.kind", "RETRIEVER"),
                attr("input.value", ROW["question"]),
                attr("retrieval.documents", "one string"),
            ],
        },
        {
            "traceId": "a" * 32,
            "spanId": "2" * 16,
            "name": "llm",
            "attributes": [attr("openinference.span.kind", "LLM"), attr("output.value", ROW["answer"])],
        },
    ]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    with running(GuardConfig(model="fake", trace_sink=str(sink))) as guard:
        reply = httpx.post(guard.url + "/v1/traces", json=body)
        assert reply.status_code == 200, reply.text
        partial = reply.json()["partialSuccess"]
        assert partial["rejectedSpans"] == 2 and "documents are a string" in partial["errorMessage"]
    [record] = sink_records(sink, 1)
    assert record["trace_id"] == "a" * 32 and record["error"]["field"] == "retrieval.documents"


def test_an_instrumented_llamaindex_pipeline_exports_to_the_guard(tmp_path: Path) -> None:
    """A minimal LlamaIndex pipeline (in-memory index, its MockLLM and MockEmbedding), traced by
    openinference-instrumentation-llama-index, exporting over OTLP/HTTP protobuf to the guard."""
    core = pytest.importorskip("llama_index.core")
    instrumentation = pytest.importorskip("openinference.instrumentation.llama_index")
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    sink = tmp_path / "scores.jsonl"
    with running(GuardConfig(model="fake", api_keys=ApiKeys([KEY]), trace_sink=str(sink))) as guard:
        exporter = otlp_http.OTLPSpanExporter(
            endpoint=guard.url + "/v1/traces", headers={"Authorization": f"Bearer {KEY}"}
        )
        provider = sdk_trace.TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrumentor = instrumentation.LlamaIndexInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            core.Settings.embed_model = MockEmbedding(embed_dim=8)
            core.Settings.llm = MockLLM(max_tokens=12)
            docs = [core.Document(text=ROW["contexts"][0]), core.Document(text="Seattle is rainy.")]
            engine = core.VectorStoreIndex.from_documents(docs).as_query_engine(similarity_top_k=1)
            for _ in range(3):
                engine.query(ROW["question"])
        finally:
            instrumentor.uninstrument()
            provider.shutdown()
        sink_records(sink, 4)  # 3 queries scored, the indexing traces reported
    records = [json.loads(line) for line in sink.read_text().splitlines()]  # all in: the guard drained
    scored = [r for r in records if "consens" in r]
    assert len(scored) == 3 and all(isinstance(r["consens"], float) and r["span_id"] for r in scored)
    assert any("not_rag" in r for r in records)


def test_trace_bodies_keep_the_guards_limits() -> None:
    from ragsense.guard import Limits

    with running(GuardConfig(model="fake", limits=Limits(max_body_bytes=1000))) as guard:
        url = guard.url + "/v1/traces"
        big = httpx.post(url, content=b"{" + b" " * 2000 + b"}", headers={"content-type": "application/json"})
        assert big.status_code == 413
        nan = httpx.post(url, content=b'{"resourceSpans": NaN}', headers={"content-type": "application/json"})
        assert nan.status_code == 400
        deep = httpx.post(url, content=b"[" * 400 + b"]" * 400, headers={"content-type": "application/json"})
        assert deep.status_code == 400
        no_spans = httpx.post(url, json={"resourceSpans": [{"scopeSpans": 3}]})
        assert no_spans.status_code == 400 and no_spans.json()["error"]["field"] == "scopeSpans"
        assert httpx.get(guard.url + "/health").status_code == 200
