"""Write the spans of an instrumented minimal LlamaIndex pipeline as an OTLP trace file.

An in-memory ``VectorStoreIndex`` over the bundled sample's contexts, LlamaIndex's own ``MockEmbedding``
and ``MockLLM`` (no network, no weights), traced by ``openinference-instrumentation-llama-index`` into
the OpenTelemetry SDK; the spans are written as one OTLP ``ExportTraceServiceRequest``: protobuf for a
``.pb`` path, else the OTLP JSON mapping. Queries are the sample's questions, repeated, until at least
``--spans`` spans were made. docs/traces.md scores the file::

    python scripts/llamaindex_traces.py --spans 200 -o traces.json
    ragsense evaluate traces.json --from otlp --model fake -o scores.jsonl

Needs ``pip install llama-index-core openinference-instrumentation-llama-index opentelemetry-sdk
opentelemetry-exporter-otlp-proto-common`` beside ``ragsense[traces]``.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragsense.data import read_rows, sample_rows_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200, help="at least this many spans (default 200)")
    parser.add_argument("-o", "--output", required=True, help="the trace file: .pb protobuf, else JSON")
    args = parser.parse_args()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)

    rows = list(read_rows(sample_rows_path()))
    contexts = sorted({c for row in rows for c in row.contexts})
    Settings.embed_model = MockEmbedding(embed_dim=8)
    Settings.llm = MockLLM()  # echoes its prompt: deterministic, offline
    engine = VectorStoreIndex.from_documents([Document(text=c) for c in contexts]).as_query_engine(
        similarity_top_k=2
    )
    done = 0
    while len(exporter.get_finished_spans()) < args.spans:
        engine.query(rows[done % len(rows)].question)
        done += 1
    LlamaIndexInstrumentor().uninstrument()
    request = encode_spans(exporter.get_finished_spans())
    out = Path(args.output)
    if out.suffix == ".pb":
        out.write_bytes(request.SerializeToString())
    else:
        body = MessageToDict(request)
        for resource in body.get("resourceSpans", []):  # OTLP JSON writes ids as hex, not base64
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        out.write_text(json.dumps(body) + "\n")
    print(f"{len(exporter.get_finished_spans())} spans of {done} queries written to {out}")


if __name__ == "__main__":
    main()
