"""Correctness features: seconds per sample for each perturbation mode, as ratios of the raw forward pass.

    .venv/bin/python -m benchmarks.bench_correctness --items 8

Samples: the first ``--items`` training samples of the ``correctness-squad`` split. For each mode the
perturbation model (PM) perturbs every context (no cache) and the script prints seconds per sample,
the ratio to the raw forward pass (the PM body and full-vocabulary head over the context, once: what
any entropy ranking must compute), and the ratio of iterative to single shot at the same K. The full
feature extraction (perturbation plus the base model's three greedy conditions) is timed for the
default mode. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Literal

from ragsense.correctness import FeatureExtractor, PerturbationSettings, Perturber
from ragsense.experiments import squad_split
from ragsense.models import load_model


def _time(fn: Any, items: list[Any]) -> float:
    started = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - started) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="base model")
    parser.add_argument("--pm", default=None, help="perturbation model (default: the base model)")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=None)
    parser.add_argument(
        "--default-only",
        action="store_true",
        help="time only the default iterative mode against single shot (left fill, entropy), "
        "alternating them --repeats times, and count the PM's body calls and tokens",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rescore-window", type=int, default=16, help="with --default-only: the window")
    parser.add_argument(
        "--no-catch-up", dest="catch_up", action="store_false", help="with --default-only: catch_up=False"
    )
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    base = load_model(args.model)
    pm = load_model(args.pm) if args.pm else base
    train, _ = squad_split(args.data, None, 0)
    contexts = [s.context for s in train[: args.items]]

    local: Any = pm  # a local transformers model: its tokenizer, body and head

    def raw(context: str) -> None:
        ids = torch.tensor([local.tokenizer(context)["input_ids"]])
        with torch.inference_mode():
            states, _ = local.forward_hidden(ids)
            local.lm_head(states[0])

    raw(contexts[0])  # warm-up
    raw_s = _time(raw, contexts)
    print(f"raw PM forward + head over the context: {raw_s:.3f} s/sample (= 1.00)")
    if args.default_only:
        _default_only(local, contexts, raw, raw_s, args)
        return
    modes: dict[str, float] = {}
    for fill in ("left", "infill"):
        for where in ("entropy", "random"):
            hows: tuple[tuple[Literal["single_shot", "iterative"], int | None], ...] = (
                ("single_shot", 16),
                ("iterative", 16),
                ("iterative", None),
            )
            for how, window in hows:
                if how == "iterative" and window is None and where == "random":
                    continue  # random picks re-score nothing: the window does not apply
                settings = PerturbationSettings(
                    k=args.k, where=where, how=how, fill=fill, rescore_window=window
                )
                perturber = Perturber(pm, settings)
                label = settings.label + (
                    "" if how == "single_shot" or where == "random" else f" window={window}"
                )
                modes[label] = seconds = _time(perturber.perturb, contexts)
                print(f"{label:<40} {seconds:7.3f} s/sample  {seconds / raw_s:6.2f}x raw")
    ratios = {}
    for fill in ("left", "infill"):
        for where in ("EN", "RD"):
            it = modes[f"IT-{where} k={args.k} fill={fill}" + (" window=16" if where == "EN" else "")]
            ss = modes[f"SS-{where} k={args.k} fill={fill}"]
            ratios[f"IT/SS {where} {fill}"] = round(it / ss, 2)
            print(f"iterative / single shot, {where}, fill={fill}: {it / ss:.2f}x")
    extractor = FeatureExtractor(base, pm, settings=PerturbationSettings(k=args.k))
    full = _time(lambda s: extractor.extract(s), train[: args.items])
    print(f"full features, default mode (PM + 3 BM conditions): {full:.3f} s/sample  {full / raw_s:.2f}x raw")
    print(
        json.dumps(
            {
                "raw_seconds": round(raw_s, 4),
                "modes_seconds": {k: round(v, 4) for k, v in modes.items()},
                "ratios": ratios,
                "full_default_seconds": round(full, 4),
                "items": args.items,
                "base_model": base.info.name,
                "perturbation_model": pm.info.name,
            }
        )
    )


def _default_only(local: Any, contexts: list[str], raw: Any, raw_s: float, args: Any) -> None:
    """The default iterative mode against single shot, alternated so that both see the same machine."""
    import statistics

    calls = {"n": 0, "tokens": 0}
    forward = local.forward_hidden

    def counted(ids: Any, *rest: Any, **kw: Any) -> Any:
        calls["n"] += 1
        calls["tokens"] += int(ids.numel())
        return forward(ids, *rest, **kw)

    context_tokens = sum(len(local.tokenizer(c)["input_ids"]) for c in contexts)
    times: dict[str, list[float]] = {"single_shot": [], "iterative": [], "raw": []}
    work: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):
        times["raw"].append(_time(raw, contexts))
        for how in ("single_shot", "iterative"):
            settings = PerturbationSettings(
                k=args.k, how=how, rescore_window=args.rescore_window, catch_up=args.catch_up
            )
            perturber = Perturber(local, settings)
            calls.update(n=0, tokens=0)
            local.forward_hidden = counted
            try:
                times[how].append(_time(perturber.perturb, contexts))
            finally:
                local.forward_hidden = forward
            work[how] = (calls["n"] / len(contexts), calls["tokens"] / context_tokens)
    medians = {how: statistics.median(v) for how, v in times.items()}
    for how in ("single_shot", "iterative"):
        n_calls, token_ratio = work[how]
        print(
            f"{how:<12} {medians[how]:.3f} s/sample (median of {args.repeats})  "
            f"{medians[how] / medians['raw']:.2f}x raw  {n_calls:.1f} body calls/sample  "
            f"body tokens {token_ratio:.2f}x the context"
        )
    ratio = medians["iterative"] / medians["single_shot"]
    catch = "" if args.catch_up else ", no catch-up"
    print(
        f"iterative / single shot (K = {args.k}, entropy, left fill, window {args.rescore_window}{catch}): "
        f"{ratio:.2f}x"
    )
    print(
        json.dumps(
            {
                "raw_seconds": round(medians["raw"], 4),
                "seconds": {how: round(medians[how], 4) for how in ("single_shot", "iterative")},
                "runs_seconds": {how: [round(t, 4) for t in v] for how, v in times.items()},
                "body_calls_per_sample": {how: round(w[0], 2) for how, w in work.items()},
                "body_tokens_per_context_token": {how: round(w[1], 3) for how, w in work.items()},
                "iterative_over_single_shot": round(ratio, 3),
                "items": len(contexts),
                "k": args.k,
                "rescore_window": args.rescore_window,
                "catch_up": args.catch_up,
                "model": local.info.name,
                "threads": args.threads,
            }
        )
    )


if __name__ == "__main__":
    main()
