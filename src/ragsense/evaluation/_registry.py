"""Naming metrics: built-ins and plug-ins alike come from the ``ragsense.metrics`` entry point group.

A plug-in registers a factory (a class or function taking keyword options and returning a
:class:`~ragsense.evaluation.Metric`) in its ``pyproject.toml``::

    [project.entry-points."ragsense.metrics"]
    my_metric = "my_package.metrics:MyMetric"

and ``ragsense evaluate --metrics consens,my_metric`` runs it. Built-ins are registered in ragsense's own
``pyproject.toml`` the same way, so there is one registration path and no import side effect.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

from ragsense.contract import Metric
from ragsense.errors import ParameterError

ENTRY_POINT_GROUP = "ragsense.metrics"
DEFAULT_METRICS = ("consens",)

# Used only when the package metadata is missing (a source tree that was never installed); mirrors
# pyproject.toml.
_BUILTIN = {
    "consens": "ragsense.metrics._consens:ConSens",
    "attribution": "ragsense.metrics._consens:attribution_metric",
    "vera": "ragsense.metrics._vera:Vera",
    "correctness": "ragsense.metrics._correctness:Correctness",
    "similarity": "ragsense.metrics._similarity:Similarity",
}


def available_metrics() -> dict[str, str]:
    """Metric name -> ``module:factory`` for every registered metric (built-in and plug-ins).

    >>> sorted(available_metrics())[:3]
    ['attribution', 'consens', 'correctness']
    """
    found = dict(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def _factory(name: str) -> Callable[..., Metric]:
    registered = available_metrics()
    if name not in registered:
        raise ParameterError(
            f"unknown metric {name!r}; registered metrics: {', '.join(sorted(registered))}",
            parameter="metrics",
        )
    module_name, _, attr = registered[name].partition(":")
    factory: Callable[..., Metric] = getattr(importlib.import_module(module_name), attr)
    return factory


def create_metric(name: str, **options: Any) -> Metric:
    """The metric registered as ``name`` with ``options``; options its factory does not take are dropped
    (``model`` means nothing to the similarity baseline).

    >>> create_metric("consens", model="fake").name
    'consens'
    """
    factory = _factory(name)
    accepted: Mapping[str, inspect.Parameter] | None
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C factory: pass everything
        accepted = None
    # A factory that takes no options (an empty signature) gets none.
    if accepted is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        options = {k: v for k, v in options.items() if k in accepted}
    metric = factory(**{k: v for k, v in options.items() if v is not None})
    if not isinstance(metric, Metric):
        raise ParameterError(
            f"the factory registered as {name!r} returned a {type(metric).__name__}, not a Metric",
            parameter="metrics",
        )
    return metric


def resolve_metrics(
    metrics: str | Sequence[str | Metric] | None = None,
    *,
    per_metric: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> list[Metric]:
    """Metric objects from names (a comma-separated string or a list) and objects, in order.

    ``options`` (``model``, ``model_options``) go to the metrics created by name; ``per_metric`` adds
    options for the metrics created under one name only (``{"consens": {"bands": ...}}``), so an
    option one metric takes never reaches a plug-in that accepts any keyword. ``attribution`` is
    ConSens with leave-one-out, so naming both ``consens`` and ``attribution`` runs it once. Two
    metrics with the same name would write the same fields, so that is an error.

    >>> [m.name for m in resolve_metrics("consens,attribution", model="fake")]
    ['consens']
    >>> [m] = resolve_metrics("consens", model="fake", per_metric={"consens": {"aggregation": "geometric"}})
    >>> m.aggregation.value
    'geometric'
    """
    extra = per_metric or {}
    if metrics is None:
        metrics = DEFAULT_METRICS
    items: list[str | Metric] = (
        [m.strip() for m in metrics.split(",") if m.strip()] if isinstance(metrics, str) else list(metrics)
    )
    if not items:
        raise ParameterError("name at least one metric", parameter="metrics")
    names = [m for m in items if isinstance(m, str)]
    if "attribution" in names and "consens" in names:
        items = [m for m in items if m != "consens"]
    resolved = [create_metric(m, **options, **extra.get(m, {})) if isinstance(m, str) else m for m in items]
    seen: set[str] = set()
    for metric in resolved:
        if not isinstance(metric, Metric):
            raise ParameterError(f"{metric!r} is not a Metric", parameter="metrics")
        if metric.name in seen:
            raise ParameterError(f"metric {metric.name!r} is named twice", parameter="metrics")
        seen.add(metric.name)
    return resolved
