"""What helps a small reader on the kinship benchmark: prompt format, document order, few-shot.

Runs each variant of the naive RAG pipeline on the same sampled control and experimental queries at
one k and prints accuracy per variant (retrieval is identical across variants, so only the reader
changes). The few-shot examples are generic (rivers, bridges), not kinship.

    python -m papers.kinship.kinship_reader_ablation --model smollm2-135m --k 5 --max-queries 24
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile

from ragsense.bench.kinship import PipelineSystem, generate_kinship_source, run_kinship
from ragsense.embeddings import load_embedder
from ragsense.models import GenerationConfig, chat_available, load_model
from ragsense.rag import ANSWER_STOPS, GENERIC_EXAMPLES, RagPrompt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--names", type=int, default=12)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--relations", default="grandfather")
    parser.add_argument("--max-queries", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--stop", action="append", default=None, help="stop strings (default: the pipeline's ANSWER_STOPS)"
    )
    args = parser.parse_args()
    args.stop = args.stop or list(ANSWER_STOPS)
    model = load_model(args.model, threads=args.threads)
    embedder = load_embedder("minilm", cache=True)
    source = generate_kinship_source(args.names, args.generations, seed=0)
    formats = ["chat", "plain"] if chat_available(model) else ["plain"]
    rows = []
    for fmt, order, shots in itertools.product(formats, ["best_first", "best_last"], [False, True]):
        prompt = RagPrompt(document_order=order, examples=GENERIC_EXAMPLES if shots else ())
        system = PipelineSystem(
            model,
            embedder,
            prompt=prompt,
            prompt_format=fmt,  # type: ignore[arg-type]
            generation=GenerationConfig(max_new_tokens=32, stop=tuple(args.stop)),
        )
        with tempfile.TemporaryDirectory() as out:
            run = run_kinship(
                source,
                system,
                [args.k],
                out,
                relations=args.relations.split(","),
                max_queries=args.max_queries,
            )
        row = {"format": fmt, "order": order, "few_shot": shots, "seconds": round(run.seconds, 1)}
        row.update({f"{r['condition']}": round(r["accuracy"], 3) for r in run.results})
        row.update({f"{r['condition']}_recall": round(r["retrieval_recall"], 3) for r in run.results})
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"model": args.model, "k": args.k, "max_queries": args.max_queries, "variants": rows}))


if __name__ == "__main__":
    main()
