"""``assert_grounded`` and ``assert_scores``: test assertions on top of ``ragsense.evaluate``.

Only the standard library and ``ragsense.errors`` are imported here at import time, so the pytest
plugin (which imports this package) costs nothing beyond ``import ragsense``; the scoring code is
imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragsense.errors import InputError, ModelCallError, ParameterError

if TYPE_CHECKING:
    from ragsense.consens import Aggregation
    from ragsense.evaluation import Evaluation
    from ragsense.models import ModelSpec

WEAKEST_WORDS = 5
"""How many answer words a failure message lists (those the context helped least)."""
_TEXT_WIDTH = 100

# The model ``assert_grounded(model=None)`` uses while a pytest session with the plugin runs (its
# ``--ragsense-model`` / ``ragsense_model``); None outside pytest: the library default.
_session_model: str | None = None


def _set_session_model(name: str | None) -> str | None:
    """Set the pytest session's model; returns the one it replaces (the plugin restores it)."""
    global _session_model
    previous, _session_model = _session_model, name
    return previous


def _current_model() -> str:
    """The model name ``assert_grounded`` uses when given none: the pytest session's model
    (``--ragsense-model``, ini ``ragsense_model``) while the plugin runs, else ragsense's default."""
    if _session_model is not None:
        return _session_model
    from ragsense.models import DEFAULT_MODEL

    return DEFAULT_MODEL


class GroundingAssertionError(AssertionError):
    """``assert_grounded`` failed: the answer's ConSens score is below the threshold.

    ``row`` is the scored output row (with ``attribution`` and ``top_document`` when the row had
    two or more contexts and ``explain`` was on), ``consens`` its score, ``threshold`` the minimum.
    """

    def __init__(self, message: str, row: dict[str, Any], threshold: float) -> None:
        super().__init__(message)
        self.row = row
        self.threshold = threshold
        self.consens = float(row["consens"])

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.row, self.threshold)


class ScoreAssertionError(AssertionError):
    """``assert_scores`` failed: a score's mean is below its threshold, or rows were not scored.

    ``means`` has the mean of every checked field over the rows that have it; ``thresholds`` the
    minimums asked for.
    """

    def __init__(self, message: str, means: dict[str, float | None], thresholds: dict[str, float]) -> None:
        super().__init__(message)
        self.means = means
        self.thresholds = thresholds

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.means, self.thresholds)


# Shown as ragsense.testing.X in tracebacks and pytest output (they are re-exported there).
GroundingAssertionError.__module__ = "ragsense.testing"
ScoreAssertionError.__module__ = "ragsense.testing"


def assert_grounded(
    question: str,
    contexts: str | Sequence[str],
    answer: str,
    *,
    min_consens: float | None = None,
    model: ModelSpec | None = None,
    aggregation: Aggregation | str | None = None,
    explain: bool = True,
) -> dict[str, Any]:
    """Assert that ``answer`` is grounded in ``contexts``: its ConSens score is at least ``min_consens``.

    The row is scored by :func:`ragsense.evaluate` with the ConSens metric. ``min_consens`` defaults to
    the lower edge of the ``grounded`` band of ``aggregation`` (default ``q25``: 0.02,
    ``ragsense.consens.DEFAULT_BANDS``), so by default the verdict must be ``grounded``. ``model``
    defaults to the pytest session's ``--ragsense-model`` (ini ``ragsense_model``) under the plugin,
    else ragsense's default model (``smollm2-135m``); models are loaded once per process.

    Returns the scored output row (``consens``, ``verdict``, ``words``, ... as in docs/metrics.md).
    On failure raises :class:`GroundingAssertionError` whose message has the score, threshold and
    verdict, and with ``explain`` the answer's weakest words (lowest contrast
    ``nll_empty - nll_context``) and, for two or more contexts, how much the score drops when each
    document is left out (a second, attribution run, made only on failure). A row that cannot be
    scored (an empty answer, no contexts) raises :class:`~ragsense.errors.InputError` naming the
    field; a model failure raises :class:`~ragsense.errors.ModelCallError`.

    >>> row = assert_grounded("Who designs proteins?", ["David Baker designs proteins in Seattle."],
    ...                       "David Baker, in Seattle.", model="fake")
    >>> row["verdict"]
    'grounded'
    >>> try:
    ...     assert_grounded("Who designs proteins?", ["David Baker designs proteins in Seattle.",
    ...                     "Seattle is in Washington."], "Linus Pauling, in Pasadena.", model="fake")
    ... except GroundingAssertionError as error:
    ...     print(str(error).splitlines()[0])
    answer is not grounded: consens +0.000 < min_consens +0.020 (verdict 'unsure', q25, model fake)
    """
    __tracebackhide__ = True  # pytest shows the test's line and the message, not this function
    from ragsense.consens import default_bands
    from ragsense.metrics import ConSens

    # One string is one document; any other iterable is read once here (a generator would be spent).
    docs: Any = [contexts] if isinstance(contexts, str) else contexts
    if isinstance(docs, Iterable) and not isinstance(docs, Sequence):
        docs = list(docs)
    model = model if model is not None else _current_model()
    metric = ConSens(model, **_aggregation_option(aggregation))
    threshold = default_bands(metric.aggregation).grounded_at if min_consens is None else min_consens
    _check_number(threshold, "min_consens", low=-1.0, high=1.0)
    row = _score_one(question, docs, answer, metric)
    if float(row["consens"]) >= threshold:
        return row
    if explain and isinstance(docs, Sequence) and len(docs) >= 2:
        row = _score_one(
            question, docs, answer, ConSens(model, attribution=True, **_aggregation_option(aggregation))
        )
    raise GroundingAssertionError(_grounding_message(row, threshold, explain), row, threshold)


