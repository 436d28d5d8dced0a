"""``ragsense correctness``: features, train, evaluate, predict (correctness estimation by perturbation).

A typical session::

    ragsense correctness features train_rows.jsonl -o train_features.jsonl
    ragsense correctness train train_features.jsonl -o estimator.npz
    ragsense correctness predict new_rows.jsonl --estimator estimator.npz -o estimates.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ragsense.cli._common import add_model_options, model_from_args

_FEATURE_FIELDS = ("baseline", "normal", "perturbed", "perturbation")


def add_perturbation_options(parser: argparse.ArgumentParser) -> None:
    """The perturbation and perturbation-model flags (shared with ``ragsense experiment``)."""
    from ragsense.correctness import PerturbationSettings

    d = PerturbationSettings()
    group = parser.add_argument_group("perturbation")
    group.add_argument("--pm", help="perturbation model (default: the base model); a local model name")
    group.add_argument("--perturbations", type=int, default=d.k, help=f"K, tokens perturbed (default {d.k})")
    group.add_argument("--where", choices=["entropy", "random"], default=d.where, help="which tokens")
    group.add_argument(
        "--how", choices=["iterative", "single_shot"], default=d.how, help="one at a time or all at once"
    )
    group.add_argument(
        "--fill", choices=["left", "infill"], default=d.fill, help="replacement by left context or infilling"
    )
    group.add_argument(
        "--rescore-window",
        type=int,
        default=d.rescore_window,
        help=f"iterative: tokens re-scored after each change (default {d.rescore_window}; 0: to the end)",
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
    features.add_argument("input", help="rows as .jsonl, .json or .csv")
    features.add_argument("-o", "--output", required=True, help="output JSONL (input fields + features)")
    features.add_argument("--resume", action="store_true", help="continue an interrupted run in --output")
    features.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    add_perturbation_options(features)
    add_model_options(features)
    features.set_defaults(run=run_features)

    train = actions.add_parser("train", help="fit the random forest on a features file with references")
    train.add_argument("features", help="JSONL written by 'ragsense correctness features'")
    train.add_argument("-o", "--output", required=True, help="estimator file (.npz)")
    add_target_options(train)
    train.add_argument(
        "--trees", type=int, default=2100, help="random-forest trees (default 2100, as the paper)"
    )
    train.add_argument("--seed", type=int, default=0)
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
        "--threshold", type=float, help="correctness threshold t (default: the estimator's)"
    )
    evaluate.set_defaults(run=run_evaluate)

    predict = actions.add_parser(
        "predict", help="answer rows with the base model and estimate each answer's correctness"
    )
    predict.add_argument("input", help="rows as .jsonl, .json or .csv (question, context)")
    predict.add_argument("--estimator", required=True, help="estimator file (.npz)")
    predict.add_argument("-o", "--output", help="output JSONL (input fields + answer + correctness)")
    predict.add_argument("--cache-dir", help="feature cache directory")
    add_model_options(predict)
    predict.set_defaults(run=run_predict)


def add_target_options(parser: Any) -> None:
    """--metric and --threshold (shared with ``ragsense experiment``)."""
    parser.add_argument(
        "--metric",
        choices=["cosine", "rouge_f1", "rouge_precision"],
        default="cosine",
        help="target correctness",
    )
    parser.add_argument("--threshold", type=float, help="correctness threshold t (default: per metric)")


def _extractor(args: argparse.Namespace) -> Any:
    from ragsense.correctness import FeatureExtractor
    from ragsense.models import cache_dir, load_model

    base = model_from_args(args)
    pm = load_model(args.pm) if args.pm else None
    return FeatureExtractor(
        base, pm, settings=settings_from_args(args), cache_dir=args.cache_dir or cache_dir() / "correctness"
    )


def _sample(row: Any) -> Any:
    from ragsense.correctness import CorrectnessSample

    # One ground truth in `reference` (or RAGAS's `ground_truth`), or several in `references`.
    refs = _references(row.reference) + _references(row.extra.get("references"))
    return CorrectnessSample(row.question, "\n\n".join(row.contexts), refs, row.id)


def _references(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    return tuple(str(v) for v in value if str(v).strip())


def run_features(args: argparse.Namespace) -> int:
    from ragsense.data import RagRow, read_rows
    from ragsense.runner import run_batch

    extractor = _extractor(args)
    config = extractor.config

    def process(chunk: list[RagRow]) -> list[dict[str, Any] | Exception]:
        out: list[dict[str, Any] | Exception] = []
        for result in extractor.extract_many([_sample(r) for r in chunk]):
            if isinstance(result, Exception):
                out.append(result)
            else:
                record = result.to_record()
                del record["id"]
                record["feature_config"] = config
                out.append(record)
        return out

    try:
        summary = run_batch(
            read_rows(args.input, require_answer=False),
            process,
            args.output,
            resume=args.resume,
            overwrite=args.overwrite,
            desc="correctness features",
        )
    finally:
        extractor.close()
    print(f"{summary}; features in {args.output}", file=sys.stderr)
    for row, field, message in summary.errors:
        print(f"  row {row}{f' field {field!r}' if field else ''}: {message}", file=sys.stderr)
    return 0 if summary.n_ok or not summary.n_rows else 1


def _load_features(path: str) -> tuple[list[Any], list[tuple[str, ...]], dict[str, Any], list[str]]:
    """Feature rows, their references, the feature config, and notes on skipped rows."""
    from ragsense.correctness import SampleFeatures
    from ragsense.errors import InputError

    features: list[Any] = []
    references: list[tuple[str, ...]] = []
    skipped: list[str] = []
    config: dict[str, Any] | None = None
    for line_no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if "error" in record:
            skipped.append(f"line {line_no}: failed at extraction ({record['error'].get('message')})")
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
        references.append(_references(ref) + _references(record.get("references")))
    if config is None:
        raise InputError(f"{path!r} holds no usable features row")
    return features, references, config, skipped


def run_train(args: argparse.Namespace) -> int:
    from ragsense.correctness import CorrectnessEstimator, correctness_targets

    features, references, config, skipped = _load_features(args.features)
    targets = correctness_targets([f.answer for f in features], references, args.metric)
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
    features, references, config, skipped = _load_features(args.features)
    if config["base_model"] != estimator.extractor_config.get("base_model"):
        from ragsense.errors import ParameterError

        raise ParameterError(
            f"the features come from base model {config['base_model']['name']!r}, the estimator was trained "
            f"with {estimator.extractor_config['base_model']['name']!r}",
            parameter="features",
        )
    targets = correctness_targets([f.answer for f in features], references, estimator.target_metric)
    threshold = estimator.threshold if args.threshold is None else args.threshold
    figures = evaluate_estimates(estimator.predict(features).tolist(), targets, threshold)
    figures["skipped"] = len(skipped)
    print(json.dumps(figures, sort_keys=True))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from ragsense.correctness import CorrectnessEstimator
    from ragsense.data import RagRow, read_rows
    from ragsense.models import cache_dir
    from ragsense.runner import run_batch

    base = model_from_args(args)
    estimator = CorrectnessEstimator.load(args.estimator, base_model=base)
    cache = args.cache_dir or cache_dir() / "correctness"

    def process(chunk: list[RagRow]) -> list[dict[str, Any] | Exception]:
        results = estimator.estimate([_sample(r) for r in chunk], base, cache_dir=cache)
        out: list[dict[str, Any] | Exception] = []
        for res in results:
            if isinstance(res, Exception):
                out.append(res)
            else:
                record = res.to_record()
                del record["id"]
                out.append(record)
        return out

    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(args.output) if args.output else Path(tmp) / "out.jsonl"
        summary = run_batch(
            read_rows(args.input, require_answer=False), process, out_path, overwrite=True, desc="correctness"
        )
        if not args.output:
            sys.stdout.write(out_path.read_text(encoding="utf-8"))
    print(f"{summary}", file=sys.stderr)
    return 0 if summary.n_ok or not summary.n_rows else 1
