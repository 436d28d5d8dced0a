"""The correctness paper's experiment on SQuAD 2.0 (Zhang et al., Section 4): a seeded split of
answerable questions into 2,100 training and 900 evaluation samples, features from the base model
under the three conditions, a random forest, and the paper's metrics on the evaluation split.

Only the dev split of SQuAD 2.0 is shipped in ../shared/data, so both parts come from it: the
answerable questions are shuffled with ``seed`` and the first 3,000 are split 2,100 / 900. ``limit``
keeps the same proportions (70 / 30) from the front of each part, so smaller runs are nested in
larger ones and reuse their cached features.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ragsense._async import run_sync
from ragsense.cache import cache_dir
from ragsense.correctness import (
    DEFAULT_AGGREGATES,
    CorrectnessEstimator,
    CorrectnessSample,
    FeatureExtractor,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
)
from ragsense.correctness._targets import Metric
from ragsense.data import load_squad_v2
from ragsense.models import LanguageModel, load_model
from ragsense.stats import bootstrap_ci

N_TRAIN, N_EVAL = 2100, 900


def squad_split(
    data: str | None, limit: int | None, seed: int
) -> tuple[list[CorrectnessSample], list[CorrectnessSample]]:
    """The seeded train / evaluation samples (answerable questions only)."""
    items = [item for item in load_squad_v2(data) if not item.is_impossible and item.answers]
    random.Random(seed).shuffle(items)
    samples = [CorrectnessSample(it.question, it.context, tuple(it.answers), it.id) for it in items]
    train, evaluation = samples[:N_TRAIN], samples[N_TRAIN : N_TRAIN + N_EVAL]
    if limit is not None:
        if limit < 10:
            raise ValueError(
                f"--limit must be at least 10 (7 training and 3 evaluation samples), got {limit}"
            )
        n_train = round(limit * N_TRAIN / (N_TRAIN + N_EVAL))
        train, evaluation = train[:n_train], evaluation[: limit - n_train]
    return train, evaluation


# Samples per batched model call: each chunk's features are cached before the next starts, so a killed
# run resumes from its last finished chunk.
FEATURE_CHUNK = 32

Part = tuple[list[SampleFeatures], list[CorrectnessSample], list[str]]


async def _features(extractor: FeatureExtractor, parts: dict[str, list[CorrectnessSample]]) -> list[Part]:
    """Features of each part, in chunks of :data:`FEATURE_CHUNK` samples: kept features, their samples,
    and one note per failed sample (bad fields or a failed model call)."""
    out: list[Part] = []
    show = sys.stderr.isatty()
    with tqdm(total=sum(map(len, parts.values())), desc="features", unit="sample", disable=not show) as bar:
        for part, samples in parts.items():
            kept_features: list[SampleFeatures] = []
            kept_samples: list[CorrectnessSample] = []
            errors: list[str] = []
            for start in range(0, len(samples), FEATURE_CHUNK):
                chunk = samples[start : start + FEATURE_CHUNK]
                for sample, result in zip(chunk, await extractor.aextract_many(chunk), strict=True):
                    if isinstance(result, Exception):
                        errors.append(f"{part} {sample.id}: {result}")
                    else:
                        kept_features.append(result)
                        kept_samples.append(sample)
                bar.update(len(chunk))
            out.append((kept_features, kept_samples, errors))
    return out


def correctness_squad(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    *,
    perturbation_model: LanguageModel | str | None = None,
    settings: PerturbationSettings | None = None,
    metric: Metric = "cosine",
    threshold: float | None = None,
    n_trees: int = 2100,
    aggregates: tuple[str, ...] = DEFAULT_AGGREGATES,
    cache: str | None = None,
) -> dict[str, Any]:
    """Train on the training part, evaluate on the evaluation part; returns the figures."""
    started = time.perf_counter()
    base = model or load_model("smollm2-135m")
    pm = load_model(perturbation_model) if isinstance(perturbation_model, str) else perturbation_model
    train, evaluation = squad_split(data, limit, seed)
    extractor = FeatureExtractor(
        base,
        pm,
        settings=settings or PerturbationSettings(),
        cache_dir=cache or (cache_dir() / "correctness"),
    )
    try:
        (train_f, train_s, errors), (eval_f, eval_s, eval_errors) = run_sync(
            _features(extractor, {"train": train, "eval": evaluation})
        )
    finally:
        extractor.close()
    errors += eval_errors
    feature_seconds = time.perf_counter() - started
    train_y = correctness_targets([f.answer for f in train_f], [s.references for s in train_s], metric)
    eval_y = correctness_targets([f.answer for f in eval_f], [s.references for s in eval_s], metric)
    estimator = CorrectnessEstimator(
        n_trees=n_trees,
        seed=seed,
        aggregates=aggregates,
        target_metric=metric,
        threshold=threshold,
        extractor_config=extractor.config,
    ).fit(train_f, train_y)
    predicted = estimator.predict(eval_f).tolist()
    figures = estimator.evaluate(eval_f, eval_y)
    label = [y >= estimator.threshold for y in eval_y]
    pos = [p for p, lab in zip(predicted, label, strict=True) if lab]
    neg = [p for p, lab in zip(predicted, label, strict=True) if not lab]
    if pos and neg:
        from ragsense.stats import roc_auc

        lo, hi = bootstrap_ci(roc_auc, pos, neg, seed=seed)
        figures["auroc_ci95"] = [round(lo, 4), round(hi, 4)]
    if out is not None:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        estimator.save(folder / "estimator.npz")
        with (folder / "eval.jsonl").open("w", encoding="utf-8") as handle:
            for f, s, y, p in zip(eval_f, eval_s, eval_y, predicted, strict=True):
                record = {
                    **f.to_record(),
                    "references": list(s.references),
                    "target": y,
                    "estimate": round(p, 6),
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    figures.update(
        n_train=len(train_f),
        n_eval=len(eval_f),
        n_errors=len(errors),
        errors=errors[:10],
        metric=metric,
        aggregates=list(aggregates),
        base_model=base.info.name,
        perturbation_model=(pm or base).info.name,
        perturbation=(settings or PerturbationSettings()).label,
        train_target_mean=round(sum(train_y) / len(train_y), 4),
        eval_positive_share=round(sum(label) / len(label), 4),
        seconds=round(time.perf_counter() - started, 1),
        feature_seconds_per_sample=round(feature_seconds / max(1, len(train) + len(evaluation)), 3),
    )
    return figures
