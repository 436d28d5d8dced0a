"""Trace exports in (OTLP JSON and protobuf, Phoenix, Langfuse), malformed traces as per-trace errors,
traces that are not RAG traces reported, and scores out as span annotations that read back."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

semconv = pytest.importorskip("openinference.semconv.trace")

from ragsense.cli import main  # noqa: E402
from ragsense.data import RagRow, RowError  # noqa: E402
from ragsense.errors import InputError  # noqa: E402
from ragsense.evaluation import evaluate  # noqa: E402
from ragsense.traces import read_annotations, read_spans, read_traces, write_annotations  # noqa: E402
from ragsense.traces._exports import CONTENT, DOCUMENTS  # noqa: E402

KIND = semconv.SpanAttributes.OPENINFERENCE_SPAN_KIND
Q, DOC, ANSWER = (
    "Who designs proteins?",
    "David Baker designs proteins in Seattle.",
    "David Baker designs them.",
)


def attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def rag_trace(
    trace: str, *, llm: list[dict[str, Any]] | None = None, docs: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """A root CHAIN span, a RETRIEVER and an LLM span; ``docs``/``llm`` replace their attributes."""
    documents = docs if docs is not None else [attr(f"{DOCUMENTS}.0.{CONTENT}", DOC)]
    outputs = llm if llm is not None else [attr("output.value", ANSWER)]
    return [
        {
            "traceId": trace,
            "spanId": trace[:15] + "0",
            "name": "query",
            "startTimeUnixNano": "1",
            "attributes": [attr(KIND, "CHAIN"), attr("input.value", Q)],
        },
        {
            "traceId": trace,
            "spanId": trace[:15] + "1",
            "parentSpanId": trace[:15] + "0",
            "name": "retrieve",
            "startTimeUnixNano": "2",
            "attributes": [attr(KIND, "RETRIEVER"), attr("input.value", Q), *documents],
        },
        {
            "traceId": trace,
            "spanId": trace[:15] + "2",
            "parentSpanId": trace[:15] + "0",
            "name": "llm",
            "startTimeUnixNano": "3",
            "attributes": [attr(KIND, "LLM"), *outputs],
        },
    ]


def otlp_file(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


def test_semconv_keys_are_the_ones_the_exports_use() -> None:
    assert DOCUMENTS == semconv.SpanAttributes.RETRIEVAL_DOCUMENTS
    assert CONTENT == semconv.DocumentAttributes.DOCUMENT_CONTENT


def test_each_rag_trace_is_a_row_and_malformed_traces_are_clear_errors(tmp_path: Path) -> None:
    spans = [
        *rag_trace("a" * 32),
        *rag_trace("b" * 32, llm=[]),  # missing output
        *rag_trace("c" * 32, docs=[attr(DOCUMENTS, "Baker. Seattle.")]),  # documents as a string
        *rag_trace("d" * 32, docs=[attr(f"{DOCUMENTS}.0.document.text", DOC)]),  # unknown attribute
        *rag_trace(
            "e" * 32, llm=[attr("output.value", ANSWER), attr("llm.prompt", "x" * 10_000_000)]
        ),  # 10 MB
        *rag_trace("f" * 32, llm=[{"key": "output.value", "value": {"fooValue": 1}}]),  # unknown value type
        {
            "traceId": "9" * 32,
            "spanId": "9" * 16,
            "name": "GET /health",
            "attributes": [attr("http.method", "GET")],
        },
    ]
    rows = read_traces(otlp_file(tmp_path / "t.json", spans), "otlp")
    assert [type(r).__name__ for r in rows] == ["RagRow"] + ["RowError"] * 5
    good = rows[0]
    assert isinstance(good, RagRow) and good.id == "a" * 32
    assert (good.question, good.contexts, good.answer) == (Q, [DOC], ANSWER)
    assert good.extra == {
        "trace_id": "a" * 32,
        "span_id": "a" * 15 + "2",
        "retriever_span_id": "a" * 15 + "1",
    }
    errors = {r.id: r for r in rows if isinstance(r, RowError)}
    expected = {
        "b": ("output.value", "has no output"),
        "c": (DOCUMENTS, "documents are a string"),
        "d": (f"{DOCUMENTS}.0.document.text", "unknown document attribute"),
        "e": ("llm.prompt", "10,000,000 characters"),
        "f": ("output.value", "unknown OTLP type 'fooValue'"),
    }
    for letter, (field, words) in expected.items():
        error = errors[letter * 32]
        assert error.field == field and words in error.message, (letter, error)
        assert error.raw == {"id": letter * 32, "trace_id": letter * 32}
    assert [s.trace_id for s in rows.skipped] == ["9" * 32]
    assert "1 traces without a retriever and an LLM span" in str(rows.report())


def test_protobuf_reads_as_its_json(tmp_path: Path) -> None:
    pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    json_format = pytest.importorskip("google.protobuf.json_format")
    import base64

    spans = rag_trace("ab" * 16)
    message = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                **s,
                                **{
                                    k: base64.b64encode(bytes.fromhex(s[k])).decode()
                                    for k in ("traceId", "spanId", "parentSpanId")
                                    if k in s
                                },
                            }
                            for s in spans
                        ]
                    }
                ]
            }
        ]
    }
    request = json_format.ParseDict(message, pb.ExportTraceServiceRequest())
    (tmp_path / "t.pb").write_bytes(request.SerializeToString())
    from_proto = read_traces(tmp_path / "t.pb", "otlp")
    from_json = read_traces(otlp_file(tmp_path / "t.json", spans), "otlp")
    assert list(from_proto) == list(from_json) and len(from_proto) == 1
    (tmp_path / "bad.pb").write_bytes(b"\x0a\xff\xff")
    with pytest.raises(InputError, match="not an OTLP protobuf"):
        read_traces(tmp_path / "bad.pb", "otlp")


def test_phoenix_dataframe_and_rest_exports(tmp_path: Path) -> None:
    frame = [  # get_spans_dataframe() records: one column per attribute, documents as a list
        {
            "context.trace_id": "t1",
            "context.span_id": "r",
            "parent_id": "q",
            "span_kind": "RETRIEVER",
            "start_time": "2025-01-01T00:00:01",
            "attributes.input.value": Q,
            "attributes.retrieval.documents": [{"document.content": DOC, "document.score": 0.9}],
        },
        {
            "context.trace_id": "t1",
            "context.span_id": "l",
            "parent_id": "q",
            "span_kind": "LLM",
            "start_time": "2025-01-01T00:00:02",
            "attributes.llm.output_messages": [{"message.role": "assistant", "message.content": ANSWER}],
        },
        {
            "context.trace_id": "t1",
            "context.span_id": "q",
            "parent_id": None,
            "span_kind": "CHAIN",
            "start_time": "2025-01-01T00:00:00",
        },
        {
            "context": {"trace_id": "t2", "span_id": "r2"},
            "span_kind": "RETRIEVER",  # the REST shape
            "attributes": {"input.value": Q, "retrieval.documents": "not a list"},
        },
        {
            "context": {"trace_id": "t2", "span_id": "l2"},
            "span_kind": "LLM",
            "attributes": {"output.value": ANSWER},
        },
    ]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in frame))
    first, second = read_traces(path, "phoenix")
    assert isinstance(first, RagRow) and (first.question, first.contexts, first.answer) == (Q, [DOC], ANSWER)
    assert first.extra["span_id"] == "l"
    assert isinstance(second, RowError) and second.field == DOCUMENTS
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    columns = {k for r in frame[:3] for k in r}  # as df.to_parquet writes: every column, null where unset
    table = pyarrow.Table.from_pydict({k: [r.get(k) for r in frame[:3]] for k in sorted(columns)})
    pq.write_table(table, tmp_path / "spans.parquet")
    [from_parquet] = read_traces(tmp_path / "spans.parquet", "phoenix")
    assert from_parquet == first


def test_langfuse_trace_export(tmp_path: Path) -> None:
    traces = {
        "data": [
            {
                "id": "lf1",
                "input": {"query": Q},
                "observations": [
                    {
                        "id": "o1",
                        "type": "RETRIEVER",
                        "name": "retrieve",
                        "input": Q,
                        "startTime": "1",
                        "output": {"documents": [{"page_content": DOC, "metadata": {}}]},
                    },
                    {
                        "id": "o2",
                        "type": "GENERATION",
                        "name": "llm",
                        "startTime": "2",
                        "model": "m",
                        "output": {"role": "assistant", "content": ANSWER},
                    },
                ],
            },
            {"id": "lf2", "observations": [{"id": "o3", "type": "GENERATION", "output": "hi"}]},
            {
                "id": "lf3",
                "observations": [
                    {"id": "o4", "type": "SPAN", "name": "retriever", "input": Q, "output": "one string"},
                    {"id": "o5", "type": "GENERATION", "output": ANSWER},
                ],
            },
        ]
    }
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps(traces))
    rows = read_traces(path, "langfuse")
    first, bad = rows
    assert isinstance(first, RagRow) and (first.question, first.contexts, first.answer) == (Q, [DOC], ANSWER)
    assert first.extra["span_id"] == "o2" and first.extra["trace_id"] == "lf1"
    assert isinstance(bad, RowError) and bad.id == "lf3" and "string" in bad.message
    assert [s.trace_id for s in rows.skipped] == ["lf2"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_annotations_round_trip(tmp_path: Path, suffix: str) -> None:
    spans = [
        *rag_trace("a" * 32),
        *rag_trace("b" * 32, llm=[attr("output.value", "Marie Curie was Polish.")]),
    ]
    rows = read_traces(otlp_file(tmp_path / "t.json", spans), "otlp")
    evaluation = evaluate(rows, "consens", model="fake", progress=False)
    path = tmp_path / f"annotations{suffix}"
    assert write_annotations(path, evaluation.rows) == 2
    back = read_annotations(path)
    for annotation, row in zip(back, evaluation.rows, strict=True):
        assert (annotation.trace_id, annotation.span_id) == (row["trace_id"], row["span_id"])
        assert annotation.label == row["verdict"] and annotation.score == row["consens"]
        assert annotation.explanation.startswith("weakest words: ")
    if suffix == ".jsonl":  # Phoenix's span-annotation shape
        record = json.loads(path.read_text().splitlines()[0])
        assert set(record) == {"name", "span_id", "annotator_kind", "result", "metadata"}
        assert set(record["result"]) == {"label", "score", "explanation"}


def test_cli_scores_a_trace_file_and_lists_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = [
        *rag_trace("a" * 32),
        *rag_trace("b" * 32, llm=[]),
        {"traceId": "9" * 32, "spanId": "9" * 16, "name": "health"},
    ]
    source = otlp_file(tmp_path / "t.json", spans)
    out, notes = tmp_path / "out.jsonl", tmp_path / "notes.jsonl"
    code = main(
        [
            "evaluate",
            str(source),
            "--from",
            "otlp",
            "--model",
            "fake",
            "-o",
            str(out),
            "--annotations",
            str(notes),
            "--no-store",
        ]
    )
    err = capsys.readouterr().err
    assert code == 3  # one trace is an input error
    assert "9" * 32 in err and "1 traces without a retriever" in err and "has no output" in err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["trace_id"] for r in records] == ["a" * 32, "b" * 32]
    assert records[1]["errors"][0]["field"] == "output.value"
    assert len(read_annotations(notes)) == 1  # one per scored span
    ray = ["evaluate", str(source), "--from", "otlp", "--model", "fake", "--engine", "ray", "-o", "d"]
    with pytest.raises(SystemExit, match="local engine only"):
        main(ray)


def test_llamaindex_pipeline_trace_file_of_200_spans_is_scored_end_to_end(tmp_path: Path) -> None:
    for module in ("llama_index.core", "openinference.instrumentation.llama_index", "opentelemetry.sdk"):
        pytest.importorskip(module)
    path = tmp_path / "li.pb"
    script = Path(__file__).parents[2] / "scripts" / "llamaindex_traces.py"
    subprocess.run([sys.executable, str(script), "--spans", "200", "-o", str(path)], check=True, timeout=300)
    rows = read_traces(path, "otlp")
    spans = len(read_spans(path, "otlp"))
    assert spans >= 200 and len(rows) >= 10 and all(isinstance(r, RagRow) for r in rows)
    assert len(rows.skipped) >= 1  # the indexing traces: no retriever and LLM
    evaluation = evaluate(rows, "consens", model="fake", progress=False)
    assert not evaluation.has_errors and all(r["verdict"] for r in evaluation.rows)


def _otlp_rows(obj: Any) -> Any:
    from ragsense.traces import otlp_spans, trace_rows

    return trace_rows(otlp_spans(obj))


def _phoenix_rows(obj: Any) -> Any:
    from ragsense.traces import trace_rows
    from ragsense.traces._exports import phoenix_span

    return trace_rows(phoenix_span(r) for r in obj)


def _langfuse_rows(obj: Any) -> Any:
    from ragsense.traces import trace_rows
    from ragsense.traces._exports import langfuse_spans, langfuse_traces

    return trace_rows(s for t in langfuse_traces(obj) for s in langfuse_spans(t))


HOSTILE = {
    "otlp": ({"resourceSpans": [{"scopeSpans": [{"spans": rag_trace("a" * 32)}]}]}, _otlp_rows),
    "phoenix": (
        [
            {
                "context": {"trace_id": "t", "span_id": "r"},
                "span_kind": "RETRIEVER",
                "attributes": {"input.value": Q, "retrieval.documents": [{"document.content": DOC}]},
            },
            {
                "context": {"trace_id": "t", "span_id": "l"},
                "span_kind": "LLM",
                "attributes": {"output.value": ANSWER},
            },
        ],
        _phoenix_rows,
    ),
    "langfuse": (
        {
            "data": [
                {
                    "id": "lf",
                    "input": {"query": Q},
                    "observations": [
                        {"id": "o1", "type": "RETRIEVER", "input": Q, "output": [{"page_content": DOC}]},
                        {
                            "id": "o2",
                            "type": "GENERATION",
                            "output": {"role": "assistant", "content": ANSWER},
                        },
                    ],
                }
            ]
        },
        _langfuse_rows,
    ),
}


@pytest.mark.parametrize("source", list(HOSTILE))
def test_hostile_exports_give_input_errors_never_a_crash(source: str) -> None:
    """Every value of a valid export replaced, in turn, by junk of each JSON type: rows or InputError."""
    valid, read = HOSTILE[source]
    assert len(read(valid)) == 1
    junk: list[Any] = [None, 0, -1.5, "x", [], {}, [1, "y"], {"k": []}, True]

    def paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [path]
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for key, child in items:
            found.extend(paths(child, (*path, key)))
        return found

    for path in paths(valid)[1:]:
        for value in junk:
            mutated = json.loads(json.dumps(valid))
            node = mutated
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            with contextlib.suppress(InputError):
                read(mutated)


def test_a_malformed_output_message_is_its_traces_error_and_evaluate_keeps_the_good_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``llm.output_messages`` with a string ``message`` raised AttributeError: exit 1, every row lost."""
    messages = {"arrayValue": {"values": [{"kvlistValue": {"values": [attr("message", "a string")]}}]}}
    bad = rag_trace("b" * 32, llm=[{"key": "llm.output_messages", "value": messages}])
    source = otlp_file(tmp_path / "t.json", [*rag_trace("a" * 32), *bad])
    out = tmp_path / "out.jsonl"
    code = main(["evaluate", str(source), "--from", "otlp", "--model", "fake", "-o", str(out), "--no-store"])
    assert code == 3  # the documented code for rows with errors, not 1 ("internal error")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert isinstance(records[0]["consens"], float)
    assert records[1]["trace_id"] == "b" * 32 and records[1]["errors"][0]["field"] == "output.value"
    assert "internal error" not in capsys.readouterr().err


