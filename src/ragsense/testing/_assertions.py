"""``assert_grounded`` and ``assert_scores``: test assertions on top of ``ragsense.evaluate``.

Only the standard library and ``ragsense.errors`` are imported here at import time, so the pytest
plugin (which imports this package) costs nothing beyond ``import ragsense``; the scoring code is
imported inside the functions.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsense.errors import InputError, ModelCallError, ParameterError, RagsenseError

if TYPE_CHECKING:
    from ragsense.consens import Aggregation, Bands
    from ragsense.evaluation import Evaluation
    from ragsense.models import ModelSpec

WEAKEST_WORDS = 5
"""How many answer words a failure message lists (those the context helped least)."""
LISTED_ROWS = 10
"""How many failing rows an ``assert_scores`` message lists per check (then "... and N more")."""
DEFAULT_MAX_SHARE: Mapping[str, float] = {"ungrounded": 0.0}
"""What ``assert_scores`` checks when given no ``max_share``: no row may be ``ungrounded``."""
_TEXT_WIDTH = 100

# The model ``assert_grounded(model=None)`` uses while a pytest session with the plugin runs (its
# ``--ragsense-model`` / ``ragsense_model``); None outside pytest: the library default.
_session_model: str | None = None
# The session's verdict bands (``--ragsense-bands`` / ``ragsense_bands``); None: ConSens's defaults.
_session_bands: Bands | None = None


def _set_session_model(name: str | None) -> str | None:
    """Set the pytest session's model; returns the one it replaces (the plugin restores it)."""
    global _session_model
    previous, _session_model = _session_model, name
    return previous


def _set_session_bands(bands: Bands | None) -> Bands | None:
    """Set the pytest session's bands; returns the ones they replace (the plugin restores them)."""
    global _session_bands
    previous, _session_bands = _session_bands, bands
    return previous


def _current_model() -> str:
    """The model name ``assert_grounded`` uses when given none: the pytest session's model
    (``--ragsense-model``, ini ``ragsense_model``) while the plugin runs, else ragsense's default."""
    if _session_model is not None:
        return _session_model
    from ragsense.models import DEFAULT_MODEL

    return DEFAULT_MODEL


class GroundingAssertionError(RagsenseError, AssertionError):
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


class ScoreAssertionError(RagsenseError, AssertionError):
    """``assert_scores`` failed: a verdict's share is above its maximum, a score's mean is below its
    minimum, or rows were not scored.

    ``shares`` has the share of every checked verdict (None when no row has a verdict), ``max_share``
    the maximums asked for; ``means`` the mean of every checked field over the rows that have it,
    ``thresholds`` the minimums asked for.
    """

    def __init__(
        self,
        message: str,
        means: dict[str, float | None],
        thresholds: dict[str, float],
        shares: dict[str, float | None] | None = None,
        max_share: dict[str, float] | None = None,
    ) -> None:
        super().__init__(message)
        self.means = means
        self.thresholds = thresholds
        self.shares = dict(shares or {})
        self.max_share = dict(max_share or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.means, self.thresholds, self.shares, self.max_share)


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
    bands: Bands | str | os.PathLike[str] | None = None,
    explain: bool = True,
) -> dict[str, Any]:
    """Assert that ``answer`` is grounded in ``contexts``: its ConSens score is at least ``min_consens``.

    The row is scored by :func:`ragsense.evaluate` with the ConSens metric. ``bands``: the verdict
    bands (a :class:`~ragsense.consens.Bands` or the path of a file ``ragsense calibrate`` wrote;
    default: the pytest session's ``--ragsense-bands`` / ini ``ragsense_bands`` under the plugin, else
    the default bands of ``aggregation``, ``ragsense.consens.default_bands``); given bands also set the
    aggregation when ``aggregation`` is not given. ``min_consens`` defaults to the bands' lower edge of
    ``grounded``, so by default the verdict must be ``grounded``; a ``refusal`` passes whatever its
    score (the one refusal rule, docs/metrics.md). ``model`` defaults to the pytest session's
    ``--ragsense-model`` (ini ``ragsense_model``) under the plugin, else ragsense's default model
    (``smollm2-135m``); models are loaded once per process.

    Returns the scored output row (``consens``, ``verdict``, ``words``, ... as in docs/metrics.md).
    On failure raises :class:`GroundingAssertionError` whose message has the score, threshold and
    verdict, and with ``explain`` the answer's weakest words (those the context does not state first,
    each group by lowest contrast ``nll_empty - nll_context``; a stated word is marked) and, for two
    or more contexts, how much the score drops when each document is left out (a second, attribution
    run, made only on failure). A row that cannot be scored (an empty answer, no contexts) raises
    :class:`~ragsense.errors.InputError` naming the field; a model failure raises
    :class:`~ragsense.errors.ModelCallError`.

    >>> row = assert_grounded("Who designs proteins?", ["David Baker designs proteins in Seattle."],
    ...                       "David Baker, in Seattle.", model="fake")
    >>> row["verdict"]
    'grounded'
    >>> try:
    ...     assert_grounded("Who designs proteins?", ["David Baker designs proteins in Seattle.",
    ...                     "Seattle is in Washington."], "Linus Pauling, in Pasadena.", model="fake")
    ... except GroundingAssertionError as error:
    ...     print(str(error).splitlines()[0])
    answer is not grounded: consens -0.462 < min_consens +0.830 (verdict 'ungrounded', support, model fake)
    """
    __tracebackhide__ = True  # pytest shows the test's line and the message, not this function
    from ragsense.consens import ConSens
    from ragsense.contract import is_refusal_row

    # One string is one document; any other iterable is read once here (a generator would be spent).
    docs: Any = [contexts] if isinstance(contexts, str) else contexts
    if isinstance(docs, Iterable) and not isinstance(docs, Sequence):
        docs = list(docs)
    model = model if model is not None else _current_model()
    chosen = _bands_of(bands) if bands is not None else _session_bands
    options = _aggregation_option(aggregation if aggregation is not None or chosen is None else chosen.score)
    metric = ConSens(model, bands=chosen, **options)
    threshold = metric.bands.grounded_at if min_consens is None else min_consens
    _check_number(threshold, "min_consens", low=-1.0, high=1.0)
    row = _score_one(question, docs, answer, metric)
    # The one refusal rule (ragsense.contract.REFUSAL): no score threshold applies to a refusal.
    if is_refusal_row(row) or float(row["consens"]) >= threshold:
        return row
    if explain and isinstance(docs, Sequence) and len(docs) >= 2:
        row = _score_one(question, docs, answer, ConSens(model, attribution=True, bands=chosen, **options))
    raise GroundingAssertionError(_grounding_message(row, threshold, explain, metric.bands), row, threshold)


