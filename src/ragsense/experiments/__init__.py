"""The papers' experiments, each a function returning a dict of figures.

``EXPERIMENTS`` maps the CLI name to the function. The experiments are registered in the
``ragsense.experiments`` entry point group (ragsense's ``pyproject.toml``; a plug-in can add its own), and
an experiment's module loads only when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ragsense.plugins import EntryPointRegistry

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

__all__ = ["ENTRY_POINT_GROUP", "EXPERIMENTS", "Experiment"]
