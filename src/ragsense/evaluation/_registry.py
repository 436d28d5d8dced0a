"""Naming metrics: built-ins and plug-ins alike come from the ``ragsense.metrics`` entry point group.

A plug-in registers a factory (a class or function taking keyword options and returning a
:class:`~ragsense.evaluation.Metric`) in its ``pyproject.toml``::

    [project.entry-points."ragsense.metrics"]
    my_metric = "my_package.metrics:MyMetric"

and ``ragsense evaluate --metrics consens,my_metric`` runs it. Built-ins are registered in ragsense's own
``pyproject.toml`` the same way, so there is one registration path and no import side effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragsense.contract import Metric
from ragsense.errors import ParameterError
from ragsense.plugins import EntryPointRegistry

ENTRY_POINT_GROUP = "ragsense.metrics"
DEFAULT_METRICS = ("consens",)

_METRICS = EntryPointRegistry[Metric](
    ENTRY_POINT_GROUP, kind="metric", not_found=lambda message: ParameterError(message, parameter="metrics")
)


def available_metrics() -> dict[str, str]:
    """Metric name -> ``module:factory`` for every registered metric (built-in and plug-ins).

    >>> sorted(available_metrics())[:3]
    ['attribution', 'consens', 'correctness']
    """
    return _METRICS.targets()


def _create(name: str, options: Mapping[str, Any], shared: Mapping[str, Any]) -> Metric:
    factory = _METRICS.factory(name)
    kwargs = _METRICS.options(name, factory, options=options, shared=shared)
    # None means "the metric's default" (the CLI passes every flag, given or not).
    metric = factory(**{k: v for k, v in kwargs.items() if v is not None})
    if not isinstance(metric, Metric):
        raise ParameterError(
            f"the factory registered as {name!r} returned a {type(metric).__name__}, not a Metric",
            parameter="metrics",
        )
    return metric


def create_metric(name: str, **options: Any) -> Metric:
    """The metric registered as ``name`` made with ``options``, each of which its factory must take: a
    misspelt option is an error listing the accepted ones, not silently ignored. (Options meant for every
    metric of a run, such as the model, go through :func:`resolve_metrics`.)

    >>> create_metric("consens", model="fake").name
    'consens'
    >>> create_metric("consens", model="fake", agregation="q25")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: ...no option 'agregation' (did you mean 'aggregation'?); it accepts: ...
    """
    return _create(name, options, {})


def resolve_metrics(
    metrics: str | Sequence[str | Metric] | None = None,
    *,
    per_metric: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> list[Metric]:
    """Metric objects from names (a comma-separated string or a list) and objects, in order.

    ``options`` (``model``, ``model_options``) go to every metric created by name that takes them (the
    similarity baseline takes no model); ``per_metric`` adds options for the metrics created under one
    name only (``{"consens": {"bands": ...}}``), each of which that metric must take, so an option one
    metric takes never reaches a plug-in that accepts any keyword. ``attribution`` is
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
    resolved = [_create(m, extra.get(m, {}), options) if isinstance(m, str) else m for m in items]
    seen: set[str] = set()
    for metric in resolved:
        if not isinstance(metric, Metric):
            raise ParameterError(f"{metric!r} is not a Metric", parameter="metrics")
        if metric.name in seen:
            raise ParameterError(f"metric {metric.name!r} is named twice", parameter="metrics")
        seen.add(metric.name)
    return resolved
