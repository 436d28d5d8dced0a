"""The correctness paper's ablation tables (Zhang et al., Tables 2-9) with the bundled models.

    .venv/bin/python benchmarks/correctness_tables.py --n 100            # compute (resumable)
    .venv/bin/python benchmarks/correctness_tables.py --n 100 --tables   # print the markdown tables

Samples: the first ``--n`` samples of the training part of the ``correctness-squad`` split (seed 0).
Each configuration's features are extracted (the Baseline and Normal conditions come from the shared
feature cache, so only the perturbation and the Perturbed condition are computed per configuration),
then every sample is predicted by a 2,100-tree forest fitted on the other folds (5-fold cross-
validation), and the paper's metrics are computed over all ``n`` out-of-fold predictions. With small
``n`` this is steadier than one 70/30 split. One JSON line per (configuration, metric) is appended to
``--out``; configurations already there are skipped, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ragsense.cache import cache_dir
from ragsense.correctness import (
    DEFAULT_AGGREGATES,
    DEFAULT_THRESHOLDS,
    CorrectnessEstimator,
    FeatureExtractor,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
    evaluate_estimates,
)
from ragsense.experiments._correctness import squad_split
from ragsense.models import load_model

DEFAULT = PerturbationSettings()
# (name, PM, settings): cheap and central ones first, so a cut-short run still fills the main tables.
CONFIGS: list[tuple[str, str, PerturbationSettings]] = [
    ("default", "same", DEFAULT),
    ("k5", "same", PerturbationSettings(k=5)),
    ("ss-en", "same", PerturbationSettings(how="single_shot")),
    ("ss-rd", "same", PerturbationSettings(how="single_shot", where="random")),
    ("it-rd", "same", PerturbationSettings(where="random")),
    ("gemma-ss-en", "gemma3-270m", PerturbationSettings(how="single_shot")),
    ("k25", "same", PerturbationSettings(k=25)),
    ("infill", "same", PerturbationSettings(fill="infill")),
    ("gemma-it-en", "gemma3-270m", DEFAULT),
    ("k10", "same", PerturbationSettings(k=10)),
    ("k20", "same", PerturbationSettings(k=20)),
    ("gemma-ss-rd", "gemma3-270m", PerturbationSettings(how="single_shot", where="random")),
    ("gemma-it-rd", "gemma3-270m", PerturbationSettings(where="random")),
]


def cross_validated(
    features: list[SampleFeatures],
    targets: list[float],
    *,
    metric: str,
    aggregates: tuple[str, ...],
    folds: int = 5,
) -> list[float]:
    """Out-of-fold predictions: sample i is predicted by a forest that never saw it."""
    predictions = [0.0] * len(features)
    for fold in range(folds):
        test = [i for i in range(len(features)) if i % folds == fold]
        train = [i for i in range(len(features)) if i % folds != fold]
        est = CorrectnessEstimator(aggregates=aggregates, target_metric=metric)  # type: ignore[arg-type]
        est.fit([features[i] for i in train], [targets[i] for i in train])
        for i, p in zip(test, est.predict([features[i] for i in test]).tolist(), strict=True):
            predictions[i] = p
    return predictions


def compute(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(x)["config"] for x in out.read_text().splitlines()} if out.exists() else set()
    base = load_model("smollm2-135m")
    models: dict[str, Any] = {"same": base}
    train, _ = squad_split(args.data, None, 0)
    samples = train[: args.n]
    wanted = args.configs.split(",") if args.configs else [c[0] for c in CONFIGS]
    for name, pm_name, settings in CONFIGS:
        if name not in wanted or name in done:
            continue
        if pm_name not in models:
            models[pm_name] = load_model(pm_name)
        started = time.perf_counter()
        extractor = FeatureExtractor(
            base, models[pm_name], settings=settings, cache_dir=cache_dir() / "correctness"
        )
        results = extractor.extract_many(samples, progress=True)
        extractor.close()
        seconds = time.perf_counter() - started
        keep = [(f, s) for f, s in zip(results, samples, strict=True) if isinstance(f, SampleFeatures)]
        features = [f for f, _ in keep]
        metrics = ["cosine", "rouge_f1", "rouge_precision"] if name == "default" else ["cosine"]
        aggregate_sets: list[tuple[str, ...]] = (
            [("mean",), DEFAULT_AGGREGATES] if name == "default" else [DEFAULT_AGGREGATES]
        )
        with out.open("a", encoding="utf-8") as handle:
            for metric in metrics:
                targets = correctness_targets(
                    [f.answer for f in features], [s.references for _, s in keep], metric
                )  # type: ignore[arg-type]
                for aggregates in aggregate_sets:
                    predicted = cross_validated(features, targets, metric=metric, aggregates=aggregates)
                    figures = evaluate_estimates(predicted, targets, DEFAULT_THRESHOLDS[metric])
                    record = {
                        "config": name,
                        "pm": models[pm_name].info.name,
                        "perturbation": settings.label,
                        "metric": metric,
                        "aggregates": list(aggregates),
                        "errors": len(samples) - len(features),
                        "seconds_per_sample": round(seconds / len(samples), 3),
                        **figures,
                    }
                    handle.write(json.dumps(record) + "\n")
                    handle.flush()
                    print(json.dumps(record), flush=True)


def tables(args: argparse.Namespace) -> None:
    rows = [json.loads(x) for x in Path(args.out).read_text().splitlines()]
    main = list(DEFAULT_AGGREGATES)
    cos = {r["config"]: r for r in rows if r["metric"] == "cosine" and r["aggregates"] == main}

    def line(label: str, r: dict[str, Any] | None, paper: str) -> str:
        if r is None:
            return f"| {label} | not run | | | | {paper} |"
        auroc = "n/a" if r["auroc"] is None else f"{r['auroc']:.3f}"
        return f"| {label} | {r['accuracy']:.3f} | {r['f1']:.3f} | {auroc} | {r['mse']:.4f} | {paper} |"

    head = (
        "| setting | Acc | F1 | AUROC | MSE | paper (Llama3-8b): Acc / F1 / AUROC |\n"
        "|---|---|---|---|---|---|"
    )
    print("Number of perturbations (IT-EN, PM = BM):\n" + head)
    paper_k = {
        5: "0.710 / 0.791 / 0.735",
        10: "0.697 / 0.737 / 0.773",
        15: "0.712 / 0.753 / 0.773",
        20: "0.709 / 0.748 / 0.765",
        25: "0.679 / 0.769 / 0.698",
    }
    for k in (5, 10, 15, 20, 25):
        print(line(f"K={k}", cos.get("default" if k == 15 else f"k{k}"), paper_k[k]))
    print("\nSingle shot vs iterative, entropy vs random (K=15, PM = BM):\n" + head)
    for label, key, paper in (
        ("SS-EN", "ss-en", "0.740 / 0.782 / 0.797"),
        ("IT-EN", "default", "0.718 / 0.754 / 0.785"),
        ("SS-RD", "ss-rd", "0.731 / 0.779 / 0.789"),
        ("IT-RD", "it-rd", "0.729 / 0.762 / 0.806"),
    ):
        print(line(label, cos.get(key), paper))
    print("\nPerturbation model (K=15): same (SmolLM2) vs other family (Gemma 3):\n" + head)
    for label, key, paper in (
        ("IT-EN, PM SmolLM2 (same)", "default", "Llama3-8b itself: 0.718 / 0.754 / 0.785"),
        ("IT-EN, PM Gemma-3-270M", "gemma-it-en", "T5-3b: 0.726 / 0.801 / 0.736"),
        ("SS-EN, PM SmolLM2 (same)", "ss-en", "Llama3-8b itself: 0.740 / 0.782 / 0.797"),
        ("SS-EN, PM Gemma-3-270M", "gemma-ss-en", "T5-3b: 0.715 / 0.751 / 0.779"),
        ("IT-RD, PM Gemma-3-270M", "gemma-it-rd", "T5-3b: 0.737 / 0.773 / 0.807"),
        ("SS-RD, PM Gemma-3-270M", "gemma-ss-rd", "T5-3b: 0.724 / 0.759 / 0.800"),
    ):
        print(line(label, cos.get(key), paper))
    print("\nFill (IT-EN, K=15):\n" + head)
    print(line("left context", cos.get("default"), "-"))
    print(line("infill (left + 4 right tokens, 4 candidates)", cos.get("infill"), "-"))
    print("\nTarget correctness metric (default setting):\n" + head)
    by_metric = {r["metric"]: r for r in rows if r["config"] == "default" and r["aggregates"] == main}
    for metric, paper in (
        ("cosine", "0.710 / 0.791 / 0.735 (MSE 0.004)"),
        ("rouge_f1", "0.778 / 0.715 / 0.719 (MSE 0.016)"),
        ("rouge_precision", "0.621 / 0.574 / 0.640 (MSE 0.008)"),
    ):
        print(line(f"{metric} (t={DEFAULT_THRESHOLDS[metric]})", by_metric.get(metric), paper))
    print("\nNLL summary per place (default setting, cosine):\n" + head)
    for r in rows:
        if r["config"] == "default" and r["metric"] == "cosine":
            print(line("+".join(r["aggregates"]), r, "mean (the paper's)"))
    print("\nSeconds per sample (perturbation + Perturbed condition; Baseline/Normal cached):")
    for r in rows:
        if r["metric"] == "cosine" and r["aggregates"] == main:
            setting = f"{r['pm']}, {r['perturbation']}, n={r['n']}, errors {r['errors']}"
            print(f"- {r['config']}: {r['seconds_per_sample']} s ({setting})")


def forest_check(args: argparse.Namespace) -> None:
    """Random-forest settings on the same cross-validation (default features, 300 trees for speed)."""
    from sklearn.ensemble import RandomForestRegressor

    base = load_model("smollm2-135m")
    train, _ = squad_split(args.data, None, 0)
    samples = train[: args.n]
    extractor = FeatureExtractor(base, settings=DEFAULT, cache_dir=cache_dir() / "correctness")
    features = [f for f in extractor.extract_many(samples) if isinstance(f, SampleFeatures)]
    targets = correctness_targets([f.answer for f in features], [s.references for s in samples], "cosine")
    for aggregates in (("mean",), DEFAULT_AGGREGATES):
        x = [f.vector(aggregates) for f in features]
        for leaf in (1, 5, 10, 20):
            for max_features in (1.0, 0.33):
                predicted = [0.0] * len(x)
                for fold in range(5):
                    test = [i for i in range(len(x)) if i % 5 == fold]
                    fit = [i for i in range(len(x)) if i % 5 != fold]
                    forest = RandomForestRegressor(
                        n_estimators=300,
                        random_state=0,
                        n_jobs=2,
                        min_samples_leaf=leaf,
                        max_features=max_features,
                    ).fit([x[i] for i in fit], [targets[i] for i in fit])
                    for i, v in zip(test, forest.predict([x[i] for i in test]).tolist(), strict=True):
                        predicted[i] = v
                result = evaluate_estimates(predicted, targets, DEFAULT_THRESHOLDS["cosine"])
                print(
                    f"{'+'.join(aggregates):9} min_leaf={leaf:<3} max_features={max_features:<5} "
                    f"AUROC {result['auroc']}  MSE {result['mse']}"
                )


def split_details(args: argparse.Namespace) -> None:
    """The default setting on the ``--limit 300`` split: the threshold sweep of the evaluation estimates,
    single-feature AUROCs over all 300 samples, and how often the answer changes between conditions."""
    import tempfile

    from ragsense.experiments._correctness import correctness_squad
    from ragsense.stats import roc_auc

    with tempfile.TemporaryDirectory() as tmp:
        correctness_squad(limit=300, out=tmp, cache=str(cache_dir() / "correctness"))
        rows = [json.loads(x) for x in (Path(tmp) / "eval.jsonl").read_text().splitlines()]
    estimates, targets = [r["estimate"] for r in rows], [r["target"] for r in rows]
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        print("threshold", json.dumps(evaluate_estimates(estimates, targets, t)))
    base = load_model("smollm2-135m")
    train, evaluation = squad_split(args.data, 300, 0)
    samples = train + evaluation
    extractor = FeatureExtractor(base, settings=DEFAULT, cache_dir=cache_dir() / "correctness")
    features = [f for f in extractor.extract_many(samples) if isinstance(f, SampleFeatures)]
    y = correctness_targets([f.answer for f in features], [s.references for s in samples], "cosine")
    label = [v >= DEFAULT_THRESHOLDS["cosine"] for v in y]
    names = CorrectnessEstimator().feature_names
    vectors = [f.vector(DEFAULT_AGGREGATES) for f in features]
    ranked = []
    for j, name in enumerate(names):
        pos = [-v[j] for v, lab in zip(vectors, label, strict=True) if lab]
        neg = [-v[j] for v, lab in zip(vectors, label, strict=True) if not lab]
        ranked.append((roc_auc(pos, neg), name))
    for auroc, name in sorted(ranked, reverse=True)[:6]:
        print(f"single feature {name}: AUROC {auroc:.3f} (lower NLL ranks higher; n={len(y)})")
    same_perturbed = sum(f.perturbed.answer == f.normal.answer for f in features)
    same_baseline = sum(f.baseline.answer == f.normal.answer for f in features)
    print(
        f"answers equal to the Normal one: perturbed {same_perturbed}, baseline {same_baseline} of {len(y)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="training-part samples used")
    parser.add_argument("--data", default=None)
    parser.add_argument("--configs", help="comma-separated subset of configuration names")
    parser.add_argument("--out", default="docs/results/correctness/ablation.jsonl")
    parser.add_argument("--tables", action="store_true", help="print the tables from --out and exit")
    parser.add_argument("--forest-check", action="store_true", help="compare random-forest settings and exit")
    parser.add_argument(
        "--split-details", action="store_true", help="threshold sweep and single features, limit 300"
    )
    args = parser.parse_args()
    if args.split_details:
        split_details(args)
    elif args.forest_check:
        forest_check(args)
    elif args.tables:
        tables(args)
    else:
        compute(args)


if __name__ == "__main__":
    main()
