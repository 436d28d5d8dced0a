"""The correctness paper's experiment on SQuAD 2.0 (Zhang et al., Section 4): a seeded split of
answerable questions into a training part (2,100) and an evaluation part (up to 900), features from the
base model under the three conditions, a random forest, and its figures on the evaluation part beside
trivial and single-feature baselines, with calibration and intervals (:func:`evaluation_report`).

Only the dev split of SQuAD 2.0 is shipped in ../shared/data, so both parts come from it, split by
paragraph (:func:`squad_split`): no paragraph has questions in both parts. ``limit`` keeps the 70 / 30
proportion from the front of each part, so smaller runs are nested in larger ones and reuse their
cached features. Nothing is chosen on the evaluation part: the decision threshold, the Platt scaling
and the best single feature come from the training part (its out-of-fold estimates, with folds that
hold whole paragraphs). The paper's own figures are quoted in docs/results.md, never returned here.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragsense._async import run_sync
from ragsense.cache import cache_dir
from ragsense.correctness import (
    DEFAULT_AGGREGATES,
    FEATURE_FIELDS,
    CorrectnessEstimator,
    CorrectnessSample,
    FeatureExtractor,
    Metric,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
)
from ragsense.data import dumps_json, load_squad_v2
from ragsense.errors import BackendUnavailableError, ParameterError
from ragsense.evaluation import Needs, run_rows
from ragsense.experiments._correctness_report import (
    BOOTSTRAP,
    RELIABILITY_PLOT,
    evaluation_report,
    forest_fit_predict,
    plot_reliability,
)
from ragsense.models import LanguageModel, load_model

N_TRAIN, N_EVAL = 2100, 900


def squad_split(
    data: str | None, limit: int | None, seed: int
) -> tuple[list[CorrectnessSample], list[CorrectnessSample]]:
    """The seeded train / evaluation samples (answerable questions only), split by paragraph.

    The paragraphs are shuffled with ``seed`` and given whole to the training part until it holds
    ``N_TRAIN`` questions (the questions of the paragraph that crosses the line beyond ``N_TRAIN`` are
    used nowhere), then to the evaluation part until it holds ``N_EVAL`` or the data ends. So no
    paragraph has questions in both parts: the context-place features, which are a fingerprint of the
    paragraph, cannot carry a label from one part to the other. Each part is then shuffled (same
    seed), so that its front, which ``limit`` takes, spreads over many paragraphs. ``limit`` keeps the
    70 / 30 proportion from the front of each part, so smaller runs are nested in larger ones.
    """
    if limit is not None and limit < 10:  # refused before the data is read
        raise ParameterError(
            f"must be at least 10 (7 training and 3 evaluation samples), got {limit}", parameter="limit"
        )
    items = [item for item in load_squad_v2(data) if not item.is_impossible and item.answers]
    paragraphs: dict[tuple[str, str], list[CorrectnessSample]] = {}
    for it in items:
        sample = CorrectnessSample(it.question, it.context, tuple(it.answers), it.id)
        paragraphs.setdefault((it.title, it.context), []).append(sample)
    groups = list(paragraphs.values())
    rng = random.Random(seed)
    rng.shuffle(groups)
    train: list[CorrectnessSample] = []
    evaluation: list[CorrectnessSample] = []
    for group in groups:
        if len(train) < N_TRAIN:
            train.extend(group[: N_TRAIN - len(train)])
        elif len(evaluation) < N_EVAL:
            evaluation.extend(group[: N_EVAL - len(evaluation)])
    rng.shuffle(train)
    rng.shuffle(evaluation)
    if limit is not None:
        n_train = round(limit * N_TRAIN / (N_TRAIN + N_EVAL))
        train, evaluation = train[:n_train], evaluation[: limit - n_train]
    return train, evaluation


def paragraph_of(sample: CorrectnessSample) -> str:
    """The group a sample belongs to for splits and cross-validation folds: its paragraph."""
    return sample.context


# Samples per batched model call: the runner's chunk. Features are computed on ragsense's one runner
# (:func:`ragsense.evaluation.run_rows`): each sample is an item and feature extraction its one step,
# run over each part on its own, so a part's chunks are its samples 0-7, 8-15, ... With ``out`` each
# part's records are appended to ``features_<part>.jsonl`` (the format of ``ragsense correctness
# features``) as its chunks finish and ``resume=True`` continues them without recomputing finished
# chunks; the extractor's disk cache (``cache``) also keeps every computed condition.
# Small (8), so that a run cut short on a busy machine loses at most a few samples' conditions.
FEATURE_CHUNK = 8


@dataclass(frozen=True)
class _SampleItem:
    """One sample of one part: the runner's item."""

    sample: CorrectnessSample
    part: str

    @property
    def id(self) -> str:
        return self.sample.id

    def to_record(self) -> dict[str, Any]:
        return {"id": self.sample.id, "part": self.part, "references": list(self.sample.references)}


