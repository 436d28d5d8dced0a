"""Output rows -> the report's compact view model: what the page embeds about each row.

The page gets three parts, each compressed on its own so that the size policy can cut one without
rebuilding the others (:class:`Payload`):

- ``rows``: per row ``[key, view_a, view_b]`` (``view_b`` only in a comparison; a view is ``null``
  when that run has no such row);
- ``docs``: each distinct document once, as ``[text, full_length or null]``;
- ``ctx``: VERA's per-sentence context decisions, per row ``[decisions_a, decisions_b]``.

A view has short keys and leaves out what is empty:

====  ==========================================================================================
key   value
====  ==========================================================================================
p     the row's position in the input (``_row``)
q, a  question and answer (``qn``, ``an``: the full length when the text was cut)
d     the row's documents, as indices into ``docs``
s, v  the score values and verdicts, in the order of the head's ``scores`` and ``verdicts``
sx    ``[index, text]`` when the ConSens score at three decimals would read as another band than its
      verdict's: the text with the digits that decide it (:func:`ragsense.consens.score_text`)
rf    1 when the row is a refusal (:func:`ragsense.contract.is_refusal_row` over those verdicts): the
      page lists refusals in their own table, not among the rows ranked worst first
e     errors: ``[metric, field, message]``
w     scored words, flat: ``gap, length, nll_context, nll_empty`` per word (offsets into the answer,
      ``gap`` from the previous word's end; NLLs in thousandths of a nat); ``wn``: words left out;
      ``ws``: the positions (among ``w``'s words) of the words the context states; ``ww``: those of
      the weakest words, weakest first (:func:`weakest_positions`)
ul    the row's own label (``label`` or ``expected``), read as a verdict
c     ConSens details: ``r`` (``consens_raw``; ``r`` in older files), ``pc``/``pe`` (perplexity
      with/without context), ``g`` (aggregation), ``ba`` (score by aggregation), ``fb`` (fallback),
      ``tr``/``td`` (context truncated, tokens dropped), ``n`` (notes), ``m`` (model)
t, tp leave-one-out attribution ``[document, drop, consens_without, truncated]`` and ``top_document``
ve    VERA: ``j`` judge, ``sp`` splitter, ``rt`` retrieval ``[required, confidence]``, ``st`` steps
      (``k`` step, ``sc`` score, ``lb`` labels, ``dc`` decisions ``[keep, label index, confidence,
      document, start, end, text, extra]`` with trailing nulls left out, ``n`` how many, ``nt`` notes)
x     the other fields of the row (similarity mode, correctness answer, input fields, ...)
====  ==========================================================================================

A decision's text is left out when it is exactly its span of the answer (or document), as it almost
always is; context decisions give ``start`` as the gap from the previous decision's end in the same
document and ``end`` as the sentence's length.

>>> rows = [{"id": "r1", "question": "Q?", "contexts": ["Doc one.", "Doc one."], "answer": "Ada wrote it.",
...          "consens": 0.5, "words": [{"word": "Ada", "start": 0, "end": 3, "nll_context": 1.0,
...          "nll_empty": 4.25}], "errors": [], "_row": 0}]
>>> payload = build_payload([rows], ["r1"], [{"name": "consens"}], [], ReportLimits())
>>> payload.documents, payload.rows[0][1]["d"], payload.rows[0][1]["w"]
(['Doc one.'], [0, 0], [0, 3, 1000, 4250])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsense.consens import (
    ATTRIBUTION_FIELDS,
    CONSENS_FIELDS,
    LEGACY_RAW_FIELD,
    RAW_FIELD,
    Bands,
    binding_reasons,
    score_text,
    weakest_words,
)
from ragsense.contract import is_refusal_row
from ragsense.data import shown_label
from ragsense.report._summary import row_errors, row_key
from ragsense.report._texts import ReportLimits, cut, fair_cap, milli, round4, short_text

QUESTION_FIELDS = ("question", "user_input")
ANSWER_FIELDS = ("answer", "response")
CONTEXT_FIELDS = ("contexts", "retrieved_contexts")
# ConSens's fields are drawn by the score table and the word view (its verdict stays in the table).
SHOWN_ELSEWHERE = frozenset(
    {*QUESTION_FIELDS, *ANSWER_FIELDS, *CONTEXT_FIELDS, "id", "_row", "errors", "error", "vera"}
    | {LEGACY_RAW_FIELD}  # an older file's name for consens_raw, drawn in the ConSens details
    | (set(CONSENS_FIELDS) - {"consens", "verdict"})
    | set(ATTRIBUTION_FIELDS)
)
MAX_OTHER_FIELDS = 30
VERA_STEPS = ("context", "relevance", "adherence")


@dataclass
class BuildStats:
    """What the policy cut while building a payload (shown in the page's footer)."""

    document_cap: int = 0
    answer_cap: int = 0
    question_cap: int = 0
    n_documents: int = 0
    documents_cut: int = 0
    answers_cut: int = 0
    questions_cut: int = 0
    words_left_out: int = 0
    decisions_left_out: int = 0
    texts_cut: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_cap": self.document_cap,
            "answer_cap": self.answer_cap,
            "question_cap": self.question_cap,
            "n_documents": self.n_documents,
            "documents_cut": self.documents_cut,
            "answers_cut": self.answers_cut,
            "questions_cut": self.questions_cut,
            "words_left_out": self.words_left_out,
            "decisions_left_out": self.decisions_left_out,
            "texts_cut": self.texts_cut,
        }


