"""Verdicts: a grounding score turned into ``grounded`` / ``unsure`` / ``ungrounded``, plus ``refusal``.

A verdict is what the report, the gates, the pytest plugin and the guard act on, so it abstains: a
score between the two band edges is ``unsure`` rather than forced to one side. The edges are
:class:`Bands`: the defaults are chosen on development data (docs/results.md, "Verdicts"), and
``ragsense calibrate`` fits them on a user's own labelled rows and writes them to a JSON file that
every command reads back with ``--bands FILE`` (``bands=`` in Python).

An answer that declines to answer from the context (``ragsense.text.is_refusal``) gets ``refusal``
whatever its score: it states nothing the context could fail to support. :func:`verdict_of` is the
one verdict rule (the scorer, a resumed run and ``assert_scores(bands=...)`` all call it); how every
consumer then treats a refusal is the contract's one refusal rule (:data:`ragsense.contract.REFUSAL`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragsense.contract import REFUSAL
from ragsense.data import write_output
from ragsense.errors import ParameterError

VERDICTS = ("grounded", "unsure", "ungrounded", REFUSAL)
"""Every verdict the grounding score gives."""

BANDS_FORMAT = "ragsense.bands/1"
"""The ``format`` tag of a bands file; a file with another tag is refused, not guessed at."""

MAX_DEPTH = 32
"""How deeply a bands file's JSON may nest (``calibrate`` writes 5 levels): a deeper one is refused
before anything walks it recursively (copying, storing it with the run)."""


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (lists and objects), walked without recursion.

    >>> _depth(1), _depth({"a": [1, {"b": []}]})
    (0, 4)
    """
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list):
            deepest = max(deepest, depth + 1)
            if depth + 1 <= MAX_DEPTH:  # past the limit the answer is known: stop walking
                stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, Mapping) else item))
    return deepest


@dataclass(frozen=True)
class Bands:
    """Where a score becomes a verdict: ``grounded`` at or above ``grounded_at``, ``ungrounded`` below
    ``ungrounded_below``, ``unsure`` in between.

    ``score`` names the aggregation the edges apply to (a bands file fitted on ``q25`` scores must not
    be read against another score). ``origin`` says where the bands came from (``"default"`` or the
    calibration that fitted them); ``fit`` keeps that calibration's figures (precision, coverage, their
    intervals, n), so a run store that records the bands records their evidence too.

    >>> b = Bands("q25", grounded_at=0.1, ungrounded_below=-0.1)
    >>> [b.verdict(x) for x in (0.5, 0.0, -0.5)]
    ['grounded', 'unsure', 'ungrounded']
    >>> Bands.from_dict(b.to_dict()) == b
    True
    """

    score: str
    grounded_at: float
    ungrounded_below: float
    origin: str = "default"
    fit: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("grounded_at", "ungrounded_below"):
            value = getattr(self, name)
            try:
                finite = (
                    isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                )
            except OverflowError:  # an integer past float's range (a 400-digit number in a bands file)
                finite = False
            if not finite:
                big = isinstance(value, int) and value.bit_length() > 64
                shown = f"an integer of {value.bit_length()} bits" if big else repr(value)
                raise ParameterError(f"must be a finite number, got {shown}", parameter=name)
        if self.ungrounded_below > self.grounded_at:
            raise ParameterError(
                f"ungrounded_below ({self.ungrounded_below}) is above grounded_at ({self.grounded_at})",
                parameter="bands",
            )
        if not isinstance(self.score, str) or not self.score:
            raise ParameterError(
                f"must name the score the bands apply to, got {self.score!r}", parameter="score"
            )

    def verdict(self, score: float) -> str:
        """The band of ``score``: ``grounded``, ``unsure`` or ``ungrounded``."""
        if score >= self.grounded_at:
            return "grounded"
        return "unsure" if score >= self.ungrounded_below else "ungrounded"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written by ``ragsense calibrate`` (with the ``format`` tag)."""
        fields = asdict(self)
        fields["fit"] = dict(self.fit)
        return {"format": BANDS_FORMAT, **fields}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "bands") -> Bands:
        """Bands back from :meth:`to_dict` output; a wrong or missing field is a clear error naming it."""
        if not isinstance(data, Mapping):
            raise ParameterError(
                f"{where}: expected a JSON object, got {type(data).__name__}", parameter="bands"
            )
        if _depth(data) > MAX_DEPTH:
            raise ParameterError(f"{where}: nested deeper than {MAX_DEPTH} levels", parameter="bands")
        tag = data.get("format")
        if tag != BANDS_FORMAT:
            raise ParameterError(
                f"{where}: not a ragsense bands file (format {tag!r}, expected {BANDS_FORMAT!r}); "
                "make one with `ragsense calibrate`",
                parameter="bands",
            )
        missing = [k for k in ("score", "grounded_at", "ungrounded_below") if k not in data]
        if missing:
            raise ParameterError(f"{where}: missing field(s) {', '.join(missing)}", parameter="bands")
        fit = data.get("fit", {})
        try:
            return cls(
                score=data["score"],
                grounded_at=data["grounded_at"],
                ungrounded_below=data["ungrounded_below"],
                origin=str(data.get("origin", "file")),
                fit=dict(fit) if isinstance(fit, Mapping) else {},
            )
        except ParameterError as exc:
            raise ParameterError(f"{where}: {exc}", parameter="bands") from None

    def save(self, path: str | Path, *, overwrite: bool = False) -> None:
        """Write the bands as JSON (the file ``--bands`` reads).

        An existing file is refused (:class:`~ragsense.errors.OutputExistsError`) unless
        ``overwrite=True``: the rule of ``Evaluation.save`` and ``ragsense calibrate -o``.
        """
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"
        write_output(path, text, overwrite=overwrite, what="bands file")

    @classmethod
    def load(cls, path: str | Path) -> Bands:
        """Read a bands file; a missing, unreadable or malformed file raises a ParameterError naming it."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            raise ParameterError(f"cannot read bands file {path}: {reason}", parameter="bands") from None
        except UnicodeDecodeError as exc:
            raise ParameterError(
                f"bands file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})", parameter="bands"
            ) from None
        try:
            data = json.loads(text)
        except RecursionError:
            raise ParameterError(
                f"bands file {path}: nested deeper than {MAX_DEPTH} levels", parameter="bands"
            ) from None
        except ValueError as exc:  # not JSON, or an integer of more digits than Python converts
            raise ParameterError(f"bands file {path} is not JSON: {exc}", parameter="bands") from None
        return cls.from_dict(data, where=f"bands file {path}")


