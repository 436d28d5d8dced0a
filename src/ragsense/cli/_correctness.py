"""``ragsense correctness``: features, train, evaluate, predict (correctness estimation by perturbation).

A typical session::

    ragsense correctness features train_rows.jsonl -o train_features.jsonl
    ragsense correctness train train_features.jsonl -o estimator.npz
    ragsense correctness predict new_rows.jsonl --estimator estimator.npz -o estimates.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ragsense.cli._common import model_spec_from_args
from ragsense.cli._numbers import non_negative_int, positive_int, score
from ragsense.cli._run import (
    UsageExit,
    add_run_options,
    error_text,
    fmt,
    question_of,
    row_id,
    run_command,
)
from ragsense.correctness import references

_FEATURE_FIELDS = ("baseline", "normal", "perturbed", "perturbation")


def add_perturbation_options(parser: argparse.ArgumentParser) -> None:
    """The perturbation and perturbation-model flags (shared with ``ragsense experiment``)."""
    from ragsense.correctness import PerturbationSettings

    d = PerturbationSettings()
    group = parser.add_argument_group("perturbation")
    group.add_argument("--pm", help="perturbation model (default: the base model); a local model name")
    group.add_argument(
        "--perturbations",
        type=positive_int,
        default=d.k,
        help=f"K, tokens perturbed (default {d.k})",
    )
    group.add_argument("--where", choices=["entropy", "random"], default=d.where, help="which tokens")
    group.add_argument(
        "--how", choices=["iterative", "single_shot"], default=d.how, help="one at a time or all at once"
    )
    group.add_argument(
        "--fill", choices=["left", "infill"], default=d.fill, help="replacement by left context or infilling"
    )
    group.add_argument(
        "--rescore-window",
        type=non_negative_int,
        default=d.rescore_window,
        help=f"iterative: tokens re-scored after each change (default {d.rescore_window}; 0: to the end)",
    )
    group.add_argument(
        "--no-catch-up",
        dest="catch_up",
        action="store_false",
        help="iterative: fill a pick right of the re-scored window without first re-running the body "
        "up to it (faster, approximate; docs/correctness.md)",
    )
    group.add_argument("--cache-dir", help="feature cache directory (default: <ragsense cache>/correctness)")


def settings_from_args(args: argparse.Namespace) -> Any:
    from ragsense.correctness import PerturbationSettings

    return PerturbationSettings(
        k=args.perturbations,
        where=args.where,
        how=args.how,
        fill=args.fill,
        rescore_window=args.rescore_window or None,
        catch_up=args.catch_up,
    )


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "correctness",
        help="estimate answer correctness from the model's confusion under context perturbation",
        description="Correctness estimation by context perturbation: extract features, train, predict.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    features = actions.add_parser(
        "features", help="base-model NLL features of rows (question, context[, reference])"
    )
    add_run_options(features, output_help="output .jsonl (input fields + features)", sample=False)
    add_perturbation_options(features)
    features.set_defaults(run=run_features)

    train = actions.add_parser("train", help="fit the random forest on a features file with references")
    train.add_argument("features", help="JSONL written by 'ragsense correctness features'")
    train.add_argument("-o", "--output", required=True, help="estimator file (.npz)")
    add_target_options(train)
    train.add_argument(
        "--trees", type=positive_int, default=2100, help="random-forest trees (default 2100, as the paper)"
    )
    train.add_argument("--seed", type=non_negative_int, default=0)
    train.add_argument("--aggregates", default="mean,max", help="NLL summaries per place (default mean,max)")
    train.set_defaults(run=run_train)

    evaluate = actions.add_parser(
        "evaluate", help="MSE, AUROC, accuracy, F1 of an estimator on a features file"
    )
    evaluate.add_argument(
        "features", help="JSONL written by 'ragsense correctness features', with references"
    )
    evaluate.add_argument("--estimator", required=True, help="estimator file (.npz)")
    evaluate.add_argument(
        "--threshold", type=score, help="correctness threshold t (default: the estimator's)"
    )
    evaluate.set_defaults(run=run_evaluate)

    predict = actions.add_parser(
        "predict",
        help="answer rows with the base model and estimate each answer's correctness",
        description="The short name of 'ragsense evaluate --metrics correctness --estimator PATH': the same "
        "records (correctness, correct, correctness_answer, correctness_context_truncated, errors).",
    )
    add_run_options(
        predict,
        output_help="output .jsonl, .csv or .parquet (input fields + correctness fields; default: stdout)",
        sample=False,
    )
    predict.add_argument("--estimator", required=True, help="estimator file (.npz)")
    predict.add_argument("--cache-dir", help="feature cache directory")
    predict.set_defaults(run=run_predict)


def add_target_options(parser: Any) -> None:
    """--metric and --threshold (shared with ``ragsense experiment``)."""
    parser.add_argument(
        "--metric",
        choices=["cosine", "rouge_f1", "rouge_precision"],
        default="cosine",
        help="target correctness",
    )
    parser.add_argument("--threshold", type=score, help="correctness threshold t (default: per metric)")


def run_features(args: argparse.Namespace) -> int:
    from ragsense.correctness import CorrectnessFeatures

    if not args.output:
        raise UsageExit("ragsense correctness features: give -o/--output (features are trained on later)")
    model, options = model_spec_from_args(args)
    step = CorrectnessFeatures(
        model,
        perturbation_model=args.pm,
        settings=settings_from_args(args),
        model_options=options,
        feature_cache=args.cache_dir,
    )
    columns = [("id", 14, row_id), ("question", 40, question_of), ("answer", 40, _answer_cell)]
    return run_command(args, "correctness features", [step], columns)


def _answer_cell(record: dict[str, Any]) -> str:
    return error_text(record) or str(record.get("answer", ""))


def _predicted_answer_cell(record: dict[str, Any]) -> str:
    return error_text(record) or str(record.get("correctness_answer", ""))


def _load_features(path: str) -> tuple[list[Any], list[tuple[str, ...]], dict[str, Any], list[str]]:
    """Feature rows, their references, the feature config, and notes on skipped rows."""
    from ragsense.correctness import SampleFeatures
    from ragsense.errors import InputError

    features: list[Any] = []
    refs: list[tuple[str, ...]] = []
    skipped: list[str] = []
    config: dict[str, Any] | None = None
    for line_no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("errors"):
            skipped.append(f"line {line_no}: failed at extraction ({record['errors'][0].get('message')})")
            continue
        if any(k not in record for k in _FEATURE_FIELDS):
            raise InputError("not a features row (run 'ragsense correctness features' first)", row=line_no)
        if config is None:
            config = record["feature_config"]
        elif record["feature_config"] != config:
            raise InputError(
                "features from different models or settings are mixed in one file",
                row=line_no,
                field="feature_config",
            )
        features.append(SampleFeatures.from_record({**record, "id": record.get("id", line_no)}))
        ref = record.get("reference", record.get("ground_truth"))
        refs.append(references(ref) + references(record.get("references")))
    if config is None:
        raise InputError(f"{path!r} holds no usable features row")
    return features, refs, config, skipped


def run_train(args: argparse.Namespace) -> int:
    from ragsense.correctness import CorrectnessEstimator, correctness_targets

    features, refs, config, skipped = _load_features(args.features)
    targets = correctness_targets([f.answer for f in features], refs, args.metric)
    estimator = CorrectnessEstimator(
        n_trees=args.trees,
        seed=args.seed,
        target_metric=args.metric,
        threshold=args.threshold,
        extractor_config=config,
    ).fit(features, targets)
    path = estimator.save(args.output)
    summary = {
        "estimator": str(path),
        "n_train": len(features),
        "skipped": len(skipped),
        "metric": args.metric,
        "threshold": estimator.threshold,
        "train_target_mean": round(sum(targets) / len(targets), 4),
    }
    print(json.dumps(summary, sort_keys=True))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from ragsense.correctness import CorrectnessEstimator, correctness_targets, evaluate_estimates

    estimator = CorrectnessEstimator.load(args.estimator)
    features, refs, config, skipped = _load_features(args.features)
    if config["base_model"] != estimator.extractor_config.get("base_model"):
        from ragsense.errors import ParameterError

        raise ParameterError(
            f"the features come from base model {config['base_model']['name']!r}, the estimator was trained "
            f"with {estimator.extractor_config['base_model']['name']!r}",
            parameter="features",
        )
    targets = correctness_targets([f.answer for f in features], refs, estimator.target_metric)
    threshold = estimator.threshold if args.threshold is None else args.threshold
    figures = evaluate_estimates(estimator.predict(features).tolist(), targets, threshold)
    figures["skipped"] = len(skipped)
    print(json.dumps(figures, sort_keys=True))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from ragsense.correctness import Correctness

    model, options = model_spec_from_args(args)
    metric = Correctness(
        args.estimator,
        model=model if args.model or args.base_url else None,
        model_options=options,
        feature_cache=args.cache_dir,
    )
    columns = [
        ("id", 14, row_id),
        ("question", 40, question_of),
        ("answer", 36, _predicted_answer_cell),
        ("correctness", 11, lambda r: fmt(r.get("correctness"))),
    ]
    return run_command(args, "correctness predict", [metric], columns, stdout_default=True)