def _first_text(row: Mapping[str, Any], names: Sequence[str]) -> str:
    for name in names:
        value = row.get(name)
        if isinstance(value, str):
            return value
    return ""


def _documents(row: Mapping[str, Any]) -> list[str]:
    for name in CONTEXT_FIELDS:
        value = row.get(name)
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [v if isinstance(v, str) else str(v) for v in value]
    return []


WEAKEST = 5
"""Weakest words named in a row's detail, as many as the guard and the pytest plug-in name."""


def weakest_positions(drawn: Sequence[Mapping[str, Any]]) -> list[int] | None:
    """The positions (among the drawn words) of the weakest words, in :func:`weakest_words`' order:
    the one order of the guard, the pytest plug-in and the CLI.

    >>> weakest_positions([{"word": "a", "start": 0, "end": 1, "nll_empty": 1.0, "nll_context": 3.0,
    ...                     "stated": True},
    ...                    {"word": "b", "start": 2, "end": 3, "nll_empty": 1.0, "nll_context": 1.5}])
    [1, 0]
    """
    usable = [
        (k, w)
        for k, w in enumerate(drawn)
        if isinstance(w.get("nll_empty"), int | float) and isinstance(w.get("nll_context"), int | float)
    ]
    if not usable:
        return None
    by_start = {(w["start"], w["end"]): k for k, w in usable}
    ranked = weakest_words([w for _, w in usable], WEAKEST)
    return [by_start[(w["start"], w["end"])] for w in ranked]


def _compact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None and v != [] and v != {}}


