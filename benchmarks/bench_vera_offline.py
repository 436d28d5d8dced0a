"""VERA evaluate with its default (offline) signals against one ConSens pass over the same rows.

    python -m benchmarks.bench_vera_offline --rows 16 --threads 1

Rows: the first ``--rows`` answerable items of the ``vera-squad`` list (SQuAD 2.0 dev paragraph,
question, and as the answer the reference answer in a sentence: "The answer is X."). Both runs go
through ``ragsense.evaluate`` with the bundled SmolLM2-135M, each on its own fresh model pool (so
neither reuses the other's no-context passes), after a one-row warm-up that loads the models. VERA
runs with its judge cache off and its defaults: offline steps 1-3 (MiniLM, BM25, the likelihood lift of
the question per statement) and ConSens per statement for step 4. Printed: seconds per row of each
and the ratio VERA / ConSens measured in the same run (the issue's target: at most 3). The last line is
JSON.
"""

from __future__ import annotations

import argparse
import json
import time

from ragsense import evaluate
from ragsense.consens import ConSens
from ragsense.data import RagRow
from ragsense.experiments import squad_items
from ragsense.models import ModelPool
from ragsense.vera import Vera


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    items = [it for it in squad_items(args.data, 4 * args.rows + 4, 0) if not it.is_impossible]
    rows = [
        RagRow(
            id=it.id, question=it.question, contexts=[it.context], answer=f"The answer is {it.answers[0]}."
        )
        for it in items[: args.rows + 1]
    ]
    warm, timed = rows[:1], rows[1:]

    def run(metric_factory: object, label: str) -> float:
        pool = ModelPool()
        evaluate(warm, [metric_factory()], pool=pool, progress=False, store=False)  # type: ignore[operator]
        started = time.perf_counter()
        result = evaluate(timed, [metric_factory()], pool=pool, progress=False, store=False)  # type: ignore[operator]
        seconds = time.perf_counter() - started
        errors = sum(bool(r.get("errors")) for r in result.rows)
        print(f"{label}: {seconds / len(timed):.3f} s/row ({errors} rows with errors)")
        return seconds

    consens = run(lambda: ConSens(model=args.model), "one ConSens pass")
    vera = run(lambda: Vera(judge=args.model, cache=False), "VERA evaluate, default signals")
    ratio = vera / consens
    print(f"VERA / ConSens: {ratio:.2f} (target <= 3)")
    print(
        json.dumps(
            {
                "rows": len(timed),
                "threads": args.threads,
                "consens_s_per_row": round(consens / len(timed), 4),
                "vera_s_per_row": round(vera / len(timed), 4),
                "ratio": round(ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
