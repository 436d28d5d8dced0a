"""Fitting a page in its size target: how much the rows and the documents each get.

The rows are built once (:func:`ragsense.report._data.build_payload`); a smaller page is derived
from them without reading the rows again. The page must fit ``max_bytes``:

1. **The rows come first** (questions, answers with their word scores, scores, attribution, VERA's
   statements): they get ``max_bytes`` less a reserve for the documents (what the documents need at
   ``document_floor`` characters each, at most :data:`DOCUMENT_SHARE` of the page). If they do not
   fit, their lean form is used (word log-likelihoods in hundredths of a nat instead of thousandths,
   no ConSens score under every aggregation), then the answer and question budgets are divided by
   1.5, again and again, up to :data:`MAX_SHRINKS` times (from the third, at most 100 words per answer
   keep their scores).
2. **The documents get what is left**: the largest common cap (the longest cut first) whose
   compressed documents fit, never more than their character budget gives; below ``document_min``
   characters they are left out (their lengths stay).
3. **VERA's per-sentence context decisions** go in when the documents keep at least
   ``document_floor`` characters and there is room left for them.

>>> [v.describe() for v in row_variants()][:3]
['full rows', 'lean rows', 'lean rows, answer budget / 1.5']
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragsense._version import __version__
from ragsense.report._data import BuildStats, Payload, document_cap
from ragsense.report._page import assemble, json_for_script
from ragsense.report._texts import ReportLimits, fair_cap

SHRINK = 1.5
"""Each smaller form of the rows divides the answer and question budgets by this."""

MAX_SHRINKS = 10
"""The most divisions of the answer and question budgets before the page is written as it is."""

WORDS_WHEN_SMALL = 100
"""At most this many words per answer keep their scores from the third division on."""

DOCUMENT_SHARE = 0.25
"""At most this share of the page is kept for the documents before the rows are made smaller."""

COMPRESSION = 6
"""gzip level of the embedded data (9 is a few percent smaller and several times slower)."""

SAMPLE = 400
"""Sizes of longer lists are estimated from this many evenly spaced items (see :func:`estimate`)."""

MARGIN = 1.03
"""Estimates are raised by this factor; the page is measured before it is returned."""


@dataclass(frozen=True)
class Step:
    """One configuration of the page: what is embedded."""

    document_cap: int = 0
    context: bool = True
    lean: bool = False
    shrinks: int = 0
    """How many times the answer and question budgets were divided by :data:`SHRINK`."""

    def describe(self) -> str:
        parts = ["lean rows" if self.lean else "full rows"]
        if self.shrinks:
            parts.append(f"answer budget / {SHRINK**self.shrinks:.3g}")
        return ", ".join(parts)


def row_variants() -> Iterator[Step]:
    """The rows' forms, from the largest to the smallest."""
    yield Step()
    yield Step(lean=True)
    for shrinks in range(1, MAX_SHRINKS + 1):
        yield Step(lean=True, shrinks=shrinks)


def _decode_words(flat: Sequence[Any]) -> list[tuple[int, int, Any, Any]]:
    out, position = [], 0
    for k in range(0, len(flat) - 3, 4):
        start = position + flat[k]
        end = start + flat[k + 1]
        out.append((start, end, flat[k + 2], flat[k + 3]))
        position = end
    return out


def _centi(value: Any) -> Any:
    return None if value is None else round(value / 10)


@dataclass
class Shrunk:
    """Rows derived for a smaller page, and what was cut to get them."""

    rows: list[list[Any]]
    answer_cap: int
    question_cap: int
    answers_cut: int = 0
    questions_cut: int = 0
    words_left_out: int = 0


def caps(rows: Sequence[Sequence[Any]], step: Step, limits: ReportLimits) -> tuple[int, int, int | None]:
    """The answer cap, question cap and words per answer of ``step`` (two steps with the same caps
    give the same rows)."""
    if not step.shrinks:
        return limits.answer_max, limits.question_max, None
    views = [v for entry in rows for v in entry[1:] if v]
    factor = SHRINK**step.shrinks
    answer_cap = fair_cap(
        (v.get("an") or len(v.get("a", "")) for v in views),
        int(limits.answer_budget / factor),
        limits.answer_min,
        limits.answer_max,
    )
    question_cap = fair_cap(
        (v.get("qn") or len(v.get("q", "")) for v in views),
        int(limits.question_budget / factor),
        limits.question_min,
        limits.question_max,
    )
    return answer_cap, question_cap, WORDS_WHEN_SMALL if step.shrinks >= 3 else None


def shrink_rows(rows: Sequence[Sequence[Any]], step: Step, limits: ReportLimits) -> Shrunk:
    """``rows`` (as built) made smaller for ``step``: lean values, shorter answers and questions."""
    answer_cap, question_cap, words_max = caps(rows, step, limits)
    out = Shrunk([], answer_cap, question_cap)
    for entry in rows:
        new: list[Any] = [entry[0]]
        for view in entry[1:]:
            new.append(
                None if view is None else _shrink_view(view, step, answer_cap, question_cap, words_max, out)
            )
        out.rows.append(new)
    return out


