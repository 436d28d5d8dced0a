"""The correctness paper's ablation tables (Zhang et al., Tables 2-9) with the bundled models, and the
markdown of the ``correctness-squad`` evaluation-split figures.

    .venv/bin/python -m papers.correctness.correctness_tables --n 140            # compute (resumable)
    .venv/bin/python -m papers.correctness.correctness_tables --n 140 --tables   # print the ablation tables
    .venv/bin/python -m papers.correctness.correctness_tables --report runs/c13/correctness   # split figures

Samples: the first ``--n`` samples of the training part of the ``correctness-squad`` split (seed 0,
split by paragraph). Each configuration's features are extracted (the Baseline and Normal conditions
come from the shared feature cache, so only the perturbation and the Perturbed condition are computed
per configuration), then every sample is predicted by a 2,100-tree forest fitted on the other folds
(5-fold cross-validation, every paragraph whole in one fold), and the paper's metrics are computed
over all ``n`` out-of-fold predictions, beside the always-correct / always-incorrect baselines and
the AUROC of the Normal answer's NLL alone. One JSON line per (configuration, metric, features) is
appended to ``--out``; configurations already there are skipped, so an interrupted run resumes.
The default configuration also gets a row without any Perturbed-condition feature: no perturbation.

``--report DIR`` prints, from the ``figures.json`` that ``ragsense experiment correctness-squad --out
DIR`` wrote, the markdown tables quoted in docs/results.md (no model is loaded). The paper's own
figures are quoted only in the docs, never printed here.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.cache import cache_dir
from ragsense.correctness import (
    DEFAULT_AGGREGATES,
    DEFAULT_THRESHOLDS,
    DEFAULT_TREES,
    FeatureExtractor,
    Metric,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
    evaluate_estimates,
    feature_names,
)
from ragsense.experiments import (
    FOLDS,
    forest_fit_predict,
    grouped_folds,
    out_of_fold,
    paragraph_of,
    squad_split,
)
from ragsense.models import load_model
from ragsense.stats import bootstrap_ci, roc_auc

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
METRICS: tuple[Metric, ...] = ("cosine", "rouge_f1", "rouge_precision")


def cross_validated(
    features: list[SampleFeatures],
    targets: list[float],
    groups: list[str],
    *,
    aggregates: tuple[str, ...],
    without_perturbed: bool = False,
    n_trees: int = DEFAULT_TREES,
    folds: int = FOLDS,
) -> list[float]:
    """Out-of-fold predictions: sample i is predicted by a forest that saw no sample of its paragraph."""
    names = feature_names(aggregates)
    keep = [j for j, name in enumerate(names) if not (without_perturbed and name.startswith("perturbed."))]
    x = np.asarray([f.vector(aggregates) for f in features], dtype=np.float64)[:, keep]
    fold = grouped_folds(groups, folds, seed=0)
    fit_predict = forest_fit_predict(n_trees, 0)
    return [float(v) for v in out_of_fold(x, np.asarray(targets, dtype=np.float64), fold, fit_predict)]


def cv_figures(
    predicted: list[float], targets: list[float], features: list[SampleFeatures], t: float
) -> dict[str, Any]:
    """The paper's metrics of out-of-fold predictions, with the AUROC's bootstrap interval and the
    baselines beside them: always correct / always incorrect, and the Normal answer's NLL alone."""
    figures = evaluate_estimates(predicted, targets, t)
    label = np.asarray(targets) >= t
    pred = np.asarray(predicted)
    nll = -np.asarray([f.normal.nll["output"]["mean"] for f in features])
    share = float(label.mean())
    figures.update(
        auroc_ci95=None,
        output_nll_auroc=None,
        always_incorrect_accuracy=round(1 - share, 4),
        always_correct_accuracy=round(share, 4),
        always_correct_f1=round(2 * share / (1 + share), 4),
    )
    if 0 < label.sum() < label.size:
        lo, hi = bootstrap_ci(roc_auc, pred[label], pred[~label], n=2000, seed=0)
        figures["auroc_ci95"] = [round(lo, 4), round(hi, 4)]
        figures["output_nll_auroc"] = round(roc_auc(nll[label], nll[~label]), 4)
    return figures


