"""VERA speed: rows per second for evaluate and enhance, as ratios of the raw model forward pass.

    .venv/bin/python -m benchmarks.bench_vera --rows 8

Rows: the first ``--rows`` answerable items of the ``vera-squad`` list (SQuAD 2.0 dev paragraph,
question, the reference answer as the answer). The raw forward pass is one pass of the judge model's
body over the row's own text (question, context and answer) with the LM head at the last position:
the least any model-based judge of that row must compute. Evaluate and enhance run with the judge
cache off (every judgment computed), then evaluate again on a warm cache. The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

from ragsense.data import RagRow
from ragsense.experiments import squad_items
from ragsense.models import load_model
from ragsense.rag import answer_function
from ragsense.vera import VeraEvaluation, VeraEvaluator, VeraSettings


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="judge model")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    items = [it for it in squad_items(args.data, 4 * args.rows, 0) if not it.is_impossible][: args.rows]
    rows = [
        RagRow(id=it.id, question=it.question, contexts=[it.context], answer=it.answers[0]) for it in items
    ]
    n = len(rows)

    def raw() -> None:
        for row in rows:
            text = f"{row.question}\n{row.contexts[0]}\n{row.answer}"
            ids = torch.tensor([model.tokenizer(text)["input_ids"]])
            with torch.inference_mode():
                states, _ = model.forward_hidden(ids)
                model.lm_head(states[0, -1:])

    raw()  # warm-up
    raw_s = _timed(raw)[0] / n
    print(f"raw forward pass over the row: {raw_s:.3f} s/row (= 1.00)")
    figures: dict[str, Any] = {"rows": n, "model": args.model, "raw_s_per_row": round(raw_s, 4)}

    vera = VeraEvaluator(model, VeraSettings(cache=False))
    seconds, evaluated = _timed(lambda: vera.evaluate_sync(rows))
    ok = [r for r in evaluated if isinstance(r, VeraEvaluation)]
    items_per_row = sum(1 + len(r.context.decisions) + 2 * len(r.relevance.decisions) for r in ok) / max(
        1, len(ok)
    )
    figures["judgments_per_row"] = round(items_per_row, 1)
    figures["evaluate"] = _report("evaluate (no cache)", seconds, n, raw_s)
    figures["s_per_judgment"] = round(seconds / n / items_per_row, 4)
    print(f"  {items_per_row:.1f} judgments per row, {figures['s_per_judgment']:.3f} s per judgment")

    seconds = _timed(lambda: vera.enhance_sync(rows))[0]
    figures["enhance"] = _report("enhance (no cache, edits the given answer)", seconds, n, raw_s)

    generate = answer_function(model)  # the judge model answers too, as `vera enhance --generator`
    seconds = _timed(lambda: vera.enhance_sync(rows, generate))[0]
    figures["enhance_regenerate"] = _report("enhance (no cache, regenerates from C')", seconds, n, raw_s)

    # Label scoring through score_choices (one prompt pass, cached shared prefix) against the
    # fallback that scores every label as its own ScoreRequest, on the rows' context sentences.
    class ScoreOnly:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.info = inner.info

        def count_tokens(self, text: str) -> int:
            return int(self.inner.count_tokens(text))

        async def aclose(self) -> None:
            return None

        async def score(self, requests: Any) -> Any:
            return await self.inner.score(requests)

    from ragsense.text import split_sentences
    from ragsense.vera import CONTEXT_RELEVANCE, ContextSentenceInput, LabelJudge

    sentence_items = [
        ContextSentenceInput(question=r.question, sentence=s.text)
        for r in rows
        for s in split_sentences(r.contexts[0])
    ]
    fast = _timed(lambda: asyncio.run(LabelJudge(model).judge(CONTEXT_RELEVANCE, sentence_items)))[0]
    slow = _timed(lambda: asyncio.run(LabelJudge(ScoreOnly(model)).judge(CONTEXT_RELEVANCE, sentence_items)))[
        0
    ]
    per = len(sentence_items)
    print(
        f"label scoring, {per} sentence judgments: score_choices {fast / per:.3f} s each, "
        f"one request per label {slow / per:.3f} s each ({slow / fast:.1f}x)"
    )
    figures["label_scoring"] = {
        "judgments": per,
        "score_choices_s": round(fast / per, 4),
        "per_label_requests_s": round(slow / per, 4),
        "speedup": round(slow / fast, 2),
    }

    with tempfile.TemporaryDirectory() as tmp:
        cached = VeraEvaluator(model, VeraSettings(cache_dir=tmp))
        cached.evaluate_sync(rows)
        again = VeraEvaluator(model, VeraSettings(cache_dir=tmp))
        seconds = _timed(lambda: again.evaluate_sync(rows))[0]
    figures["evaluate_cached"] = _report("evaluate (warm judge cache)", seconds, n, raw_s)
    print(json.dumps(figures, sort_keys=True))


def _report(label: str, seconds: float, n: int, raw_s: float) -> dict[str, float]:
    per_row = seconds / n
    print(f"{label:<45} {per_row:7.3f} s/row  {n / seconds:7.2f} rows/s  {per_row / raw_s:7.1f}x raw")
    return {
        "s_per_row": round(per_row, 4),
        "rows_per_s": round(n / seconds, 3),
        "x_raw": round(per_row / raw_s, 1),
    }


if __name__ == "__main__":
    main()
