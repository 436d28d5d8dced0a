"""Exceptions ragsense raises. Each message says what went wrong and, where it can, how to fix it."""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "CapabilityError",
    "InputError",
    "ModelCallError",
    "ModelNotFoundError",
    "OutputExistsError",
    "ParameterError",
    "RagsenseError",
    "ResumeError",
]


class RagsenseError(Exception):
    """Base class of every ragsense error: what the library raises on purpose (bad input, a bad setting,
    a missing backend, a refused request), as opposed to a bug. The command line reports these with
    :meth:`for_cli` and exits 2 (``ragsense.cli._main.EXIT_CODES``).

    Classes defined in other packages derive from it too (``RunNotFoundError``, ``GateSpecError``,
    ``GuardError``, ...), keeping the builtin base their callers catch (``ValueError``, ``LookupError``).

    >>> from ragsense.runs import RunNotFoundError
    >>> issubclass(RunNotFoundError, RagsenseError) and issubclass(RunNotFoundError, LookupError)
    True
    """

    def for_cli(self) -> str:
        """The message in the command line's words (flags, not Python keywords); ``str()`` by default."""
        return str(self)


class InputError(RagsenseError, ValueError):
    """A row of user input is unusable. Names the row and the field."""

    def __init__(self, message: str, *, row: int | str | None = None, field: str | None = None) -> None:
        self.row = row
        self.field = field
        where = []
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.reason = message


class ModelNotFoundError(RagsenseError, LookupError):
    """An unknown model name or backend."""


class BackendUnavailableError(RagsenseError, ImportError):
    """A backend's optional dependency is not installed. The message carries the install hint."""


class PluginError(RagsenseError, ImportError):
    """A registered plug-in cannot be loaded, or the entry points themselves are missing. Names the
    plug-in, its target and its distribution."""


class CapabilityError(RagsenseError, TypeError):
    """A model lacks a capability a metric needs (e.g. log-probabilities)."""


class ModelCallError(RagsenseError, RuntimeError):
    """A model call failed (server unreachable, timeout, malformed response)."""


class ResumeError(RagsenseError, ValueError):
    """An output cannot be resumed by this run: it was written for other input rows, other metrics or
    other settings, or it is not a ragsense output. The message names the file and the way out."""


class ParameterError(RagsenseError, ValueError):
    """A setting or parameter is invalid (not a row of input). Names the parameter."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        self.parameter = parameter
        super().__init__(f"{parameter}: {message}" if parameter else message)
        self.reason = message


class OutputExistsError(RagsenseError, FileExistsError):
    """An output exists and neither resuming nor replacing it was asked for.

    ``str()`` says what to pass in Python (``resume=True``, ``overwrite=True``); :meth:`for_cli` says the
    same with the command line's flags, so neither audience reads the other's wording.

    >>> error = OutputExistsError("output file 'out.jsonl' already exists")
    >>> str(error)
    "output file 'out.jsonl' already exists; continue it with resume=True or replace it with overwrite=True"
    >>> error.for_cli()
    "output file 'out.jsonl' already exists; continue it with --resume or replace it with --overwrite"
    """

    def __init__(self, described: str, *, can_resume: bool = True) -> None:
        self.described = described
        self.can_resume = can_resume
        super().__init__(self._message("resume=True", "overwrite=True"))

    def _message(self, resume: str, overwrite: str) -> str:
        if self.can_resume:
            return f"{self.described}; continue it with {resume} or replace it with {overwrite}"
        return f"{self.described}; replace it with {overwrite}"

    def for_cli(self) -> str:
        """The message with ``--resume`` / ``--overwrite``."""
        return self._message("--resume", "--overwrite")
