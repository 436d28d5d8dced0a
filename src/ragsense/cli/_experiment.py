"""``ragsense experiment NAME``: the papers' experiments; the last output line is one JSON object."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ragsense.cli._common import add_model_options
from ragsense.cli._correctness import add_perturbation_options, add_target_options, settings_from_args
from ragsense.cli._numbers import non_negative_int, positive_int
from ragsense.errors import ParameterError

RESUMABLE = ("vera-", "correctness-")
"""The experiments that run on the runner and take ``resume``."""


def add_parser(sub: Any) -> None:
    from ragsense.experiments import EXPERIMENTS

    parser = sub.add_parser("experiment", help="run a paper experiment on real data")
    parser.add_argument("name", choices=sorted(EXPERIMENTS), help="which experiment")
    parser.add_argument(
        "--data", help="dataset path (default: ../shared/data/<dataset> or RAGSENSE_DATA_DIR)"
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="use only the first N items (quick run)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--out", help="directory for per-item results (JSONL)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="vera-* and correctness-*: continue an interrupted run in --out (same options); finished "
        "items are not computed again",
    )
    add_model_options(parser)
    add_perturbation_options(parser)
    group = parser.add_argument_group("correctness-* experiments")
    add_target_options(group)
    group.add_argument("--trees", type=positive_int, default=2100, help="random-forest trees (default 2100)")
    group.add_argument(
        "--aggregates",
        default="mean,max",
        help="NLL summaries per place, comma-separated: mean, max (default mean,max)",
    )
    vera = parser.add_argument_group("vera-* experiments (--model is the judge)")
    vera.add_argument("--generator", help="model that answers (default: the bundled smollm2-135m)")
    vera.add_argument("--judge-mode", choices=("auto", "labels", "structured"), default="auto")
    vera.add_argument("--splitter", choices=("auto", "rules", "judge"), default="auto")
    vera.add_argument(
        "--adherence-signal",
        choices=("judge", "consens", "combined"),
        default=None,
        help="default: VERA's own for vera-squad; combined (both recorded) for vera-wikieval",
    )
    vera.add_argument(
        "--signals",
        choices=("offline", "judge"),
        default=None,
        help="how VERA's steps 1-3 decide: offline signals or the judge's labels (default: offline)",
    )
    vera.add_argument("--calibrate", action="store_true", help="content-free calibration of label scores")
    # The same choices as ragsense.vera.LABEL_SCORINGS / PROMPT_FORMATS (not imported: keeps startup light).
    vera.add_argument("--label-scoring", choices=("sum", "mean", "first_token"), default="sum")
    vera.add_argument("--prompt-format", choices=("plain", "chat"), default="plain")
    vera.add_argument(
        "--adherence-only",
        action="store_true",
        help="vera-wikieval: only the adherence step, grounded vs ungrounded answer, per-statement details",
    )
    vera.add_argument("--no-judge-cache", action="store_true", help="do not read or write the judge cache")
    distractors = parser.add_argument_group("consens-distractors")
    distractors.add_argument("--ks", default="0,5,10,20,40", help="distractor counts (default 0,5,10,20,40)")
    distractors.add_argument(
        "--context-budget",
        type=positive_int,
        help="use this budget (default: choose it on the development half)",
    )
    distractors.add_argument(
        "--full-ks",
        help="the k at which the slow full-context pass runs (default: every k); per set: "
        "'wikieval:0 halueval:0,5,20'",
    )
    distractors.add_argument(
        "--sets",
        default="wikieval,halueval",
        help="the data sets (default wikieval,halueval; the budget rule reads both)",
    )
    distractors.add_argument(
        "--max-windows",
        type=positive_int,
        default=4,
        help="the windows study: at most this many windows per row (default 4)",
    )
    distractors.add_argument(
        "--windows-ks",
        default="0,20",
        help="the k at which the windows study runs ('' for none; default 0,20)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ragsense.cli._common import model_from_args
    from ragsense.experiments import EXPERIMENTS

    experiment = EXPERIMENTS[args.name]
    options: dict[str, Any] = {}
    if args.resume and not args.name.startswith(RESUMABLE):
        raise ParameterError(
            f"{args.name} cannot resume; only {', '.join(p + '*' for p in RESUMABLE)} experiments can",
            parameter="--resume",
        )
    if args.resume and args.out is None:
        raise ParameterError(
            "--resume continues the per-item results in --out: give --out", parameter="--resume"
        )
    if args.name.startswith("correctness"):
        options = {
            "perturbation_model": args.pm,
            "settings": settings_from_args(args),
            "metric": args.metric,
            "threshold": args.threshold,
            "n_trees": args.trees,
            "aggregates": tuple(a.strip() for a in args.aggregates.split(",") if a.strip()),
            "cache": args.cache_dir,
        }
    if args.name.startswith("vera"):
        signal = {} if args.adherence_signal is None else {"adherence_signal": args.adherence_signal}
        if args.signals is not None:
            signal["signals"] = args.signals
        options = {
            "generator": args.generator,
            "vera_options": {
                **signal,
                "judge_mode": args.judge_mode,
                "splitter": args.splitter,
                "calibrate": args.calibrate,
                "label_scoring": args.label_scoring,
                "prompt_format": args.prompt_format,
                "cache": not args.no_judge_cache,
                "cache_dir": args.cache_dir,
            },
        }
    if args.name == "consens-distractors":
        options = {
            "ks": _ints(args.ks, "--ks"),
            "budget": args.context_budget,
            "max_windows": args.max_windows,
            "windows_ks": _ints(args.windows_ks, "--windows-ks"),
            "sets": tuple(x.strip() for x in args.sets.split(",") if x.strip()),
        }
        if args.full_ks is not None:
            options["full_ks"] = _full_ks(args.full_ks)
    if args.adherence_only:
        if args.name != "vera-wikieval":
            raise ParameterError("only vera-wikieval has an adherence-only run", parameter="--adherence-only")
        options["adherence_only"] = True
    if args.resume:
        options["resume"] = True
    figures = experiment(
        model=model_from_args(args),
        data=args.data,
        limit=args.limit,
        seed=args.seed,
        out=args.out,
        **options,
    )
    print(json.dumps(figures, sort_keys=True, allow_nan=False))
    return 0


def _ints(text: str, flag: str) -> tuple[int, ...]:
    """Comma-separated whole numbers (``--ks 0,5,20``)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ParameterError(f"comma-separated whole numbers, got {text!r}", parameter=flag) from None


def _full_ks(text: str) -> tuple[int, ...] | dict[str, tuple[int, ...]]:
    """``--full-ks``: ``0,5`` for every set, or ``wikieval:0 halueval:0,5,20`` per set.

    >>> _full_ks("wikieval:0 halueval:0,5")
    {'wikieval': (0,), 'halueval': (0, 5)}
    >>> _full_ks("0,5")
    (0, 5)
    """
    if ":" not in text:
        return _ints(text, "--full-ks")
    per_set: dict[str, tuple[int, ...]] = {}
    for part in text.split():
        name, sep, ks = part.partition(":")
        if not sep or not name:
            raise ParameterError(f"per set as NAME:K,K ..., got {part!r}", parameter="--full-ks")
        per_set[name] = _ints(ks, "--full-ks")
    return per_set