def assert_scores(
    result: Evaluation | Mapping[str, Any] | Iterable[Mapping[str, Any]],
    /,
    *,
    max_share: Mapping[str, float] | None = None,
    bands: Bands | str | os.PathLike[str] | None = None,
    gate_refusals: bool = False,
    **min_means: float,
) -> dict[str, float]:
    """Assert that no verdict is more common than allowed and that each named score's mean is high
    enough, over the rows of ``result``.

    ``result``: an :class:`~ragsense.Evaluation`, one output row, or a list of rows.

    ``max_share``: verdict = the largest share of rows that may have it (``{"ungrounded": 0.05}``;
    ``"errors"`` is the share of rows with any error), among the rows with a verdict. Default
    (:data:`DEFAULT_MAX_SHARE`): no row may be ``ungrounded``, checked whenever the rows have ConSens
    verdicts; ``max_share={}`` checks none. Verdicts are counted rather than scores averaged because a
    mean can pass while most rows fail: rows scoring 0.95, 0.9, -0.25, -0.3, -0.35 average +0.19,
    and three of the five are ``ungrounded``. ``bands``: re-read each ConSens row's verdict from its score
    with these bands (a :class:`~ragsense.consens.Bands` or a bands file; a ``refusal`` stays one)
    before counting, e.g. bands ``ragsense calibrate`` fitted on your own data.

    ``min_means``: output field = minimum mean, for any metric's numeric field (``consens=0.1``,
    ``response_adherence=0.8``; a boolean field such as ``correct`` counts as 0/1, so its mean is a
    share). Every row must have a value: a row that the field's metric could not score fails the
    assertion, as does a row with no verdict when a share is checked. A refusal is left out of the
    means (and counted in the shares), by the one refusal rule (docs/metrics.md, "Refusals"), unless
    ``gate_refusals=True``.

    Returns each observed value: a mean per score, a share per verdict. Raises
    :class:`ScoreAssertionError` listing every failed check with the share and its 95% Wilson
    interval (or the mean) and the ids, verdicts and scores of the rows at fault; raises
    :class:`~ragsense.errors.ParameterError` for a field or verdict that no row has.

    >>> rows = [{"id": f"r{i}", "consens": c, "verdict": v} for i, (c, v) in enumerate(
    ...     [(0.95, "grounded"), (0.9, "grounded"), (-0.25, "ungrounded"), (-0.3, "ungrounded"),
    ...      (-0.35, "ungrounded")])]
    >>> {k: round(v, 3) for k, v in assert_scores(rows, max_share={}, consens=0.1).items()}  # passes
    {'consens': 0.19}
    >>> assert_scores(rows)  # the default: no ungrounded row
    Traceback (most recent call last):
    ...
    ragsense.testing.ScoreAssertionError: 1 of 1 checks failed (5 rows):
      share ungrounded 60% [23%, 88%] (3 of 5) > 0% (95% Wilson interval)
        row r2: verdict ungrounded, consens -0.250
        row r3: verdict ungrounded, consens -0.300
        row r4: verdict ungrounded, consens -0.350
    """
    __tracebackhide__ = True
    from ragsense.contract import is_refusal_row
    from ragsense.runs import ERRORS, Gate, check_gates

    rows = _rows_of(result)
    if not rows:
        raise ParameterError("there are no rows to check", parameter="result")
    if bands is not None:
        rows = _with_bands(rows, _bands_of(bands))
    fields = _verdict_fields(result, rows)
    known = _verdict_values(result, rows, fields)
    if max_share is None:
        limits = {k: v for k, v in DEFAULT_MAX_SHARE.items() if k in known and fields}
    else:
        limits = dict(max_share)
    for name, limit in limits.items():
        _check_number(limit, f"max_share[{name!r}]", low=0.0, high=1.0)
        if name != ERRORS and (not fields or name not in known):
            raise ParameterError(
                f"no row can have the verdict {name!r} (was its metric run?); verdicts: "
                f"{', '.join([*sorted(known), ERRORS])}",
                parameter="max_share",
            )
    for name, minimum in min_means.items():
        _check_number(minimum, name)
    if not min_means and not limits:
        raise ParameterError(
            "nothing to check: the rows have no verdict; name a score and its minimum mean, e.g. "
            "consens=0.1, or a verdict and its maximum share, max_share={'ungrounded': 0.05}",
            parameter="min_means",
        )
    observed: dict[str, float] = {}
    shares: dict[str, float | None] = {}
    problems: list[str] = []
    if limits:
        unjudged = [i for i, row in enumerate(rows) if all(row.get(f) is None for f in fields)]
        if fields and unjudged and any(name != ERRORS for name in limits):
            problems.append(_not_scored("verdict", rows, unjudged, f"no {' or '.join(fields)}"))
        gates = [Gate("share", name, limit) for name, limit in limits.items()]
        for gate in check_gates(gates, rows, verdict_fields=fields):
            shares[gate.gate.name] = gate.value
            if gate.value is not None:
                observed[gate.gate.name] = gate.value
            if not gate.passed:
                name = gate.gate.name
                culprits = [
                    i
                    for i, r in enumerate(rows)
                    if (r.get("errors") if name == ERRORS else _has_verdict(r, fields, name))
                ]
                problems.append(gate.message + _row_lines(rows, culprits, fields))
    means: dict[str, float | None] = {}
    # The one refusal rule: a refusal is left out of every mean unless asked for (gate_refusals).
    refusal = [not gate_refusals and is_refusal_row(r, fields or ["verdict"]) for r in rows]
    for name, minimum in min_means.items():
        if not any(name in row for row in rows):
            available = sorted({k for row in rows for k, v in row.items() if _is_number(v)})
            raise ParameterError(
                f"no row has a field {name!r} (was its metric run?); numeric fields: {', '.join(available)}",
                parameter=name,
            )
        values = [float(r[name]) for i, r in enumerate(rows) if not refusal[i] and _is_number(r.get(name))]
        missing = [i for i, row in enumerate(rows) if not _is_number(row.get(name))]
        mean = math.fsum(values) / len(values) if values else None
        means[name] = mean
        if mean is not None:
            observed[name] = mean
        if missing:
            problems.append(_not_scored(name, rows, missing, f"{name} is null"))
        elif mean is not None and mean < minimum:
            low = [i for i, row in enumerate(rows) if not refusal[i] and float(row[name]) < minimum]
            problems.append(
                f"{name}: mean {mean:+.3f} < {minimum:+.3f} ({_plural(len(values), 'row')})"
                + _row_lines(rows, low, fields, name)
            )
    if problems:
        checks = len(limits) + len(min_means)
        head = f"{len(problems)} of {checks} checks failed ({_plural(len(rows), 'row')}):"
        raise ScoreAssertionError(
            "\n".join([head, *("  " + p for p in problems)]), means, dict(min_means), shares, limits
        )
    return observed


