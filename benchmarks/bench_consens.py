"""ConSens throughput against the raw forward pass of the same model over the same tokens.

    .venv/bin/python -m benchmarks.bench_consens --model smollm2-135m --items 20

Rows: WikiEval items, each answer (grounded and ungrounded) scored against ``context_v1``, or with
``--dataset halueval`` HaluEval-dev items (right and hallucinated answer against the knowledge), so
every (question, answer) needs one no-context pass and one context pass. The "limit" is the model body
(transformer layers, no LM head) run over exactly the unique token sequences ConSens scores, with the
same batch plan. ConSens adds the LM head on continuation positions, tokenization, word alignment and
the score. A second baseline is the naive route: the model's full forward pass with log-softmax over
every position. Printed figures are token rates and their ratios (higher is better; 1.0 means ConSens
costs nothing beyond the forward pass); the last line is one JSON object. Peak memory is the process's
peak resident set size right after the ConSens pass (model weights included). ``*_body_calls`` and
``*_body_tokens`` count the model body's calls and the tokens they run (rows x length, padding
included) in each timed run.

The default score ``support`` (issue 24) adds work the previous default (``q25``) did not do: the
context's word keys, the refusal check and each word's lookup and support probability.
``support_extra_s`` times exactly that work on the same rows, and ``support_vs_previous_default``
is the ConSens time over the ConSens time without it (the issue's bound: at most 1.2).

The binding check (issue 46, opt-in: ``ConSens(binding=True)``) scores variants of each answer after
the same prompt, the answer and its variants as one group per row (one packed pass on the row's
prompt state, ``models/_hf_grouped.py``). The ConSens figures above are without it (the scorer's
``binding=None``), as the raw forward pass covers only the answer's own sequences;
``binding_vs_consens`` is the wall time of ConSens with the check's settings (``DEFAULT_BINDING``)
over the time without it on the same rows (issue 49's bound: at most 1.5), each run starting from an
empty prompt cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from typing import Any

from ragsense.consens import DEFAULT_BINDING, GroundingScorer, support_r
from ragsense.data import load_halueval, load_wikieval
from ragsense.models import ScoreRequest, load_model
from ragsense.text import ContextVocabulary, is_refusal


def _rows(data: str | None, items: int, dataset: str = "wikieval") -> list[tuple[str, list[str], str]]:
    """Two rows per item: WikiEval's grounded and ungrounded answers against ``context_v1``, or
    HaluEval-dev's right and hallucinated answers against the item's knowledge."""
    rows = []
    if dataset == "halueval":
        for h in load_halueval(data)[:items]:
            rows.append((h.question, [h.knowledge], h.right_answer))
            rows.append((h.question, [h.knowledge], h.hallucinated_answer))
        return rows
    for it in load_wikieval(data)[:items]:
        rows.append((it.question, it.context_v1, it.grounded_answer))
        rows.append((it.question, it.context_v1, it.ungrounded_answer))
    return rows


def _unique_requests(scorer: GroundingScorer, rows: list[tuple[str, list[str], str]]) -> list[ScoreRequest]:
    wanted: dict[ScoreRequest, None] = {}
    t = scorer.template
    for q, docs, a in rows:
        wanted[ScoreRequest(t.render_context(q, ""), t.continuation(a))] = None
        wanted[ScoreRequest(t.render(q, docs), t.continuation(a))] = None
    return list(wanted)


def _raw_forward(model: Any, requests: list[ScoreRequest], *, with_full_logits: bool) -> tuple[float, int]:
    """Time the model over the same sequences and batch plan ConSens uses; returns (seconds, tokens)."""
    torch = model._torch
    encoded = [model._tokenizer(r.prompt + r.continuation)["input_ids"] for r in requests]
    started = time.perf_counter()
    for batch in model._scorer.batches([len(e) for e in encoded]):
        width = max(len(encoded[i]) for i in batch)
        ids = torch.full((len(batch), width), model._pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(batch):
            ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
            mask[row, : len(encoded[i])] = 1
        ids, mask = ids.to(model._device), mask.to(model._device)
        with torch.inference_mode():
            if with_full_logits:
                model._model(input_ids=ids, attention_mask=mask).logits.float().log_softmax(-1)
            else:
                model._model.base_model(input_ids=ids, attention_mask=mask)
    if model._device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started, sum(len(e) for e in encoded)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=20, help="items (2 rows each)")
    parser.add_argument("--dataset", choices=("wikieval", "halueval"), default="wikieval")
    parser.add_argument("--data", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    options: dict[str, Any] = {"device": args.device}
    if args.threads:
        options["threads"] = args.threads
    model = load_model(args.model, **options)
    rows = _rows(args.data, args.items, args.dataset)
    scorer = GroundingScorer(model, binding=None)
    requests = _unique_requests(scorer, rows)
    # Warm-up (allocator, kernels) on a few sequences, outside the timings.
    model.score_sync(requests[:2])

    # ConSens first, so the peak memory read right after it is ConSens's own (the full-logits
    # baseline below allocates far more).
    # Body calls and the tokens they run (batch x length), counted at the kernel.
    body: list[int] = []
    states = model.kernel.states

    def counted(ids: Any, **kwargs: Any) -> Any:
        body.append(int(ids.shape[0] * ids.shape[1]))
        return states(ids, **kwargs)

    model.kernel.states = counted

    def timed(binding: Any) -> tuple[float, list[Any], int, int]:
        cache = getattr(model._scorer, "prompt_cache", None)
        if cache is not None:
            cache.clear()  # each run reads its prompts afresh
        body.clear()
        started = time.perf_counter()
        out = asyncio.run(GroundingScorer(model, binding=binding).score(rows))
        if model._device.type == "cuda":
            model._torch.cuda.synchronize()
        return time.perf_counter() - started, out, len(body), sum(body)

    consens_s, results, consens_calls, consens_tokens = timed(None)
    consens_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    binding_s, checked, binding_calls, binding_tokens = timed(DEFAULT_BINDING)
    model.kernel.states = states
    variants = sum(getattr(r, "binding_variants", 0) for r in checked)
    body_s, tokens = _raw_forward(model, requests, with_full_logits=False)
    full_s, _ = _raw_forward(model, requests, with_full_logits=True)
    assert all(hasattr(r, "consens") for r in results), "a benchmark row failed"
    # The support score's own work, repeated on the same rows and words (see the docstring).
    started = time.perf_counter()
    for (_, docs, answer), result in zip(rows, results, strict=True):
        vocabulary = ContextVocabulary([scorer.template.join(docs)])
        is_refusal(answer)
        words = result.words  # type: ignore[union-attr]
        stated = [vocabulary.states(w.word) for w in words]
        support_r([w.nll_empty - w.nll_context for w in words], stated)
    extra_s = time.perf_counter() - started

    figures = {
        "model": model.info.name,
        "dataset": args.dataset,
        "device": str(model._device),
        "rows": len(rows),
        "sequences": len(requests),
        "sequences_without_caching": 2 * len(rows),
        "tokens": tokens,
        "raw_body_tok_per_s": round(tokens / body_s, 1),
        "raw_full_logits_tok_per_s": round(tokens / full_s, 1),
        "consens_tok_per_s": round(tokens / consens_s, 1),
        "ratio_vs_raw_body": round(body_s / consens_s, 3),
        "ratio_vs_raw_full_logits": round(full_s / consens_s, 3),
        "consens_rows_per_s": round(len(rows) / consens_s, 2),
        "binding_rows_per_s": round(len(rows) / binding_s, 2),
        "binding_variants_per_row": round(variants / len(rows), 2),
        "binding_vs_consens": round(binding_s / consens_s, 3),
        "consens_body_calls": consens_calls,
        "consens_body_tokens": consens_tokens,
        "binding_body_calls": binding_calls,
        "binding_body_tokens": binding_tokens,
        "support_extra_s": round(extra_s, 4),
        "support_vs_previous_default": round(consens_s / (consens_s - extra_s), 4),
        "consens_peak_rss_mb": round(consens_peak_mb, 1),
        "peak_rss_mb_with_baselines": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    for key, value in figures.items():
        print(f"{key:>28}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