def assert_scores(
    result: Evaluation | Mapping[str, Any] | Iterable[Mapping[str, Any]], /, **min_means: float
) -> dict[str, float]:
    """Assert that each named score's mean over the rows is at least its threshold.

    ``result``: an :class:`~ragsense.Evaluation`, one output row, or a list of rows. ``min_means``:
    output field = minimum mean, for any metric's numeric field (``consens=0.02``,
    ``response_adherence=0.8``; a boolean field such as ``correct`` counts as 0/1, so its mean is a
    share). Every row must have a value: a row that the field's metric could not score fails the
    assertion. Returns the means; raises :class:`ScoreAssertionError` listing every field that
    failed, or :class:`~ragsense.errors.ParameterError` for a field no row has.

    >>> from ragsense import evaluate
    >>> run = evaluate([{"question": "Who wrote Hamlet?", "contexts": ["Hamlet is by Shakespeare."],
    ...                  "answer": "Shakespeare wrote Hamlet."}], ["consens"], model="fake", progress=False)
    >>> assert_scores(run, consens=0.02) == {"consens": run.rows[0]["consens"]}
    True
    >>> assert_scores(run, consens=1.0)
    Traceback (most recent call last):
    ...
    ragsense.testing.ScoreAssertionError: 1 of 1 score checks failed (1 row):
      consens: mean +0.997 < +1.000 (1 row)
    """
    __tracebackhide__ = True
    if not min_means:
        raise ParameterError(
            "name at least one score and its minimum mean, e.g. consens=0.02", parameter="min_means"
        )
    rows = _rows_of(result)
    if not rows:
        raise ParameterError("there are no rows to check", parameter="result")
    for name, minimum in min_means.items():
        _check_number(minimum, name)
    means: dict[str, float | None] = {}
    problems: list[str] = []
    for name, minimum in min_means.items():
        if not any(name in row for row in rows):
            available = sorted({k for row in rows for k, v in row.items() if _is_number(v)})
            raise ParameterError(
                f"no row has a field {name!r} (was its metric run?); numeric fields: {', '.join(available)}",
                parameter=name,
            )
        values = [float(row[name]) for row in rows if _is_number(row.get(name))]
        missing = [i for i, row in enumerate(rows) if not _is_number(row.get(name))]
        mean = math.fsum(values) / len(values) if values else None
        means[name] = mean
        if missing:
            first = rows[missing[0]]
            why = "; ".join(_error_text(e) for e in first.get("errors") or []) or f"{name} is null"
            problems.append(
                f"{name}: {len(missing)} of {len(rows)} rows not scored "
                f"(row {first.get('_row', missing[0])}: {why})"
            )
        elif mean is not None and mean < minimum:
            problems.append(f"{name}: mean {mean:+.3f} < {minimum:+.3f} ({_plural(len(values), 'row')})")
    if problems:
        head = f"{len(problems)} of {len(min_means)} score checks failed ({_plural(len(rows), 'row')}):"
        raise ScoreAssertionError("\n".join([head, *("  " + p for p in problems)]), means, dict(min_means))
    return {k: v for k, v in means.items() if v is not None}


