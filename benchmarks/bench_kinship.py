"""Where the time of a kinship sweep goes, as ratios against the raw model forward pass.

Runs a sampled sweep (every condition of the source, ``--max-queries`` per condition, every k) with
the naive RAG pipeline and reports:

* wall time split into indexing (embedding + FAISS), retrieval and generation;
* generation time against one raw forward pass of the model over the same prompts (the least any
  reader must spend: prefill without decoding), as a ratio;
* the projected wall time of the full sweep (every query of every condition at every k), from the
  measured seconds per answer at each k.

    python -m benchmarks.bench_kinship --model smollm2-135m --max-queries 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ragsense.bench.kinship import PipelineSystem, generate_kinship_source, parse_ks, run_kinship
from ragsense.embeddings import load_embedder
from ragsense.models import TransformersModel, load_model
from ragsense.rag import RagPrompt


def raw_forward_seconds(
    model: TransformersModel, texts: list[str], add_special_tokens: bool
) -> tuple[float, int]:
    """Seconds of one bare forward pass (no LM head) over each text, and the tokens processed."""
    torch = model._torch
    body = model._model.model  # the transformer body, without the LM head
    total, tokens = 0.0, 0
    with torch.inference_mode():
        for text in texts:
            ids = model.tokenizer(text, return_tensors="pt", add_special_tokens=add_special_tokens)[
                "input_ids"
            ]
            start = time.perf_counter()
            body(input_ids=ids)
            total += time.perf_counter() - start
            tokens += int(ids.shape[1])
    return total, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--names", type=int, default=12)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--k", default="5,15,30,45,80,120")
    parser.add_argument("--max-queries", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    ks = parse_ks(args.k)
    model = load_model(args.model, threads=args.threads)
    assert isinstance(model, TransformersModel), "the raw forward baseline needs the transformers backend"
    embedder = load_embedder("minilm", cache=True)
    source = generate_kinship_source(args.names, args.generations, seed=0)
    system = PipelineSystem(model, embedder, prompt=RagPrompt())
    with tempfile.TemporaryDirectory() as out:
        run = run_kinship(source, system, ks, out, max_queries=args.max_queries)
        lines = Path(out, "answers.jsonl").read_text(encoding="utf-8").splitlines()
    answers = [json.loads(line) for line in lines]
    n_answers = len(answers)

    # The raw forward baseline over exactly the prompts the pipeline sent.
    docs = {d.id: d.text for d in source.documents}
    prompts = []
    for a in answers:
        ranked = [docs[i] for i in a["retrieved_ids"]]
        if system.prompt_format_used == "chat":
            prompts.append(model.render_chat(system.prompt.render_chat(a["question"], ranked)))
        else:
            prompts.append(system.prompt.render_plain(a["question"], ranked))
    raw_s, raw_tokens = raw_forward_seconds(
        model, prompts, add_special_tokens=system.prompt_format_used != "chat"
    )

    # Seconds per answer at each k, timed separately on one query per k (generation only).
    per_k_seconds: dict[int, float] = {}
    condition = source.control()
    question = [condition.queries[0].query.text]
    for k in ks:
        start = time.perf_counter()
        asyncio.run(system.answer_condition(condition, question, k, source_id="bench/control"))
        per_k_seconds[k] = time.perf_counter() - start
    full_queries = sum(len(c.queries) for c in source.conditions())
    projected = sum(per_k_seconds[k] * full_queries for k in ks)
    t = run.timings
    figures: dict[str, Any] = {
        "model": args.model,
        "source": {"names": args.names, "generations": args.generations, "documents": len(source.documents)},
        "sampled_answers": n_answers,
        "wall_s": round(run.seconds, 1),
        "indexing_s": t["indexing"],
        "retrieval_s": t["retrieval"],
        "generation_s": t["generation"],
        "share_generation": round(t["generation"] / run.seconds, 3),
        "share_retrieval_and_indexing": round((t["retrieval"] + t["indexing"]) / run.seconds, 3),
        "raw_forward_s": round(raw_s, 2),
        "raw_forward_tokens": raw_tokens,
        "raw_tokens_per_s": round(raw_tokens / raw_s, 1),
        "generation_over_raw_forward": round(t["generation"] / raw_s, 2),
        "seconds_per_answer_by_k": {k: round(v, 2) for k, v in per_k_seconds.items()},
        "full_sweep_queries_per_k": full_queries,
        "full_sweep_projected_s": round(projected),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
