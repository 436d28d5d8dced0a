"""What the evaluation spine costs: ConSens through ``evaluate`` against the raw forward pass, and one
``ragsense evaluate --metrics consens,vera`` against the two commands it replaces.

    .venv/bin/python -m benchmarks.bench_evaluate --items 10

Part 1 (in process): WikiEval items, each grounded and ungrounded answer scored against ``context_v1``.
The "limit" is the model body run over exactly the unique token sequences ConSens scores (as in
bench_consens.py); the ratio is limit time / ``evaluate(rows, [ConSens(model)])`` time (1.0: the spine
and ConSens cost nothing beyond the forward pass).

Part 2 (fresh processes, as a user runs them): ``ragsense grounding`` then ``ragsense vera evaluate``
on the same rows, against one ``ragsense evaluate --metrics consens,vera``. Wall seconds include
Python start-up and model loading (once per process: twice for the pair, once for the combined run);
the judge cache is off so every judgment is computed. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_consens import _raw_forward, _rows, _unique_requests
from ragsense import evaluate
from ragsense.consens import ConSens, GroundingScorer
from ragsense.models import ModelPool, load_model


def _in_process(model_name: str, data: str | None, items: int, threads: int | None) -> dict[str, Any]:
    options: dict[str, Any] = {} if threads is None else {"threads": threads}
    model = load_model(model_name, **options)
    rows = _rows(data, items)
    requests = _unique_requests(GroundingScorer(model), rows)
    model.score_sync(requests[:2])  # warm-up outside the timings
    dicts = [{"id": str(i), "question": q, "contexts": c, "answer": a} for i, (q, c, a) in enumerate(rows)]
    started = time.perf_counter()
    run = evaluate(dicts, [ConSens(model=model)], pool=ModelPool(), progress=False)
    evaluate_s = time.perf_counter() - started
    assert not run.has_errors, "a benchmark row failed"
    body_s, tokens = _raw_forward(model, requests, with_full_logits=False)
    return {
        "rows": len(rows),
        "tokens": tokens,
        "raw_body_s": round(body_s, 3),
        "evaluate_consens_s": round(evaluate_s, 3),
        "ratio_vs_raw_body": round(body_s / evaluate_s, 3),
    }


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _processes(model_name: str, data: str | None, items: int, threads: int | None) -> dict[str, Any]:
    rows = _rows(data, items)[::2]  # the grounded answers
    ragsense = [sys.executable, "-m", "ragsense"]
    common = ["--model", model_name, "--table", "never"] + (
        [] if threads is None else ["--threads", str(threads)]
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "rows.jsonl"
        src.write_text(
            "".join(
                json.dumps({"id": str(i), "question": q, "contexts": c, "answer": a}) + "\n"
                for i, (q, c, a) in enumerate(rows)
            )
        )
        grounding_s = _timed([*ragsense, "grounding", str(src), "-o", f"{tmp}/g.jsonl", *common], env)
        vera_s = _timed(
            [*ragsense, "vera", "evaluate", str(src), "-o", f"{tmp}/v.jsonl", "--no-cache", *common], env
        )
        both_s = _timed(
            [
                *ragsense,
                "evaluate",
                str(src),
                "-o",
                f"{tmp}/e.jsonl",
                "--metrics",
                "consens,vera",
                "--no-judge-cache",
                *common,
            ],
            env,
        )
        combined = [json.loads(line) for line in Path(f"{tmp}/e.jsonl").read_text().splitlines()]
        separate_g = [json.loads(line) for line in Path(f"{tmp}/g.jsonl").read_text().splitlines()]
        separate_v = [json.loads(line) for line in Path(f"{tmp}/v.jsonl").read_text().splitlines()]
    same = all(
        c["consens"] == g["consens"] and c["response_adherence"] == v["response_adherence"]
        for c, g, v in zip(combined, separate_g, separate_v, strict=True)
    )
    return {
        "rows": len(rows),
        "grounding_then_vera_s": round(grounding_s + vera_s, 2),
        "grounding_s": round(grounding_s, 2),
        "vera_evaluate_s": round(vera_s, 2),
        "evaluate_consens_vera_s": round(both_s, 2),
        "ratio_combined_vs_separate": round(both_s / (grounding_s + vera_s), 3),
        "model_loads_separate": 2,
        "model_loads_combined": 1,
        "same_scores": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=10, help="WikiEval items")
    parser.add_argument("--data", default=None)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    part1 = _in_process(args.model, args.data, args.items, args.threads)
    print(
        f"ConSens via evaluate: {part1['rows']} rows in {part1['evaluate_consens_s']} s; raw body "
        f"{part1['raw_body_s']} s; ratio {part1['ratio_vs_raw_body']}",
        file=sys.stderr,
    )
    part2 = _processes(args.model, args.data, args.items, args.threads)
    print(
        f"grounding + vera evaluate: {part2['grounding_then_vera_s']} s; evaluate consens,vera: "
        f"{part2['evaluate_consens_vera_s']} s; ratio {part2['ratio_combined_vs_separate']}; "
        f"same scores: {part2['same_scores']}",
        file=sys.stderr,
    )
    print(json.dumps({"model": args.model, "consens_via_evaluate": part1, "consens_and_vera": part2}))


if __name__ == "__main__":
    main()
