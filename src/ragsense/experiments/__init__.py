"""The papers' experiments, each a function returning a dict of figures.

``EXPERIMENTS`` maps the CLI name to the function; modules load only when an experiment runs.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

Experiment = Callable[..., dict[str, Any]]

_TARGETS = {
    "consens-wikieval": "ragsense.experiments._consens:consens_wikieval",
    "consens-halueval": "ragsense.experiments._consens:consens_halueval",
    "consens-pubmedqa-partial": "ragsense.experiments._consens:consens_pubmedqa_partial",
    "consens-pubmedqa-partial-sentences": "ragsense.experiments._consens:consens_pubmedqa_partial_sentences",
    "consens-pubmedqa-attribution": "ragsense.experiments._consens:consens_pubmedqa_attribution",
    "consens-faithbench": "ragsense.experiments._faithbench:consens_faithbench",
    "correctness-squad": "ragsense.experiments._correctness:correctness_squad",
    "vera-squad": "ragsense.experiments._vera:vera_squad",
    "vera-wikieval": "ragsense.experiments._vera_wikieval:vera_wikieval",
}


def _lazy(target: str) -> Experiment:
    def run(**kwargs: Any) -> dict[str, Any]:
        module, _, attr = target.partition(":")
        fn: Experiment = getattr(import_module(module), attr)
        return fn(**kwargs)

    run.__name__ = target.rpartition(":")[2]
    return run


EXPERIMENTS: dict[str, Experiment] = {name: _lazy(target) for name, target in _TARGETS.items()}

__all__ = ["EXPERIMENTS", "Experiment"]