def compute(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {r["config"] for r in map(json.loads, out.read_text().splitlines()) if "folds" in r}
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
        results = extractor.extract_many(samples)
        extractor.close()
        seconds = time.perf_counter() - started
        keep = [(f, s) for f, s in zip(results, samples, strict=True) if isinstance(f, SampleFeatures)]
        features = [f for f, _ in keep]
        groups = [paragraph_of(s) for _, s in keep]
        metrics = METRICS if name == "default" else METRICS[:1]
        # (aggregates, without the Perturbed condition): the default also gets the mean-only and the
        # no-perturbation rows.
        variants: list[tuple[tuple[str, ...], bool]] = (
            [(("mean",), False), (DEFAULT_AGGREGATES, False), (DEFAULT_AGGREGATES, True)]
            if name == "default"
            else [(DEFAULT_AGGREGATES, False)]
        )
        with out.open("a", encoding="utf-8") as handle:
            for metric in metrics:
                refs = [s.references for _, s in keep]
                targets = correctness_targets([f.answer for f in features], refs, metric)
                for aggregates, without in variants:
                    if without and metric != "cosine":
                        continue
                    predicted = cross_validated(
                        features, targets, groups, aggregates=aggregates, without_perturbed=without
                    )
                    figures = cv_figures(predicted, targets, features, DEFAULT_THRESHOLDS[metric])
                    record = {
                        "config": name,
                        "folds": f"{FOLDS}-fold, grouped by paragraph",
                        "pm": models[pm_name].info.name,
                        "perturbation": "none (Perturbed features left out)" if without else settings.label,
                        "metric": metric,
                        "aggregates": list(aggregates),
                        "without_perturbed": without,
                        "paragraphs": len(set(groups)),
                        "errors": len(samples) - len(features),
                        "seconds_per_sample": round(seconds / len(samples), 3),
                        **figures,
                    }
                    handle.write(json.dumps(record) + "\n")
                    handle.flush()
                    print(json.dumps(record), flush=True)


def _ci(value: list[float] | None) -> str:
    return "" if value is None else f" [{value[0]:.3f}, {value[1]:.3f}]"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def tables(args: argparse.Namespace) -> None:
    """The ablation tables (markdown) from ``--out``; records of the superseded question-level folds
    (no ``folds`` field) are left out."""
    every = [json.loads(x) for x in Path(args.out).read_text().splitlines()]
    rows = [r for r in every if "folds" in r]
    if len(rows) < len(every):
        print(f"({len(every) - len(rows)} records without paragraph-grouped folds left out)\n")
    main = list(DEFAULT_AGGREGATES)
    cos = {
        r["config"]: r
        for r in rows
        if r["metric"] == "cosine" and r["aggregates"] == main and not r["without_perturbed"]
    }

    def line(label: str, r: dict[str, Any] | None) -> str:
        if r is None:
            return f"| {label} | not run | | | | | |"
        return (
            f"| {label} | {r['n']} ({r['positives']}) | {_num(r['auroc'])}{_ci(r['auroc_ci95'])} | "
            f"{_num(r['output_nll_auroc'])} | {r['accuracy']:.3f} ({r['always_incorrect_accuracy']:.3f}) | "
            f"{r['f1']:.3f} ({r['always_correct_f1']:.3f}) | {r['mse']:.4f} |"
        )

    print(
        "| setting | n (positives) | AUROC [95% CI] | output-NLL AUROC | Acc (always incorrect) | "
        "F1 (always correct) | MSE |\n|---|---|---|---|---|---|---|"
    )
    print("| **Number of perturbations** (IT-EN, PM = BM) | | | | | | |")
    for k in (5, 10, 15, 20, 25):
        print(line(f"K = {k}", cos.get("default" if k == 15 else f"k{k}")))
    print("| **Single shot vs iterative, entropy vs random** (K = 15, PM = BM) | | | | | | |")
    for label, key in (("SS-EN", "ss-en"), ("IT-EN", "default"), ("SS-RD", "ss-rd"), ("IT-RD", "it-rd")):
        print(line(label, cos.get(key)))
    print("| **Perturbation model** (K = 15) | | | | | | |")
    for label, key in (
        ("IT-EN, PM = BM (SmolLM2-135M)", "default"),
        ("IT-EN, PM = Gemma-3-270M", "gemma-it-en"),
        ("SS-EN, PM = BM", "ss-en"),
        ("SS-EN, PM = Gemma-3-270M", "gemma-ss-en"),
        ("IT-RD, PM = Gemma-3-270M", "gemma-it-rd"),
        ("SS-RD, PM = Gemma-3-270M", "gemma-ss-rd"),
    ):
        print(line(label, cos.get(key)))
    print("| **Fill** (IT-EN, K = 15) | | | | | | |")
    print(line("left context", cos.get("default")))
    print(line("infill (left + 4 right tokens, 4 candidates)", cos.get("infill")))
    print("| **Target metric** (default setting) | | | | | | |")
    by_metric = {
        r["metric"]: r
        for r in rows
        if r["config"] == "default" and r["aggregates"] == main and not r["without_perturbed"]
    }
    for metric in METRICS:
        print(line(f"{metric}, t = {DEFAULT_THRESHOLDS[metric]}", by_metric.get(metric)))
    print("| **Features** (default setting, cosine) | | | | | | |")
    for r in rows:
        if r["config"] == "default" and r["metric"] == "cosine":
            what = "+".join(r["aggregates"]) + (", no Perturbed condition" if r["without_perturbed"] else "")
            print(line(what, r))
    print("\nSeconds per sample (perturbation + Perturbed condition; Baseline/Normal cached):")
    for r in rows:
        if r["metric"] == "cosine" and r["aggregates"] == main and not r["without_perturbed"]:
            setting = f"{r['pm']}, {r['perturbation']}, n={r['n']}, errors {r['errors']}"
            print(f"- {r['config']}: {r['seconds_per_sample']} s ({setting})")


def forest_check(args: argparse.Namespace) -> None:
    """Random-forest settings on the same grouped cross-validation (default features, 300 trees)."""
    from sklearn.ensemble import RandomForestRegressor

    base = load_model("smollm2-135m")
    train, _ = squad_split(args.data, None, 0)
    samples = train[: args.n]
    extractor = FeatureExtractor(base, settings=DEFAULT, cache_dir=cache_dir() / "correctness")
    results = extractor.extract_many(samples)
    extractor.close()
    keep = [(f, s) for f, s in zip(results, samples, strict=True) if isinstance(f, SampleFeatures)]
    features = [f for f, _ in keep]
    targets = correctness_targets([f.answer for f in features], [s.references for _, s in keep], "cosine")
    fold = grouped_folds([paragraph_of(s) for _, s in keep], FOLDS, seed=0)
    y = np.asarray(targets, dtype=np.float64)
    for aggregates in (("mean",), DEFAULT_AGGREGATES):
        x = np.asarray([f.vector(aggregates) for f in features], dtype=np.float64)
        for leaf in (1, 5, 10, 20):
            for max_features in (1.0, 0.33):

                def fit_predict(a: Any, b: Any, c: Any, leaf: int = leaf, mf: float = max_features) -> Any:
                    forest = RandomForestRegressor(
                        n_estimators=300, random_state=0, n_jobs=2, min_samples_leaf=leaf, max_features=mf
                    )
                    return forest.fit(a, b).predict(c)

                predicted = [float(v) for v in out_of_fold(x, y, fold, fit_predict)]
                result = evaluate_estimates(predicted, targets, DEFAULT_THRESHOLDS["cosine"])
                print(
                    f"{'+'.join(aggregates):9} min_leaf={leaf:<3} max_features={max_features:<5} "
                    f"AUROC {result['auroc']}  MSE {result['mse']}"
                )


def report(args: argparse.Namespace) -> None:
    """Markdown of the evaluation-split figures in ``DIR/figures.json`` (no model is loaded)."""
    f = json.loads((Path(args.report) / "figures.json").read_text())
    sp = f["split"]
    print(
        f"Split by paragraph: {sp['n_train']} training questions from {sp['paragraphs_train']} "
        f"paragraphs, {sp['n_eval']} evaluation questions from {sp['paragraphs_eval']} paragraphs, "
        f"{sp['paragraphs_shared']} paragraphs shared. Correct (target >= t = {f['threshold']}): "
        f"{sp['train_positives']} training, {sp['eval_positives']} evaluation "
        f"(share {sp['eval_positive_share']:.3f}{_ci(sp['eval_positive_share_ci95'])}, Wilson).\n"
    )
    forest, base = f["forest"], f["baselines"]

    def cls(c: dict[str, Any]) -> str:
        return f"{c['accuracy']:.3f}{_ci(c['accuracy_ci95'])} | {c['f1']:.3f}{_ci(c.get('f1_ci95'))}"

    print("| predictor (evaluation part) | AUROC [95% CI] | Acc [95% CI] | F1 [95% CI] | MSE |")
    print("|---|---|---|---|---|")
    print(f"| always incorrect | 0.5 | {cls(base['always_incorrect'])} | |")
    print(f"| always correct | 0.5 | {cls(base['always_correct'])} | |")
    print(f"| the training part's mean target as every estimate | 0.5 | | | {base['train_mean_mse']:.4f} |")
    if "output_nll" in f:
        o = f["output_nll"]
        print(
            f"| {o['name']} alone (lower = correct, fixed in advance) | "
            f"{_num(o['auroc'])}{_ci(o['auroc_ci95'])} | | | |"
        )
    if "best_single_feature" in f:
        b = f["best_single_feature"]
        print(
            f"| best single feature on the training part: {b['name']} (training AUROC "
            f"{b['train_auroc']:.3f}) | {_num(b['eval_auroc'])}{_ci(b['eval_auroc_ci95'])} | | | |"
        )
    if "forest_without_perturbed" in f:
        w = f["forest_without_perturbed"]
        print(
            f"| forest without the Perturbed condition ({w['n_features']} features) | "
            f"{_num(w['auroc'])}{_ci(w['auroc_ci95'])} | | | {w['mse']:.4f} |"
        )
    auroc = f"**{_num(forest['auroc'])}**{_ci(forest['auroc_ci95'])}"
    print(
        f"| forest, all {forest['n_features']} features, estimate >= t = {f['threshold']} | {auroc} | "
        f"{cls(forest['at_t'])} | {forest['mse']:.4f} |"
    )
    tt = forest["at_train_threshold"]
    print(
        f"| forest, estimate >= {tt['decision_threshold']:.3f} (picked on the training part) | {auroc} | "
        f"{cls(tt)} | {forest['mse']:.4f} |"
    )
    print("\nDeLong paired tests on the evaluation part (forest minus the other):\n")
    for key, label, field in (
        ("forest_without_perturbed", "the forest without the Perturbed condition", "forest_minus_this"),
        ("output_nll", "the output NLL alone", "forest_minus_feature"),
        ("best_single_feature", "the best training-part single feature", "forest_minus_feature"),
    ):
        d = f.get(key, {}).get(field)
        if d:
            print(
                f"- vs {label}: difference {d['difference']:+.3f} (se {d['se']:.3f}, z {d['z']:.2f}, "
                f"p = {d['p_value']:.3f})"
            )
    cv = f["train_cv"]
    print(
        f"\nTraining part, {cv['folds']}-fold cross-validation grouped by paragraph: AUROC "
        f"{_num(cv['auroc'])}{_ci(cv['auroc_ci95'])}, MSE {cv['mse']:.4f}; the decision threshold with "
        f"the highest F1 there: {cv['decision_threshold']:.3f} (F1 {cv['f1_at_decision_threshold']:.3f}).\n"
    )
    print("| forecast of P(correct), evaluation part | Brier [95% CI] | ECE (10 bins) |")
    print("|---|---|---|")
    cal = f["calibration"]
    share = cal["constant_train_share"]["p"]
    for key, label in (
        ("constant_train_share", f"the training part's share correct ({share:.3f}) for every answer"),
        ("estimate", "the forest's estimate read as P(correct)"),
        ("platt", "the estimate Platt-scaled on the training part's out-of-fold estimates"),
    ):
        if key in cal:
            c = cal[key]
            print(f"| {label} | {c['brier']:.4f}{_ci(c['brier_ci95'])} | {c['ece']:.4f} |")
    for key in ("estimate", "platt"):
        if key in cal:
            print(f"\nReliability, {key} (bin: n, mean predicted, observed [Wilson 95% CI]):")
            for b in cal[key]["reliability"]:
                print(
                    f"- [{b['lo']:.1f}, {b['hi']:.1f}): {b['n']}, {b['mean_predicted']:.3f}, "
                    f"{b['observed']:.3f}{_ci(b['observed_ci95'])}"
                )
    print("\nSingle features, chosen and signed on the training part (its top 5):\n")
    print("| feature | training AUROC | evaluation AUROC [95% CI] |\n|---|---|---|")
    for s in f["single_features"]:
        print(
            f"| {s['name']} | {s['train_auroc']:.3f} | {_num(s['eval_auroc'])}{_ci(s['eval_auroc_ci95'])} |"
        )
    a = f["answers_equal_to_normal"]
    print(
        f"\nAnswers equal to the Normal one ({a['n']} samples, both parts): Perturbed {a['perturbed']}, "
        f"Baseline {a['baseline']}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=140, help="training-part samples used")
    parser.add_argument("--data", default=None)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--configs", help="comma-separated subset of configuration names")
    parser.add_argument("--out", default="docs/results/correctness/ablation.jsonl")
    parser.add_argument("--tables", action="store_true", help="print the tables from --out and exit")
    parser.add_argument("--forest-check", action="store_true", help="compare random-forest settings and exit")
    parser.add_argument("--report", metavar="DIR", help="print the figures of DIR/figures.json and exit")
    args = parser.parse_args()
    if args.report:
        report(args)
    elif args.forest_check:
        forest_check(args)
    elif args.tables:
        tables(args)
    else:
        compute(args)


if __name__ == "__main__":
    main()