# ------------------------------------------------------------------------------------------ helpers


def _aggregation_option(aggregation: Aggregation | str | None) -> dict[str, Any]:
    return {} if aggregation is None else {"aggregation": aggregation}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _check_number(value: Any, name: str, low: float | None = None, high: float | None = None) -> None:
    if isinstance(value, bool) or not _is_number(value):
        raise ParameterError(f"must be a finite number, got {value!r}", parameter=name)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ParameterError(f"must be in [{low}, {high}], got {value!r}", parameter=name)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _error_text(error: Mapping[str, Any]) -> str:
    where = f"{error.get('field')}: " if error.get("field") else ""
    return f"{error.get('metric')}: {where}{error.get('message')}"


def _rows_of(result: Any) -> list[Mapping[str, Any]]:
    if isinstance(result, Mapping):
        return [result]
    rows = getattr(result, "rows", result)  # an Evaluation
    if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
        raise ParameterError(
            f"give an Evaluation, an output row or a list of rows, got {type(result).__name__}",
            parameter="result",
        )
    out = list(rows)
    for row in out:
        if not isinstance(row, Mapping):
            raise ParameterError(f"each row must be a dict, got {type(row).__name__}", parameter="result")
    return out


def _score_one(question: str, contexts: Any, answer: str, metric: Any) -> dict[str, Any]:
    """The output row of ``metric`` on one row, through ``ragsense.evaluate``; raises on a row error."""
    __tracebackhide__ = True
    from ragsense.evaluation import evaluate

    run = evaluate([{"question": question, "contexts": contexts, "answer": answer}], [metric], progress=False)
    row = run.rows[0]
    errors = row.get("errors") or []
    for error in errors:
        if error.get("field"):
            raise InputError(f"cannot score the row: {error.get('message')}", field=str(error["field"]))
    if errors or not _is_number(row.get("consens")):
        detail = "; ".join(_error_text(e) for e in errors) or "no score"
        raise ModelCallError(f"ConSens could not score the row: {detail}")
    return row


def _short(text: str, width: int = _TEXT_WIDTH) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _grounding_message(row: Mapping[str, Any], threshold: float, explain: bool) -> str:
    lines = [
        f"answer is not grounded: consens {row['consens']:+.3f} < min_consens {threshold:+.3f} "
        f"(verdict {row['verdict']!r}, {row['aggregation']}, model {row['model']})"
    ]
    if not explain:
        return lines[0]
    lines.append(f"  question: {_short(row['question'])}")
    lines.append(f"  answer:   {_short(row['answer'])}")
    words = [
        (w["word"], float(w["nll_empty"]) - float(w["nll_context"]))
        for w in row.get("words") or []
        if _is_number(w.get("nll_empty")) and _is_number(w.get("nll_context"))
    ]
    if words:
        weakest = sorted(words, key=lambda item: item[1])[:WEAKEST_WORDS]
        width = max(len(word) for word, _ in weakest)
        lines.append(
            "  weakest words (contrast nll_empty - nll_context; <= 0: the context did not make the word "
            "more likely):"
        )
        lines.extend(f"    {word:<{width}}  {contrast:+.2f}" for word, contrast in weakest)
    attribution = row.get("attribution")
    if attribution:
        contexts = row.get("contexts") or []
        lines.append(
            "  documents the answer rests on (drop when left out, geometric mean; < 0: the answer fits "
            "better without it):"
        )
        for doc in sorted(attribution, key=lambda d: -float(d["drop"])):
            index = int(doc["index"])
            text = _short(contexts[index], 70) if index < len(contexts) else ""
            lines.append(f"    [{index}] drop {float(doc['drop']):+.3f}  {text}")
        if all(float(d["drop"]) <= 0 for d in attribution):
            lines.append("    (none: leaving any one out does not lower the score)")
    for note in row.get("notes") or []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
