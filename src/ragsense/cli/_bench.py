"""``ragsense bench kinship``: the multi-document kinship benchmark against a RAG system."""

from __future__ import annotations

import argparse
import codecs
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ragsense.cli._common import add_model_options
from ragsense.cli._numbers import non_negative_int, positive_int, unit_interval
from ragsense.errors import ParameterError


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("bench", help="benchmarks of RAG systems (kinship)")
    bench_sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    kin = bench_sub.add_parser(
        "kinship",
        help="multi-document kinship benchmark: accuracy by number of retrieved documents",
        description=(
            "Generate a family-tree knowledge source, ask every question of the control and of each "
            "relation held out, at every k, and write the paper's Table 1 (Markdown, CSV, JSON), a "
            "plot (PNG), results.json and every answer (answers.jsonl) to --out."
        ),
    )
    source = kin.add_argument_group("knowledge source")
    source.add_argument(
        "--names",
        type=positive_int,
        default=12,
        help="names per list (male and female; default 12)",
    )
    source.add_argument("--generations", type=positive_int, default=3, help="generations (default 3)")
    source.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the family tree and query sample",
    )
    source.add_argument(
        "--distractors",
        type=unit_interval,
        default=0.0,
        help="share of unrelated documents in the store, in [0, 1)",
    )
    run = kin.add_argument_group("run")
    run.add_argument("--k", default="5,15,30,45,80,120", help="documents retrieved, comma-separated")
    run.add_argument(
        "--relations",
        default=None,
        help="conditions besides control: relation words or kinds, comma-separated (default: every word)",
    )
    run.add_argument(
        "--hold-out",
        choices=["fact", "relation"],
        default="fact",
        help=(
            "fact (default): leave out the held-out relation's documents and their inverse statements; "
            "relation: only the relation's own documents (the paper's literal wording)"
        ),
    )
    run.add_argument(
        "--max-queries",
        type=positive_int,
        default=None,
        help="sample at most N queries per condition",
    )
    run.add_argument("--out", required=True, help="output directory")
    run.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    run.add_argument("--overwrite", action="store_true", help="replace an earlier run in --out")
    run.add_argument("--no-plot", action="store_true", help="skip the PNG")
    system = kin.add_argument_group("system under test (default: ragsense's naive RAG pipeline)")
    system.add_argument(
        "--system",
        help="a Python factory MODULE:NAME or FILE.py:NAME, build(documents, k) -> answer(question) "
        "returning (answer, retrieved_documents)",
    )
    system.add_argument("--system-url", help="base URL of a system implementing POST /index and /answer")
    system.add_argument(
        "--retrieval-only",
        action="store_true",
        help="run the pipeline's retriever alone: retrieval recall of every query, no generation",
    )
    system.add_argument(
        "--store", choices=["faiss", "memory"], default="faiss", help="vector store (default faiss)"
    )
    system.add_argument(
        "--retrieval",
        choices=["dense", "hybrid"],
        default="hybrid",
        help="hybrid (default): MiniLM cosine ranks fused with BM25 keyword ranks (reciprocal rank "
        "fusion); dense: MiniLM cosine alone",
    )
    system.add_argument(
        "--prompt-format",
        choices=["auto", "chat", "plain"],
        default="auto",
        help="chat template when the generator has one (auto), or force one",
    )
    system.add_argument(
        "--document-order",
        choices=["auto", "best_first", "best_last"],
        default="auto",
        help="order of the retrieved documents in the prompt; auto (default): best last in a chat, "
        "best first in a plain prompt",
    )
    system.add_argument("--few-shot", action="store_true", help="prepend two generic worked examples")
    system.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=32,
        help="answer length cap (default 32)",
    )
    system.add_argument(
        "--stop",
        action="append",
        default=None,
        help="a stop string (repeatable; escapes like \\n are decoded); default: a blank line, "
        "'\\nQuestion:' or '\\nDocuments:'",
    )
    add_model_options(kin)
    kin.set_defaults(run=run_kinship_command)