@dataclass
class _FeatureStep:
    """The base model's features of a chunk of samples, in one batched :meth:`aextract_many` call."""

    extractor: FeatureExtractor
    name: str = "correctness_features"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = FEATURE_FIELDS

    async def score(self, rows: Sequence[Any]) -> list[Mapping[str, Any] | Exception]:
        config = self.extractor.config
        results = await self.extractor.aextract_many([row.sample for row in rows])
        return [
            r if isinstance(r, Exception) else {**r.to_record(), "feature_config": config} for r in results
        ]


Part = tuple[list[SampleFeatures], list[CorrectnessSample], list[str]]


def _check_config(path: Path, config: dict[str, Any]) -> None:
    """Refuse to resume a features file computed with another model or other settings."""
    if not path.exists():
        return
    expected = json.loads(dumps_json(config))
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a truncated last line: the runner drops it
        found = record.get("feature_config") if isinstance(record, dict) else None
        if found is not None and found != expected:
            raise ParameterError(
                f"{path} holds features computed with other models or settings; resume needs the same "
                "ones (or use another --out)",
                parameter="resume",
            )


def _error_note(part: str, record: Mapping[str, Any]) -> str:
    error = record["errors"][0]
    where = f"field {error['field']!r}: " if error.get("field") else ""
    return f"{part} {record['id']}: {where}{error['message']}"


async def _features(
    extractor: FeatureExtractor,
    parts: dict[str, list[CorrectnessSample]],
    out: Path | None,
    resume: bool,
) -> list[Part]:
    """Features of each part: kept features (read back from the records), their samples, and one note
    per failed sample (bad fields or a failed model call)."""
    result: list[Part] = []
    step = _FeatureStep(extractor)
    for part, samples in parts.items():
        output = None if out is None else out / f"features_{part}.jsonl"
        if output is not None and resume:
            _check_config(output, extractor.config)
        records, _ = await run_rows(
            [_SampleItem(sample, part) for sample in samples],
            [step],
            output=output,
            chunk_size=FEATURE_CHUNK,
            resume=resume,
            overwrite=not resume,
            desc=f"features ({part})",
        )
        kept_features: list[SampleFeatures] = []
        kept_samples: list[CorrectnessSample] = []
        errors: list[str] = []
        for sample, record in zip(samples, records, strict=True):
            if record["errors"]:
                errors.append(_error_note(part, record))
            else:
                kept_features.append(SampleFeatures.from_record(record))
                kept_samples.append(sample)
        result.append((kept_features, kept_samples, errors))
    return result


