"""Correctness features: seconds per sample for each perturbation mode, as ratios of the raw forward pass.

    .venv/bin/python benchmarks/bench_correctness.py --items 8

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
import sys
import time
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ragsense.correctness import FeatureExtractor, PerturbationSettings, Perturber
from ragsense.experiments._correctness import squad_split
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


if __name__ == "__main__":
    main()