def _shrink_view(
    view: dict[str, Any], step: Step, answer_cap: int, question_cap: int, words_max: int | None, out: Shrunk
) -> dict[str, Any]:
    v = dict(view)
    for key, full_key, cap in (("q", "qn", question_cap), ("a", "an", answer_cap)):
        text = v.get(key, "")
        if len(text) > cap:
            v[key] = text[:cap]
            v[full_key] = v.get(full_key) or len(text)
            if key == "q":
                out.questions_cut += view.get("qn") is None
            else:
                out.answers_cut += view.get("an") is None
    if "w" in v and (step.lean or len(v.get("a", "")) < len(view.get("a", "")) or words_max is not None):
        words = _decode_words(v["w"])
        kept = [w for w in words if w[1] <= len(v.get("a", ""))]
        if words_max is not None:
            kept = kept[:words_max]
        flat: list[Any] = []
        position = 0
        for start, end, nc, ne in kept:
            flat += [start - position, end - start, *((_centi(nc), _centi(ne)) if step.lean else (nc, ne))]
            position = end
        v["w"] = flat
        if len(kept) < len(words):
            v["wn"] = (v.get("wn") or 0) + len(words) - len(kept)
            out.words_left_out += len(words) - len(kept)
    if step.lean and "c" in v and "ba" in v["c"]:
        v["c"] = {k: x for k, x in v["c"].items() if k != "ba"}
    return v


# ---------------------------------------------------------------------------------------- the page


def encode(value: Any, compress: bool) -> tuple[str, str]:
    """``(text, encoding)``: JSON safe in a ``<script>`` element, or its gzip in base64."""
    if not compress:
        return json_for_script(value), "json"
    raw = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    packed = gzip.compress(raw, compresslevel=COMPRESSION, mtime=0)
    return base64.b64encode(packed).decode("ascii"), "gzip-base64"