# ------------------------------------------------------------------------------------------ helpers


def _bands_of(bands: Bands | str | os.PathLike[str]) -> Bands:
    """Bands as given, or read from a bands file (a ParameterError names a bad one)."""
    from ragsense.consens import Bands

    return bands if isinstance(bands, Bands) else Bands.load(Path(bands))


def _with_bands(rows: list[Mapping[str, Any]], bands: Bands) -> list[Mapping[str, Any]]:
    """Copies of the rows with each ConSens verdict read again from its score under ``bands`` (the one
    verdict rule, ``ragsense.consens.rederived_row``: a refusal stays one)."""
    from ragsense.consens import rederived_row

    if not any(_is_number(r.get("consens")) and r.get("verdict") is not None for r in rows):
        raise ParameterError(
            "bands apply to ConSens rows (consens and verdict); none here", parameter="bands"
        )
    out: list[Mapping[str, Any]] = []
    for index, row in enumerate(rows):
        try:
            out.append(row if row.get("verdict") is None else rederived_row(row, bands))
        except ParameterError as exc:
            raise ParameterError(f"row {_row_id(row, index)}: {exc.reason}", parameter="bands") from None
    return out


def _verdict_fields(result: Any, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fields holding verdicts: each metric's ``verdict`` field of an Evaluation; in plain rows,
    ConSens's ``verdict`` when some row has it."""
    metrics = getattr(result, "metrics", None)
    if metrics is not None and not isinstance(result, Mapping):
        return [str(m.verdict) for m in metrics if getattr(m, "verdict", None)]
    return ["verdict"] if any(row.get("verdict") is not None for row in rows) else []


def _verdict_values(result: Any, rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> set[str]:
    """Every verdict the rows could have: those declared by the metrics (ConSens's for plain rows),
    and those present."""
    from ragsense.consens import VERDICTS

    metrics = getattr(result, "metrics", None)
    if metrics is not None and not isinstance(result, Mapping):
        declared = {str(v) for m in metrics for v in getattr(m, "verdict_values", ())}
    else:
        declared = set(VERDICTS) if fields else set()
    return declared | {str(row[f]) for row in rows for f in fields if row.get(f) is not None}


def _has_verdict(row: Mapping[str, Any], fields: Sequence[str], name: str) -> bool:
    return any(str(row.get(f)) == name for f in fields)


def _row_id(row: Mapping[str, Any], index: int) -> str:
    return str(row.get("id", row.get("_row", index)))


def _row_lines(
    rows: Sequence[Mapping[str, Any]], indices: Sequence[int], fields: Sequence[str], score: str = "consens"
) -> str:
    """One line per row at fault (the first :data:`LISTED_ROWS`): its id, verdicts and score."""
    lines = []
    for i in indices[:LISTED_ROWS]:
        row = rows[i]
        parts = [f"{f} {row.get(f)}" for f in fields if row.get(f) is not None]
        if _is_number(row.get(score)):
            parts.append(f"{score} {float(row[score]):+.3f}")
        if row.get("errors"):
            parts.append("; ".join(_error_text(e) for e in row["errors"]))
        lines.append(f"    row {_row_id(row, i)}: {', '.join(parts) or 'no verdict or score'}")
    if len(indices) > LISTED_ROWS:
        lines.append(f"    ... and {len(indices) - LISTED_ROWS} more")
    return "".join("\n" + line for line in lines)


def _not_scored(name: str, rows: Sequence[Mapping[str, Any]], missing: Sequence[int], default: str) -> str:
    first = rows[missing[0]]
    why = "; ".join(_error_text(e) for e in first.get("errors") or []) or default
    return f"{name}: {len(missing)} of {len(rows)} rows not scored (row {_row_id(first, missing[0])}: {why})"


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


def _grounding_message(row: Mapping[str, Any], threshold: float, explain: bool, bands: Bands) -> str:
    from ragsense.consens import explain_row, weakest_words

    lines = [
        f"answer is not grounded: consens {row['consens']:+.3f} < min_consens {threshold:+.3f} "
        f"(verdict {row['verdict']!r}, {row['aggregation']}, model {row['model']})"
    ]
    if not explain:
        return lines[0]
    lines.append(f"  question: {_short(row['question'])}")
    lines.append(f"  answer:   {_short(row['answer'])}")
    # The one order of ragsense.consens.weakest_words (the guard's, the CLI's, the report's): words the
    # context does not state first (a stated word counts as supported), then by contrast.
    scored = [
        w
        for w in row.get("words") or []
        if _is_number(w.get("nll_empty")) and _is_number(w.get("nll_context"))
    ]
    weakest = weakest_words(scored, WEAKEST_WORDS)
    if weakest:
        width = max(len(w["word"]) for w in weakest)
        lines.append(
            "  weakest words (contrast nll_empty - nll_context; <= 0: the context did not make the word "
            "more likely):"
        )
        # A stated word is marked: it counts as supported whatever its contrast.
        stated = {True: "  stated in the context", False: ""}
        lines.extend(f"    {w['word']:<{width}}  {w['contrast']:+.2f}{stated[w['stated']]}" for w in weakest)
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
    # The verdict in the words JUnit rows and the guard's `reason` use (one function builds them).
    lines.append(f"  reason: {explain_row(row, bands)}")
    return "\n".join(lines)