def _paragraph_id(context: str) -> str:
    return hashlib.sha256(context.encode("utf-8")).hexdigest()[:12]


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
    resume: bool = False,
) -> dict[str, Any]:
    """Train on the training part, evaluate on the evaluation part; returns the figures
    (:func:`evaluation_report`, plus the run's settings).

    With ``out``, the features of each part are kept there (``features_train.jsonl``,
    ``features_eval.jsonl``) and ``resume=True`` continues an interrupted run from them (same
    arguments): finished chunks of samples are not computed again. ``out`` also gets the estimator,
    ``eval.jsonl`` (per evaluation item: features, target, label, estimates), ``train_cv.jsonl`` (per
    training item: fold and out-of-fold estimate), ``figures.json`` and ``reliability.png``.
    """
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
    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        # The evaluation part first: a run stopped during the training part leaves a complete
        # evaluation part, so a smaller ``limit`` (nested in this one) finds all its features cached.
        (eval_f, eval_s, errors), (train_f, train_s, train_errors) = run_sync(
            _features(extractor, {"eval": evaluation, "train": train}, folder, resume)
        )
    finally:
        extractor.close()
    errors += train_errors
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
    predicted = estimator.predict(eval_f)
    figures = estimator.evaluate(eval_f, eval_y)
    train_groups = [paragraph_of(s) for s in train_s]
    eval_groups = {paragraph_of(s) for s in eval_s}
    report = evaluation_report(
        estimator.feature_names,
        np.asarray([f.vector(aggregates) for f in train_f], dtype=np.float64),
        train_y,
        train_groups,
        np.asarray([f.vector(aggregates) for f in eval_f], dtype=np.float64),
        eval_y,
        threshold=estimator.threshold,
        fit_predict=forest_fit_predict(n_trees, seed),
        predicted_eval=predicted,
        seed=seed,
        n_boot=BOOTSTRAP,
    )
    figures.update(report.figures)
    figures["auroc_ci95"] = report.figures["forest"]["auroc_ci95"]
    figures["split"].update(
        paragraphs_eval=len(eval_groups),
        paragraphs_shared=len(eval_groups & set(train_groups)),
    )
    every = list(train_f) + list(eval_f)
    figures["answers_equal_to_normal"] = {
        "n": len(every),
        "perturbed": sum(f.perturbed.answer == f.normal.answer for f in every),
        "baseline": sum(f.baseline.answer == f.normal.answer for f in every),
    }
    figures.update(
        n_train=len(train_f),
        n_eval=len(eval_f),
        n_errors=len(errors),
        errors=errors[:10],
        metric=metric,
        aggregates=list(aggregates),
        n_trees=n_trees,
        seed=seed,
        limit=limit,
        base_model=base.info.name,
        perturbation_model=(pm or base).info.name,
        perturbation=(settings or PerturbationSettings()).label,
        train_target_mean=round(sum(train_y) / len(train_y), 4),
        eval_positive_share=round(sum(y >= estimator.threshold for y in eval_y) / len(eval_y), 4),
        seconds=round(time.perf_counter() - started, 1),
        feature_seconds_per_sample=round(feature_seconds / max(1, len(train) + len(evaluation)), 3),
    )
    if folder is not None:
        estimator.save(folder / "estimator.npz")
        with (folder / "eval.jsonl").open("w", encoding="utf-8") as handle:
            for f, s, item in zip(eval_f, eval_s, report.eval_items, strict=True):
                record = {
                    **f.to_record(),
                    "paragraph": _paragraph_id(s.context),
                    "question": s.question,
                    "references": list(s.references),
                    **item,
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        with (folder / "train_cv.jsonl").open("w", encoding="utf-8") as handle:
            for f, s, item in zip(train_f, train_s, report.train_items, strict=True):
                record = {"id": f.id, "paragraph": _paragraph_id(s.context), "answer": f.answer, **item}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        png = folder / RELIABILITY_PLOT
        try:
            plot_reliability(
                figures["calibration"],
                png,
                title=f"correctness-squad, evaluation part (n = {len(eval_f)}), {base.info.name}",
            )
            figures["reliability_plot"] = RELIABILITY_PLOT
        except BackendUnavailableError as exc:
            png.unlink(missing_ok=True)
            figures["reliability_plot"] = f"skipped: {exc}"
        (folder / "figures.json").write_text(
            json.dumps(json.loads(dumps_json(figures)), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
    return figures