def estimate(values: Sequence[Any], compress: bool) -> int:
    """About how many bytes ``encode(values)`` takes: for a long list, measured on an evenly spaced
    sample and scaled (each row is far longer than gzip's 32 KB window is wide in rows, so the
    compressed size grows with the rows nearly in proportion), times :data:`MARGIN`.

    >>> rows = [{"x": k} for k in range(10)]
    >>> estimate(rows, compress=True) == len(encode(rows, compress=True)[0])
    True
    """
    if not compress or len(values) <= 2 * SAMPLE:
        return len(encode(list(values), compress)[0])
    step = _prime_at_least(len(values) // SAMPLE)  # a prime stride: no aliasing with repeating rows
    sample = list(values[::step])
    return int(len(encode(sample, compress)[0]) * len(values) / len(sample) * MARGIN)


def _prime_at_least(n: int) -> int:
    """
    >>> _prime_at_least(25), _prime_at_least(2)
    (29, 2)
    """
    n = max(2, n)
    while any(n % k == 0 for k in range(2, int(n**0.5) + 1)):
        n += 1
    return n


@dataclass(frozen=True)
class Report:
    """A rendered page and what its size policy did: ``stats`` (caps, what was cut) and ``step`` (the
    configuration that fits)."""

    html: str
    stats: BuildStats
    limits: ReportLimits
    step: Step

    @property
    def size(self) -> int:
        """The page's size in bytes (UTF-8)."""
        return len(self.html.encode("utf-8"))


class _Fitter:
    def __init__(
        self, payload: Payload, limits: ReportLimits, meta: dict[str, Any], title: str, compress: bool
    ) -> None:
        self.payload, self.limits, self.meta, self.title, self.compress = (
            payload,
            limits,
            meta,
            title,
            compress,
        )
        self._rows: tuple[tuple[bool, int], Shrunk | None, list[Any]] | None = None
        self._docs: dict[int, tuple[list[Any], int]] = {}
        self._sizes: dict[Any, int] = {}
        self._encoded: dict[Any, tuple[str, str]] = {}

    def rows(self, step: Step) -> tuple[Shrunk | None, list[Any]]:
        key = (step.lean, step.shrinks)
        if self._rows is None or self._rows[0] != key:
            shrunk = shrink_rows(self.payload.rows, step, self.limits) if step.lean or step.shrinks else None
            self._rows = (key, shrunk, self.payload.rows if shrunk is None else shrunk.rows)
        return self._rows[1], self._rows[2]

    def docs(self, cap: int) -> tuple[list[Any], int]:
        if cap not in self._docs:
            self._docs[cap] = self.payload.documents_at(cap)
        return self._docs[cap]

    def _values(self, what: str, step: Step) -> list[Any]:
        if what == "rows":
            return self.rows(step)[1]
        if what == "docs":
            return self.docs(step.document_cap)[0]
        return self.payload.context

    @staticmethod
    def _key(what: str, step: Step) -> Any:
        return {"rows": (what, step.lean, step.shrinks), "docs": (what, step.document_cap)}.get(what, what)

    def size(self, what: str, step: Step) -> int:
        """The bytes of one part, estimated (long lists) or measured (whose encoding is kept)."""
        key = self._key(what, step)
        if key not in self._sizes:
            values = self._values(what, step)
            if self.compress and len(values) > 2 * SAMPLE:
                self._sizes[key] = estimate(values, self.compress)
            else:
                self._encoded[key] = encode(values, self.compress)
                self._sizes[key] = len(self._encoded[key][0])
        return self._sizes[key]

    def encoded(self, what: str, step: Step) -> tuple[str, str]:
        key = self._key(what, step)
        if key not in self._encoded:
            self._encoded[key] = encode(self._values(what, step), self.compress)
        return self._encoded[key]

    def document_cap_for(self, room: int, ceiling: int) -> int:
        """The largest document cap (at most ``ceiling``) whose documents take ``room`` bytes or
        fewer, by the secant rule on the bytes each embedded character costs."""
        size = self.size("docs", Step(ceiling))
        if size <= room:
            return ceiling
        lengths = [len(d) for d in self.payload.documents]
        base = self.size("docs", Step(0))  # the documents' lengths alone
        cap = ceiling
        for _ in range(8):
            chars = max(1, sum(min(n, cap) for n in lengths))
            per_char = max(1e-6, (size - base) / chars)
            cap = fair_cap(lengths, max(0, int(0.98 * (room - base) / per_char)), 0, max(0, cap - 1))
            if cap < min(ceiling, self.limits.document_min):
                return 0  # a few characters of each document would say nothing: leave them out
            size = self.size("docs", Step(cap))
            if size <= room:
                return cap
        return 0

    def choose(self, budget: int) -> Step:
        ceiling = document_cap(self.payload.documents, self.limits)
        floor = min(ceiling, self.limits.document_floor)
        reserve = min(self.size("docs", Step(floor)), int(self.limits.max_bytes * DOCUMENT_SHARE))
        variant, seen = Step(), set()
        for candidate in row_variants():
            key = (candidate.lean, caps(self.payload.rows, candidate, self.limits))
            if key in seen:  # the caps are at their floors: the same rows again
                continue
            seen.add(key)
            variant = candidate
            if self.size("rows", variant) <= budget - reserve:
                break
        room = budget - self.size("rows", variant)
        cap = self.document_cap_for(room, ceiling)
        left = room - self.size("docs", Step(cap))
        n_decisions = sum(len(d or []) for pair in self.payload.context for d in pair)
        # Context decisions: at least ~2 bytes each, so a cheap bound comes before measuring them.
        context = (
            cap >= floor and n_decisions > 0 and 2 * n_decisions <= left and self.size("ctx", Step()) <= left
        )
        return replace(variant, document_cap=cap, context=context)

    def page(self, step: Step, over: bool = False) -> tuple[str, BuildStats]:
        shrunk = self.rows(step)[0]
        n_cut = self.docs(step.document_cap)[1]
        stats = replace(self.payload.stats, document_cap=step.document_cap, documents_cut=n_cut)
        if not step.context:
            stats.decisions_left_out = sum(len(d or []) for pair in self.payload.context for d in pair)
        if shrunk is not None:
            stats.answer_cap = min(stats.answer_cap, shrunk.answer_cap)
            stats.question_cap = min(stats.question_cap, shrunk.question_cap)
            stats.answers_cut += shrunk.answers_cut
            stats.questions_cut += shrunk.questions_cut
            stats.words_left_out += shrunk.words_left_out
        self.meta["limits"] = (
            self.limits.to_dict()
            | stats.to_dict()
            | {"context_decisions": step.context, "lean": step.lean, "word_scale": 100 if step.lean else 1000}
            | {"step": step.describe(), "over": over}
        )
        blobs = [
            ("ragsense-rows", *self.encoded("rows", step)),
            ("ragsense-docs", *self.encoded("docs", step)),
        ]
        if step.context:
            blobs.append(("ragsense-ctx", *self.encoded("ctx", step)))
        return assemble(title=self.title, meta=self.meta, blobs=blobs, version=__version__), stats

    def shell(self) -> int:
        """The bytes of the page without its row data (markup, style, script, head)."""
        self.meta["limits"] = (
            self.limits.to_dict() | self.payload.stats.to_dict() | {"step": "", "over": False}
        )
        return len(assemble(title=self.title, meta=self.meta, blobs=[], version=__version__).encode("utf-8"))

    def fit(self) -> Report:
        budget = self.limits.max_bytes - self.shell() - 2_000
        for _ in range(8):
            step = self.choose(budget)
            page, stats = self.page(step)
            size = len(page.encode("utf-8"))
            if size <= self.limits.max_bytes:
                return Report(page, stats, self.limits, step)
            budget -= size - self.limits.max_bytes + 20_000  # the estimate was short: ask for less
        page, stats = self.page(step, over=True)  # nothing more to cut: the page says so
        return Report(page, stats, self.limits, step)


def fit_page(
    payload: Payload, limits: ReportLimits, meta: dict[str, Any], title: str, compress: bool
) -> Report:
    """The page of ``payload`` that fits ``limits.max_bytes`` under the size policy (module docstring)."""
    return _Fitter(payload, limits, meta, title, compress).fit()