class _Builder:
    def __init__(self, limits: ReportLimits, stats: BuildStats) -> None:
        self.limits = limits
        self.stats = stats
        self.docs: dict[str, int] = {}
        self.context: list[Any] | None = None
        self.answer_cap = 0
        self.question_cap = 0

    def text(self, value: Any) -> list[Any] | None:
        if value is None:
            return None
        short = short_text(value, self.limits.text_max)
        if short[1] is not None:
            self.stats.texts_cut += 1
        return short

    # ------------------------------------------------------------------------------------- one row

    def row(
        self,
        row: Mapping[str, Any],
        position: int,
        scores: Sequence[str],
        verdicts: Sequence[str],
        bands: Bands | None = None,
    ) -> Any:
        question, answer = _first_text(row, QUESTION_FIELDS), _first_text(row, ANSWER_FIELDS)
        documents = _documents(row)
        q, qn = cut(question, self.question_cap)
        a, an = cut(answer, self.answer_cap)
        self.stats.questions_cut += qn is not None
        self.stats.answers_cut += an is not None
        view: dict[str, Any] = {
            "p": row.get("_row", position),
            "q": q,
            "qn": qn,
            "a": a,
            "an": an,
            "d": [self.docs.setdefault(doc, len(self.docs)) for doc in documents],
            "s": [round4(row.get(name)) for name in scores],
            "sx": _edge_text(row, scores, bands),
            "v": [None if row.get(name) is None else str(row.get(name)) for name in verdicts],
            "rf": 1 if is_refusal_row(row, verdicts) else None,
            "e": [
                [e.get("metric"), e.get("field"), self.text(str(e.get("message", "")))]
                for e in row_errors(row)
            ],
        }
        words = row.get("words")
        if isinstance(words, list):
            view["w"], view["wn"] = self.words(words, len(a))
            # Which of the drawn words the context states (positions among them): never shaded red.
            drawn = [w for w in words if isinstance(w, dict | Mapping)][: len(view["w"]) // 4]
            view["ws"] = [k for k, w in enumerate(drawn) if w.get("stated") is True] or None
            view["ww"] = weakest_positions(drawn)
        # The binding check's findings, in the words every other explanation uses.
        view["br"] = [self.text(r) for r in binding_reasons(row)] or None
        view["ul"] = shown_label(row)
        view["c"] = _compact(
            {
                "r": round4(row.get(RAW_FIELD, row.get(LEGACY_RAW_FIELD))),
                "pc": round4(row.get("ppl_context")),
                "pe": round4(row.get("ppl_empty")),
                "g": row.get("aggregation"),
                "ba": _rounded_map(row.get("consens_by_aggregation")),
                "fb": row.get("fallback"),
                "tr": row.get("truncated"),
                "td": row.get("context_tokens_dropped") or None,
                "n": [self.text(n) for n in row.get("notes") or [] if n],
                "m": row.get("model"),
            }
        )
        attribution = row.get("attribution")
        if "attribution" in row:  # attribution ran: null or [] with a single document
            attribution = attribution if isinstance(attribution, list) else []
            view["t"] = [
                [
                    a_.get("index"),
                    round4(a_.get("drop")),
                    round4(a_.get("consens_without")),
                    1 if a_.get("truncated") else 0,
                ]
                for a_ in attribution
                if isinstance(a_, Mapping)
            ]
            view["tp"] = row.get("top_document")
        vera = row.get("vera")
        if isinstance(vera, Mapping):
            view["ve"] = self.vera(vera, answer, documents)
        shown = SHOWN_ELSEWHERE | set(scores) | set(verdicts)
        others = [(k, v) for k, v in row.items() if k not in shown and v is not None]
        view["x"] = [[k, self.value(v)] for k, v in others[:MAX_OTHER_FIELDS]]
        out = _compact(view)
        if "t" in view:  # kept when empty too: attribution ran, with one document
            out["t"] = view["t"]
        return out

    def value(self, value: Any) -> Any:
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return round4(value)
        return self.text(value)

    def words(self, words: Sequence[Any], embedded: int) -> tuple[list[int | None], int | None]:
        flat: list[int | None] = []
        previous, kept, left_out = 0, 0, 0
        for w in words:
            if not isinstance(w, dict | Mapping):
                continue
            start, end = w.get("start"), w.get("end")
            if type(start) is not int or type(end) is not int or not 0 <= start <= end:
                continue
            if end > embedded or start < previous:
                left_out += 1
                continue
            flat += [start - previous, end - start, milli(w.get("nll_context")), milli(w.get("nll_empty"))]
            previous, kept = end, kept + 1
        self.stats.words_left_out += left_out
        return flat, left_out or None

    def vera(self, vera: Mapping[str, Any], answer: str, documents: Sequence[str]) -> dict[str, Any]:
        retrieval = vera.get("retrieval")
        steps = []
        for key in VERA_STEPS:
            step = vera.get(key)
            if isinstance(step, Mapping):
                steps.append(self.vera_step(key, step, answer, documents))
        return _compact(
            {
                "j": vera.get("judge"),
                "sp": vera.get("splitter"),
                "rt": (
                    [retrieval.get("required"), round4(retrieval.get("confidence"))]
                    if isinstance(retrieval, Mapping)
                    else None
                ),
                "st": steps,
                "oa": self.text(vera.get("original_answer")),
                "rg": vera.get("regenerated"),
            }
        )

    def vera_step(
        self, key: str, step: Mapping[str, Any], answer: str, documents: Sequence[str]
    ) -> dict[str, Any]:
        context = key == "context"
        labels: dict[str, int] = {}
        rows: list[list[Any]] = []
        previous: dict[Any, int] = {}  # context decisions: the last end offset per document
        n_documents = len(documents)
        for d in step.get("decisions") or []:
            if not isinstance(d, dict | Mapping):
                continue
            get = d.get
            document, text, start, end = get("document"), get("text"), get("start"), get("end")
            if type(document) is not int:
                document = None
            first: int | None = None
            second: int | None = None
            same = False
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
                pass
            elif context:  # relative offsets compress far better over ~30 sentences a row
                source = documents[document] if document is not None and 0 <= document < n_documents else ""
                same = source[start:end] == text
                first, second = start - previous.get(document, 0), end - start
                previous[document] = end
            else:
                same = end <= self.answer_cap and answer[start:end] == text
                first, second = start, end
            label, keep, confidence = get("label"), get("keep"), get("confidence")
            item = [
                None if keep is None else int(bool(keep)),
                None if label is None else labels.setdefault(str(label), len(labels)),
                None if confidence is None else round4(confidence),
                document,
                first,
                second,
                None if same else self.text(text),
                self.decision_extra(d),
            ]
            while item and item[-1] is None:
                item.pop()
            rows.append(item)
        out: dict[str, Any] = {"k": key, "sc": round4(step.get("score")), "lb": list(labels), "n": len(rows)}
        if context:
            self.context = rows
        else:
            out["dc"] = rows
        out["nt"] = [self.text(n) for n in step.get("notes") or [] if n]
        return _compact(out) | {"k": key, "n": len(rows)}

    def decision_extra(self, d: Mapping[str, Any]) -> dict[str, Any] | None:
        get = d.get
        consens, probability, correction, reason = (
            get("consens"),
            get("grounded_probability"),
            get("correction"),
            get("reason"),
        )
        if consens is None and probability is None and correction is None and reason is None:
            return {"f": 1} if get("forced_split") else None
        extra = {
            "cs": round4(consens),
            "gp": round4(probability),
            "co": self.text(correction),
            "r": self.text(reason),
            "f": 1 if get("forced_split") else None,
        }
        return {k: v for k, v in extra.items() if v is not None}


def _rounded_map(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): round4(v) for k, v in value.items()}


