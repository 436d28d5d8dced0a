"""``ragsense evaluate``: the chosen metrics over every row in one pass (the spine's command)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ragsense.cli._common import add_consens_options, model_spec_from_args
from ragsense.cli._numbers import non_negative_float, positive_int
from ragsense.cli._run import (
    LABEL,
    Columns,
    UsageExit,
    add_run_options,
    bands_of,
    error_text,
    fmt,
    label_cell,
    question_of,
    row_id,
    run_command,
    score_cell,
    top_document_cell,
    weakest_cell,
)
from ragsense.errors import ParameterError
from ragsense.evaluation import (
    DEFAULT_METRICS,
    EngineSpec,
    Evaluation,
    FinalFile,
    Metric,
    RayEngine,
    available_metrics,
    claim_output,
    create_metric,
    require_ray,
    resolve_metrics,
)
from ragsense.traces import SOURCES, TraceRows, read_traces, write_annotations


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="run several metrics (consens, attribution, vera, correctness, similarity) in one pass",
        description=(
            "Score every row with each chosen metric. The output keeps every input field and adds each "
            "metric's fields (docs/metrics.md) and an 'errors' list; a row one metric cannot score is "
            "still scored by the others. Exit codes: 0 every row scored and every gate passed, 3 some "
            "rows have errors, 4 a gate failed (--max-share, --fail-under), 2 usage or setup error, 1 an "
            "internal error (a bug: please report it; RAGSENSE_DEBUG=1 prints the traceback)."
        ),
    )
    add_run_options(
        parser,
        output_help="output .jsonl, .csv or .parquet ('-' for JSONL on stdout); with --engine ray a folder",
    )
    traces = parser.add_argument_group(
        "traces (extra ragsense[traces]; docs/traces.md)",
        "Read INPUT as a trace export: each trace with a retriever and an LLM span is one row (id: the "
        "trace id; trace_id and span_id kept); traces without them are counted and listed on stderr.",
    )
    traces.add_argument(
        "--from",
        dest="trace_from",
        choices=list(SOURCES),
        help="INPUT is an OTLP (JSON or .pb), Phoenix span or Langfuse trace export",
    )
    traces.add_argument(
        "--annotations",
        metavar="FILE",
        help=(
            "write one annotation per scored span: .jsonl Phoenix span annotations, .json OTLP span "
            "events (an existing FILE is refused unless --overwrite)"
        ),
    )
    parser.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help=(
            "comma-separated metric names (default: consens); registered: "
            + ", ".join(sorted(available_metrics()))
        ),
    )
    group = parser.add_argument_group("metric options")
    add_consens_options(group, "ConSens: how word perplexities are averaged")
    group.add_argument("--estimator", help="correctness: the estimator file (ragsense correctness train)")
    group.add_argument("--judge", help="vera: judge model (default: --model)")
    group.add_argument(
        "--no-judge-cache", action="store_true", help="vera: do not read or write the judge cache"
    )
    group.add_argument(
        "--similarity-mode",
        choices=["whole", "max_chunk"],
        default="whole",
        help="similarity: context windows",
    )
    ray = parser.add_argument_group(
        "Ray engine (extra ragsense[ray]; docs/cluster.md)",
        "With --engine ray the rows are scored by a pool of Ray actors, each loading the models once, "
        "with the same results as one process; -o is then a folder of shards (part-SSSSS-of-NNNNN) that "
        "--resume continues. INPUT may be a file, a folder, or any path Ray Data reads (s3://, gs://).",
    )
    ray.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="where to score (default: local)"
    )
    ray.add_argument(
        "--address",
        help="the Ray cluster: auto, HOST:6379 or ray://HOST:10001 (default: start a local Ray)",
    )
    ray.add_argument(
        "--workers",
        type=positive_int,
        help="actors, each with its own models (default: one per CPU, or per GPU)",
    )
    ray.add_argument(
        "--gpus-per-worker", type=non_negative_float, default=0.0, help="GPUs each actor reserves (default 0)"
    )
    ray.add_argument(
        "--shard-chunks",
        type=positive_int,
        help="chunks per shard file (default: about 32 shards, 1 to 64 chunks)",
    )
    ray.add_argument(
        "--shard-format",
        choices=["parquet", "jsonl"],
        default="parquet",
        help="shard files (default parquet)",
    )
    parser.set_defaults(run=run)


def metrics_from_args(args: argparse.Namespace) -> list[Metric]:
    """Each named metric with the options the flags give it."""
    model, options = model_spec_from_args(args)
    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if args.bands and not {"consens", "attribution"} & set(names):
        raise ParameterError(
            "--bands sets the verdicts of consens or attribution; name one in --metrics", parameter="bands"
        )
    consens = {
        "model": model,
        "model_options": options,
        "aggregation": args.aggregation,
        "bands": args.bands,  # a path: ConSens reads it and refuses bands fitted on another aggregation
        "context_budget": args.context_budget,
        "binding": args.binding,
    }
    per_metric: dict[str, dict[str, Any]] = {
        "consens": consens,
        "attribution": consens,
        "vera": {
            "judge": args.judge or model,
            "model_options": {} if args.judge else options,
            "cache": not args.no_judge_cache,
        },
        "correctness": {"estimator": args.estimator, "model_options": options},
        "similarity": {"mode": args.similarity_mode},
    }
    if "attribution" in names and "consens" in names:  # attribution is ConSens with leave-one-out
        names.remove("consens")
    # A plug-in gets the model as a shared option: dropped if it takes none, as in ragsense.evaluate.
    built: list[str | Metric] = [create_metric(n, **per_metric[n]) if n in per_metric else n for n in names]
    return resolve_metrics(built, model=model, model_options=options)


def _columns(metrics: list[Metric]) -> Columns:
    columns: list[tuple[str, int, Any]] = [
        ("id", 14, row_id),
        ("question", 26, question_of),
    ]
    for metric in metrics:
        for key in metric.scores:
            header = key.replace("_", " ")
            # ConSens and similarity range over [-1, 1] (signed); VERA's shares over [0, 1].
            signed = metric.name in ("consens", "similarity")
            if key == "consens":  # next to its verdict: shown with the digits a band edge needs
                columns.append((header, max(9, len(header)), score_cell(key, bands_of([metric]))))
                continue
            columns.append(
                (header, max(9, len(header)), lambda r, k=key, sg=signed: fmt(r.get(k), signed=sg))
            )
        if metric.verdict is not None:
            columns.append((metric.verdict, 10, lambda r, k=metric.verdict: fmt(r.get(k))))
        # Why: the words the context does not state, and with attribution the document the answer
        # rests on most (the same evidence the guard, the pytest plug-in and the report give).
        if "words" in metric.fields:
            columns.append(("why", 30, weakest_cell))
        if "top_document" in metric.fields:
            columns.append(("top doc", 10, top_document_cell))
    # A labelled input (the bundled sample has one) shows its label beside our verdict, so agreement
    # and disagreement can be read at a glance; render() drops the column when no row has the field.
    columns.append((LABEL, 10, label_cell))
    columns.append(("errors", 18, lambda r: error_text(r) or ""))
    return columns


def engine_from_args(args: argparse.Namespace) -> EngineSpec:
    """``local``, or the :class:`RayEngine` the Ray flags describe (checked before anything loads)."""
    ray_only = {
        "--address": args.address is not None,
        "--workers": args.workers is not None,
        "--gpus-per-worker": args.gpus_per_worker != 0.0,
        "--shard-chunks": args.shard_chunks is not None,
        "--shard-format": args.shard_format != "parquet",
    }
    if args.engine == "local":
        given = [flag for flag, used in ray_only.items() if used]
        if given:
            raise UsageExit(f"ragsense evaluate: {', '.join(given)} needs --engine ray")
        return "local"
    if args.output == "-":
        raise UsageExit("ragsense evaluate: --engine ray writes a folder of shards; give -o FOLDER")
    try:
        engine = RayEngine(
            address=args.address,
            workers=args.workers,
            gpus_per_worker=args.gpus_per_worker,
            threads_per_worker=args.threads or 1,
            shard_chunks=args.shard_chunks,
            shard_format=args.shard_format,
        )
    except ParameterError as exc:
        raise UsageExit(f"ragsense evaluate: {exc}") from None
    require_ray()  # the missing extra is named before any model loads
    return engine


def run(args: argparse.Namespace) -> int:
    engine = engine_from_args(args)
    if args.trace_from and engine != "local":
        raise UsageExit("ragsense evaluate: --from reads a trace export on the local engine only")
    if args.annotations and not args.annotations.lower().endswith((".jsonl", ".json")):
        raise UsageExit("ragsense evaluate: --annotations FILE must end in .jsonl (Phoenix) or .json (OTLP)")
    annotations = _annotations_file(args)
    metrics = metrics_from_args(args)
    rows: TraceRows | None = None
    if args.trace_from:
        if not args.input:
            raise UsageExit("ragsense evaluate: --from needs a trace file as INPUT")
        rows = read_traces(args.input, args.trace_from)

    def lines(evaluation: Evaluation) -> list[str]:
        out = [] if rows is None or rows.report() is None else [str(rows.report())]
        if args.annotations:
            written = write_annotations(args.annotations, evaluation.rows)
            out.append(f"{written} span annotations written to {args.annotations}")
        return out

    # The annotations file is claimed like the output, before a row is read or a model loaded.
    with claim_output(annotations, resume=args.resume, overwrite=args.overwrite):
        return run_command(
            args, "evaluate", metrics, _columns(metrics), engine=engine, source=rows, extra_lines=lines
        )


def _annotations_file(args: argparse.Namespace) -> FinalFile | None:
    """``--annotations FILE`` as an output to claim; never the input or ``-o`` (not even with
    ``--overwrite``: the run reads the one and writes the other)."""
    if not args.annotations:
        return None
    path = Path(args.annotations)
    for flag, other in (("INPUT", args.input), ("--output", args.output)):
        if other and other != "-" and os.path.realpath(other) == os.path.realpath(path):
            raise UsageExit(f"ragsense evaluate: --annotations {args.annotations} is the {flag} file")
    return FinalFile(path, "annotations file")
