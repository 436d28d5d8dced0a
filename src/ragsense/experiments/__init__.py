"""The papers' experiments, each a function returning a dict of figures.

``EXPERIMENTS`` maps the CLI name to the function. The experiments are registered in the
``ragsense.experiments`` entry point group (ragsense's ``pyproject.toml``; a plug-in can add its own), and
an experiment's module loads only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ragsense.plugins import EntryPointRegistry

if TYPE_CHECKING:
    from ragsense.experiments._consens import (
        PAIR_LABELS,
        partial_context,
        partial_context_sentences,
        right_vs_rest,
    )
    from ragsense.experiments._correctness import paragraph_of, squad_split
    from ragsense.experiments._correctness_report import FOLDS, forest_fit_predict, grouped_folds, out_of_fold
    from ragsense.experiments._default_window import (
        auroc_difference,
        choose_default,
        consens_default_window,
        load_more_pairs,
        split_by_document,
    )
    from ragsense.experiments._distractors import (
        choose_budget,
        load_pairs,
        score_cell,
        score_windows_cell,
        split_parts,
        windows_win,
        with_distractors,
    )
    from ragsense.experiments._figures import contrast, delong_against, verdict_figures
    from ragsense.experiments._vera import (
        REFUSAL_WORD,
        SQUAD_INSTRUCTION,
        is_correct,
        is_squad_refusal,
        squad_items,
    )
    from ragsense.experiments._verdict import (
        SUMMARY_QUESTION,
        SUMMEDITS_DOMAINS,
        finished_ids,
        is_dev,
        verdict_table,
    )

ENTRY_POINT_GROUP = "ragsense.experiments"

Experiment = Callable[..., dict[str, Any]]

_REGISTRY = EntryPointRegistry[dict[str, Any]](ENTRY_POINT_GROUP, kind="experiment")


class _Experiments(Mapping[str, Experiment]):
    """Name -> experiment, read from the entry points on each use; an experiment called with an option
    it does not take raises a ParameterError listing the ones it does.

    >>> "consens-wikieval" in EXPERIMENTS
    True
    >>> EXPERIMENTS["consens-wikieval"](limt=3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: ...no option 'limt' (did you mean 'limit'?); it accepts: model, data, ...
    """

    def __getitem__(self, name: str) -> Experiment:
        if name not in _REGISTRY:
            raise KeyError(name)

        def run(**options: Any) -> dict[str, Any]:
            return _REGISTRY.create(name, options=options)

        run.__name__ = run.__qualname__ = name
        return run

    def __iter__(self) -> Iterator[str]:
        return iter(_REGISTRY.names())

    def __len__(self) -> int:
        return len(_REGISTRY.names())

    def __repr__(self) -> str:
        return f"EXPERIMENTS({', '.join(_REGISTRY.names())})"


EXPERIMENTS: Mapping[str, Experiment] = _Experiments()

# The helpers the papers' scripts (papers/ in the repository) reuse, by the module that defines them;
# each loads on first use, as the experiments do, so importing the registry stays cheap.
_HELPERS: dict[str, str] = {
    "PAIR_LABELS": "_consens",
    "partial_context": "_consens",
    "partial_context_sentences": "_consens",
    "right_vs_rest": "_consens",
    "paragraph_of": "_correctness",
    "squad_split": "_correctness",
    "FOLDS": "_correctness_report",
    "forest_fit_predict": "_correctness_report",
    "grouped_folds": "_correctness_report",
    "out_of_fold": "_correctness_report",
    "choose_budget": "_distractors",
    "load_pairs": "_distractors",
    "score_cell": "_distractors",
    "score_windows_cell": "_distractors",
    "split_parts": "_distractors",
    "windows_win": "_distractors",
    "with_distractors": "_distractors",
    "auroc_difference": "_default_window",
    "choose_default": "_default_window",
    "consens_default_window": "_default_window",
    "load_more_pairs": "_default_window",
    "split_by_document": "_default_window",
    "contrast": "_figures",
    "delong_against": "_figures",
    "verdict_figures": "_figures",
    "squad_items": "_vera",
    "is_correct": "_vera",
    "is_squad_refusal": "_vera",
    "REFUSAL_WORD": "_vera",
    "SQUAD_INSTRUCTION": "_vera",
    "verdict_table": "_verdict",
    "finished_ids": "_verdict",
    "is_dev": "_verdict",
    "SUMMARY_QUESTION": "_verdict",
    "SUMMEDITS_DOMAINS": "_verdict",
}


def __getattr__(name: str) -> Any:
    """A papers' helper, imported from its module on first use.

    >>> from ragsense.experiments import squad_split
    >>> squad_split.__name__
    'squad_split'
    """
    if name not in _HELPERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HELPERS[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ENTRY_POINT_GROUP",
    "EXPERIMENTS",
    "FOLDS",
    "PAIR_LABELS",
    "REFUSAL_WORD",
    "SQUAD_INSTRUCTION",
    "SUMMARY_QUESTION",
    "SUMMEDITS_DOMAINS",
    "Experiment",
    "auroc_difference",
    "choose_budget",
    "choose_default",
    "consens_default_window",
    "contrast",
    "delong_against",
    "finished_ids",
    "forest_fit_predict",
    "grouped_folds",
    "is_correct",
    "is_dev",
    "is_squad_refusal",
    "load_more_pairs",
    "load_pairs",
    "out_of_fold",
    "paragraph_of",
    "partial_context",
    "partial_context_sentences",
    "right_vs_rest",
    "score_cell",
    "score_windows_cell",
    "split_by_document",
    "split_parts",
    "squad_items",
    "squad_split",
    "verdict_figures",
    "verdict_table",
    "windows_win",
    "with_distractors",
]