@dataclass
class Payload:
    """What the page embeds about the rows, before encoding (see the module docstring)."""

    rows: list[list[Any]]
    context: list[list[Any]]
    """VERA's context decisions per row and run (aligned with :attr:`rows`)."""
    documents: list[str]
    """The distinct documents, whole; :meth:`documents_at` cuts them."""
    stats: BuildStats

    def documents_at(self, cap: int) -> tuple[list[list[Any]], int]:
        """``[text, full length or None]`` per document with each cut to ``cap`` characters, and how
        many were cut."""
        out = [list(cut(text, cap)) for text in self.documents]
        return out, sum(full is not None for _, full in out)


def _edge_text(row: Mapping[str, Any], scores: Sequence[str], bands: Bands | None) -> list[Any] | None:
    """``[index, text]`` of the ConSens score when the page's three decimals would read as another band
    than the row's (``-0.230`` for -0.2304 under ``ungrounded < -0.23``): the text with the digits
    that decide it (:func:`ragsense.consens.score_text`), else None (the page formats the number)."""
    value = row.get("consens")
    if bands is None or "consens" not in scores or not isinstance(value, float) or not math.isfinite(value):
        return None
    text = score_text(value, bands, digits=3)
    return None if text == f"{value:+.3f}" else [scores.index("consens"), text]


def build_payload(
    runs_rows: Sequence[Sequence[Mapping[str, Any]]],
    keys: Sequence[str],
    scores: Sequence[Mapping[str, Any]],
    verdicts: Sequence[str],
    limits: ReportLimits,
    bands: Sequence[Bands | None] = (),
) -> Payload:
    """The embedded rows of one run (or two, paired by ``keys``) under ``limits``.

    ``keys`` is the order of the table's rows: every key of the first run, then those only the
    second run has (see :func:`row_keys`). Documents are kept whole here; the page cuts them
    (:meth:`Payload.documents_at`) to fit its size.
    """
    stats = BuildStats()
    builder = _Builder(limits, stats)
    indexes = [keyed(rows) for rows in runs_rows]
    every = [r for rows in runs_rows for r in rows]
    builder.answer_cap = fair_cap(
        (len(_first_text(r, ANSWER_FIELDS)) for r in every),
        limits.answer_budget,
        limits.answer_min,
        limits.answer_max,
    )
    builder.question_cap = fair_cap(
        (len(_first_text(r, QUESTION_FIELDS)) for r in every),
        limits.question_budget,
        limits.question_min,
        limits.question_max,
    )
    stats.answer_cap, stats.question_cap = builder.answer_cap, builder.question_cap
    score_names = [str(s["name"]) for s in scores]
    entries: list[list[Any]] = []
    context: list[list[Any]] = []
    for key in keys:
        entry: list[Any] = [key]
        decisions: list[Any] = []
        for r, index in enumerate(indexes):
            found = index.get(key)
            builder.context = None
            run_bands = bands[r] if r < len(bands) else None
            entry.append(
                None if found is None else builder.row(found[1], found[0], score_names, verdicts, run_bands)
            )
            decisions.append(builder.context)
        entries.append(entry)
        context.append(decisions)
    stats.n_documents = len(builder.docs)
    return Payload(entries, context, list(builder.docs), stats)


def document_cap(documents: Sequence[str], limits: ReportLimits) -> int:
    """The cap that fits the documents in ``limits.document_budget`` (:func:`fair_cap`)."""
    return fair_cap(
        (len(d) for d in documents), limits.document_budget, limits.document_min, limits.document_max
    )


def keyed(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Each row by its key (:func:`row_key`), with its position; a key seen before gets ``" (#N)"``
    with the row's position added, so no row is lost.

    >>> list(keyed([{"id": "a"}, {"id": "a", "_row": 1}, {}]))
    ['a', 'a (#1)', '#2']
    """
    out: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for position, row in enumerate(rows):
        key = row_key(row, position)
        if key in out:
            key = f"{key} (#{row.get('_row', position)})"
        out[key] = (position, row)
    return out


def row_keys(runs_rows: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """The rows' keys in table order: the first run's, then those only a later run has.

    >>> row_keys([[{"id": "a"}, {"id": "b"}], [{"id": "c"}, {"id": "a"}]])
    ['a', 'b', 'c']
    """
    keys: dict[str, None] = {}
    for rows in runs_rows:
        keys.update(dict.fromkeys(keyed(rows)))
    return list(keys)