def test_json_lines_split_at_newlines_only(tmp_path: Path) -> None:
    """U+0085 and U+2028 are valid raw inside a JSON string; str.splitlines() cut the line there."""
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": rag_trace("a" * 32)}]}]})
    line = line.replace(ANSWER, "David Baker\u0085designs\u2028them.")
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n" + line.replace("a" * 32, "c" * 32) + "\n", encoding="utf-8")
    rows = read_traces(path, "otlp")
    assert [r.answer for r in rows] == ["David Baker\u0085designs\u2028them."] * 2


@pytest.mark.parametrize("source", ["otlp", "phoenix"])
def test_deeply_nested_files_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    """JSON nested thousands deep raised RecursionError: exit 1, a traceback-class error."""
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + '\n{"a": 1}\n')
    code = main(["evaluate", str(path), "--from", source, "--model", "fake", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "nested too deeply" in err
    # Deep enough for a reader, not for the JSON parser: a Phoenix attribute object 980 levels deep.
    path.write_text(
        json.dumps({"context.trace_id": "t", "context.span_id": "s"})[:-1]
        + ', "attributes": '
        + '{"a": ' * 980
        + "1"
        + "}" * 980
        + "}\n"
    )
    with pytest.raises(InputError, match="nested too deeply"):
        read_spans(path, "phoenix")


def test_every_attribute_a_row_reads_takes_any_value_shape_without_a_crash() -> None:
    """Each attribute a row is made from, set in turn to each OTLP value shape (nested ones too):
    the trace is a row or its own error, never an exception (one was: a string ``message``)."""
    from ragsense.traces import otlp_spans, trace_rows

    def kv(**pairs: Any) -> dict[str, Any]:
        return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in pairs.items()]}}

    def array(*values: Any) -> dict[str, Any]:
        return {"arrayValue": {"values": list(values)}}

    text, number = {"stringValue": "x"}, {"intValue": "3"}
    shapes: list[Any] = [text, number, {"boolValue": True}, {"doubleValue": 1.5}, {}, array(), kv()]
    shapes += [array(text), array(number), array(kv()), array(array(text)), kv(message=text)]
    shapes += [
        array(kv(message=text)),
        array(kv(message=array(text))),
        array(kv(**{"message.content": number})),
    ]
    shapes += [array(kv(document=text)), array(kv(**{"document.content": number})), kv(content=kv())]
    keys = [
        KIND,
        "input.value",
        "output.value",
        "llm.output_messages",
        "llm.output_messages.0.message.content",
        "llm.output_messages.0.message",
        DOCUMENTS,
        f"{DOCUMENTS}.0.{CONTENT}",
        f"{DOCUMENTS}.0.document.metadata",
        f"{DOCUMENTS}.{'9' * 5000}.{CONTENT}",
    ]
    for key in keys:
        for shape in shapes:
            spans = rag_trace("a" * 32)
            spans[2]["attributes"].append({"key": key, "value": shape})
            spans[1]["attributes"].append({"key": key, "value": shape})
            request = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
            rows = trace_rows(otlp_spans(request))
            assert len(rows) + len(rows.skipped) == 1, (key, shape)  # a kind not a string: not RAG
            assert all(isinstance(row, RagRow | RowError) for row in rows), (key, shape)
