"""One registry type for every kind of plug-in: a named factory found through an entry point group.

Models (backends), metrics, embedders and experiments are each an :class:`EntryPointRegistry` over
their own group; ragsense's built-ins are registered in its ``pyproject.toml`` exactly as a plug-in
registers its own, so there is one registration path, nothing is registered by importing a module, and
the built-ins are listed once.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from ragsense.errors import ParameterError, PluginError, RagsenseError

T = TypeVar("T")

HOME = "ragsense"
"""The distribution that registers the built-ins."""


@dataclass(frozen=True)
class Plugin:
    """One registered entry point: its name, its ``module:attr`` target, and the distribution that
    registers it."""

    name: str
    target: str
    distribution: str

    @property
    def builtin(self) -> bool:
        """Whether ragsense itself registers it."""
        return self.distribution == HOME


def _distribution(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None)
    return str(name) if name else "an unknown distribution"


def _plural(kind: str) -> str:
    return kind + "s"


def accepted_options(factory: Callable[..., Any], positional: int = 0) -> tuple[str, ...] | None:
    """The keyword options ``factory`` takes once ``positional`` arguments are given, or None when it
    takes any keyword (``**options``) or has no signature to read.

    >>> def make(model_id, *, device="cpu", batch=8): ...
    >>> accepted_options(make, positional=1)
    ('device', 'batch')
    >>> accepted_options(lambda **options: None) is None
    True
    """
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # a builtin or C factory: nothing to check against
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    names: list[str] = []
    skipped = 0
    for p in parameters:
        positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if p.kind in positional_kinds and skipped < positional:  # bound by an argument: not an option
            skipped += 1
            continue
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            names.append(p.name)
    return tuple(names)


class EntryPointRegistry(Generic[T]):
    """The factories registered under the entry point group ``group``, each making a ``T``.

    ``kind`` names one of them in messages (``"metric"``); ``not_found`` builds the error for an unknown
    name from its message (a :class:`~ragsense.errors.ParameterError` unless given). Entry points are
    read on every lookup (a plug-in installed, or put on ``sys.path``, since is found) and a target is
    imported only when its factory is asked for.

    >>> backends = EntryPointRegistry[object]("ragsense.models", kind="model backend")
    >>> "fake" in backends.names() and backends.plugin("fake").builtin
    True
    >>> backends.create("fake", "fake", options={"context_window": 512}).info.context_window
    512
    >>> backends.factory("fak")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: unknown model backend 'fak'; registered model backends: ... 'fake'?)
    """

    def __init__(
        self,
        group: str,
        *,
        kind: str,
        not_found: Callable[[str], Exception] | None = None,
    ) -> None:
        self.group = group
        self.kind = kind
        self._not_found = not_found or (lambda message: ParameterError(message))

    def __repr__(self) -> str:
        return f"EntryPointRegistry({self.group!r}, kind={self.kind!r})"

    # ------------------------------------------------------------------------------------ listing

    def _entry_points(self) -> dict[str, list[EntryPoint]]:
        found: dict[str, list[EntryPoint]] = {}
        for ep in entry_points(group=self.group):
            found.setdefault(ep.name, []).append(ep)
        if not any(_distribution(ep) == HOME for eps in found.values() for ep in eps):
            # Every group holds built-ins, so none from ragsense means its metadata is not there (a
            # source tree on sys.path that was never installed) or predates this group.
            raise PluginError(
                f"no built-in {_plural(self.kind)} are registered under the entry point group "
                f"{self.group!r}: ragsense's package metadata is missing or out of date; install ragsense "
                "(pip install ragsense, or pip install -e . in a checkout)"
            )
        return found

    def plugins(self) -> dict[str, Plugin]:
        """Name -> :class:`Plugin` for every registered name, sorted by name (a name two distributions
        register shows the first found; loading it is an error)."""
        found = self._entry_points()
        return {
            name: Plugin(name, eps[0].value, _distribution(eps[0])) for name, eps in sorted(found.items())
        }

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return list(self.plugins())

    def targets(self) -> dict[str, str]:
        """Name -> ``module:attr`` for every registered name, sorted by name."""
        return {name: plugin.target for name, plugin in self.plugins().items()}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entry_points()

    def _unknown(self, name: str, registered: list[str]) -> Exception:
        message = f"unknown {self.kind} {name!r}; registered {_plural(self.kind)}: {', '.join(registered)}"
        close = difflib.get_close_matches(name, registered, n=1)
        if close:
            message += f" (did you mean {close[0]!r}?)"
        return self._not_found(message)

    def _entry_point(self, name: str) -> EntryPoint:
        found = self._entry_points()
        if name not in found:
            raise self._unknown(name, sorted(found))
        eps = found[name]
        if len({ep.value for ep in eps}) > 1:
            # Two distributions claim the name: picking one by sys.path order would be a silent guess.
            claims = "; ".join(f"{ep.value} from {_distribution(ep)}" for ep in eps)
            raise PluginError(
                f"the {self.kind} {name!r} is registered more than once under {self.group!r} ({claims}); "
                "uninstall one of the distributions"
            )
        return eps[0]

    def plugin(self, name: str) -> Plugin:
        """The :class:`Plugin` registered as ``name``; an unknown name is an error listing the names."""
        ep = self._entry_point(name)
        return Plugin(name, ep.value, _distribution(ep))

    # ------------------------------------------------------------------------------------ loading

    def factory(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``, imported now.

        A target that fails to import is a :class:`~ragsense.errors.PluginError` naming the plug-in and
        its distribution; a ragsense error raised while importing (a missing optional dependency, with
        its install hint) is passed on as it is.
        """
        ep = self._entry_point(name)
        try:
            loaded = ep.load()
        except RagsenseError:
            raise
        except Exception as exc:  # any failure inside a plug-in's import is the plug-in's
            raise PluginError(
                f"the {self.kind} plug-in {name!r} ({ep.value}, registered by {_distribution(ep)} under "
                f"{self.group!r}) cannot be loaded: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(loaded):
            raise PluginError(
                f"the {self.kind} plug-in {name!r} ({ep.value}, registered by {_distribution(ep)}) is a "
                f"{type(loaded).__name__}, not a factory"
            )
        factory: Callable[..., T] = loaded
        return factory

    def options(
        self,
        name: str,
        factory: Callable[..., T],
        *,
        options: Mapping[str, Any] | None = None,
        shared: Mapping[str, Any] | None = None,
        positional: int = 0,
    ) -> dict[str, Any]:
        """The keyword arguments for ``factory``: ``shared`` options (given to every plug-in of this kind,
        such as the model every metric of a run uses) where the factory takes them, then ``options``
        (aimed at this one plug-in), each of which it must take.

        An option aimed at it that the factory does not take is a
        :class:`~ragsense.errors.ParameterError` listing the ones it does, never silently dropped.
        """
        accepted = accepted_options(factory, positional)
        given = dict(options or {})
        if accepted is None:
            return {**(shared or {}), **given}
        unknown = [key for key in given if key not in accepted]
        if unknown:
            hints = [m for key in unknown for m in difflib.get_close_matches(key, accepted, n=1)]
            hint = f" (did you mean {', '.join(map(repr, hints))}?)" if hints else ""
            raise ParameterError(
                f"the {self.kind} {name!r} takes no option {', '.join(map(repr, unknown))}{hint}; "
                f"it accepts: {', '.join(accepted) or 'no options'}",
                parameter=unknown[0],
            )
        return {**{k: v for k, v in (shared or {}).items() if k in accepted}, **given}

    def create(
        self,
        name: str,
        /,
        *args: Any,
        options: Mapping[str, Any] | None = None,
        shared: Mapping[str, Any] | None = None,
    ) -> T:
        """The factory registered as ``name`` called with ``args`` and the checked options
        (:meth:`options`)."""
        factory = self.factory(name)
        return factory(
            *args, **self.options(name, factory, options=options, shared=shared, positional=len(args))
        )