def verdict_of(score: float, refusal: bool, bands: Bands) -> str:
    """The one verdict rule: ``refusal`` for an answer that declines to answer, else the band of
    ``score`` under ``bands``.

    >>> b = Bands("support", grounded_at=0.83, ungrounded_below=-0.23)
    >>> verdict_of(-0.61, True, b), verdict_of(-0.61, False, b), verdict_of(0.9, False, b)
    ('refusal', 'ungrounded', 'grounded')
    """
    return REFUSAL if refusal else bands.verdict(score)


def resolve_bands(bands: Bands | str | Path | None, default: Bands | None = None) -> Bands | None:
    """``bands`` as given (an object, or the path of a bands file, read here), or ``default`` when None."""
    if bands is None:
        return default
    if isinstance(bands, Bands):
        return bands
    return Bands.load(bands)


def weakest_words(words: Sequence[Mapping[str, Any]], n: int) -> list[dict[str, Any]]:
    """The ``n`` least supported words: those the context does not state first, then by how little the
    context raised their likelihood (``nll_empty - nll_context``, lowest first).

    >>> weakest_words([{"word": "a", "start": 0, "end": 1, "nll_empty": 2.0, "nll_context": 1.0},
    ...                {"word": "b", "start": 2, "end": 3, "nll_empty": 1.0, "nll_context": 1.5}], 1)
    [{'word': 'b', 'start': 2, 'end': 3, 'contrast': -0.5, 'stated': False}]
    >>> [w["word"] for w in weakest_words([
    ...     {"word": "a", "start": 0, "end": 1, "nll_empty": 1.0, "nll_context": 3.0, "stated": True},
    ...     {"word": "b", "start": 2, "end": 3, "nll_empty": 1.0, "nll_context": 1.5}], 2)]
    ['b', 'a']
    """
    scored = [
        {
            "word": w["word"],
            "start": w["start"],
            "end": w["end"],
            "contrast": w["nll_empty"] - w["nll_context"],
            "stated": bool(w.get("stated", False)),
        }
        for w in words
    ]
    # A word the context states is supported whatever its contrast (the default score counts it so), so it
    # comes after every unstated word. Ties keep answer order (sorted is stable): deterministic.
    return sorted(scored, key=lambda w: (w["stated"], w["contrast"]))[:n]