def load_factory(spec: str) -> Any:
    """``package.module:name`` or ``path/to/file.py:name`` -> the object."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise ParameterError(f"expected MODULE:NAME or FILE.py:NAME, got {spec!r}", parameter="--system")
    if target.endswith(".py"):
        path = Path(target)
        if not path.exists():
            raise ParameterError(f"no such file {target}", parameter="--system")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ParameterError(f"cannot import {target}", parameter="--system")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if not hasattr(module, attr):
        raise ParameterError(f"{target} has no {attr!r}", parameter="--system")
    return getattr(module, attr)


def run_kinship_command(args: argparse.Namespace) -> int:
    from ragsense.bench.kinship import (
        CallableSystem,
        HttpSystem,
        PipelineSystem,
        RetrievalOnlySystem,
        generate_kinship_source,
        run_kinship,
        write_kinship_report,
    )
    from ragsense.cli._common import model_from_args
    from ragsense.models import GenerationConfig
    from ragsense.rag import ANSWER_STOPS, GENERIC_EXAMPLES, RagPrompt

    source = generate_kinship_source(
        args.names, args.generations, seed=args.seed, distractor_share=args.distractors
    )
    relations = [r.strip() for r in args.relations.split(",") if r.strip()] if args.relations else None
    out = Path(args.out)
    settings: dict[str, Any] = {}
    system: Any
    if args.system and args.system_url:
        raise ParameterError("give --system or --system-url, not both", parameter="--system")
    if args.system:
        system = CallableSystem(load_factory(args.system), name=args.system)
        settings["system"] = args.system
    elif args.system_url:
        system = HttpSystem(args.system_url, name=args.system_url)
        settings["system"] = args.system_url
    elif args.retrieval_only:
        from ragsense.embeddings import load_embedder

        system = RetrievalOnlySystem(
            None, load_embedder("minilm", cache=True), store_kind=args.store, retrieval=args.retrieval
        )
        settings.update(system="retrieval only", embedder="all-minilm-l6-v2", store=args.store)
    else:
        from ragsense.embeddings import load_embedder

        generator = model_from_args(args)
        stops = tuple(codecs.decode(x, "unicode_escape") for x in args.stop) if args.stop else ANSWER_STOPS
        prompt = RagPrompt(
            document_order=args.document_order, examples=GENERIC_EXAMPLES if args.few_shot else ()
        )
        system = PipelineSystem(
            generator,
            load_embedder("minilm", cache=True),
            store_kind=args.store,
            retrieval=args.retrieval,
            prompt=prompt,
            prompt_format=args.prompt_format,
            generation=GenerationConfig(max_new_tokens=args.max_new_tokens, stop=stops),
        )
        settings.update(
            model=generator.info.name,
            model_fingerprint=generator.info.fingerprint,
            embedder="all-minilm-l6-v2",
            store=args.store,
            retrieval=args.retrieval,
            prompt_format=args.prompt_format,
            document_order=args.document_order,
            few_shot=args.few_shot,
            max_new_tokens=args.max_new_tokens,
            stop=list(stops),
            prompt_version=prompt.version,
        )
    source.write_csv(out / "source", hold_out=args.hold_out)
    run = run_kinship(
        source,
        system,
        args.k,
        out,
        relations=relations,
        hold_out=args.hold_out,
        max_queries=args.max_queries,
        resume=args.resume,
        overwrite=args.overwrite,
        settings=settings,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    summary = source.summary()
    metadata = {
        **settings,
        "names per list": args.names,
        "generations": args.generations,
        "seed": args.seed,
        "documents": summary["documents"],
        "distractor share": args.distractors,
        "hold out": args.hold_out,
        "max queries per condition": args.max_queries,
        "system settings": run.settings.get("system_settings"),
        "command": "ragsense " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("ragsense") else None,
        "seconds": round(run.seconds, 1),
        "timings (s)": run.timings,
    }
    title = (
        f"Kinship benchmark: {args.names} names, {args.generations} generations, "
        f"{summary['documents']} documents"
    )
    report = write_kinship_report(run.results, out, title=title, metadata=metadata, plot=not args.no_plot)
    print(report.accuracy_table)
    print(
        f"{run.n_answered} answers computed, {run.n_resumed} resumed, in {run.seconds:.1f} s "
        f"(timings: {run.timings}); files in {out}"
    )
    if report.plot_skipped:
        print(f"plot skipped: {report.plot_skipped}", file=sys.stderr)
    return 0
