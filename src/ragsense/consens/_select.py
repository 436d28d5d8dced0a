"""Relevance windows: which part of a long context ConSens reads.

When a row's context exceeds the model window, or the context budget the user sets
(``context_budget=`` / ``--context-budget TOKENS``), the scorer keeps the documents most relevant to
the answer, ranked by BM25 (:class:`ragsense.rag.BM25`, the project's keyword retrieval) with the
question and the answer as the query, and joins them in their original order until the budget is
full. A document too long to fit is skipped for the next one; when even the best-ranked document does
not fit (one long document), the same is done with sentences of all documents. Cutting the tail
instead drops whatever comes last, which in a retrieved list is often the supporting document
(docs/results.md, "Distractor documents"). :func:`relevance_windows` packs the context into several
such windows (the ``consens-distractors`` experiment's windows study).

BM25 rather than MiniLM: it costs no model pass, reads every word of a long document (MiniLM reads
256 tokens), and ties the choice to the answer's exact words, which is what the score then reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ragsense.errors import ParameterError
from ragsense.rag import BM25

# A sentence ends at ., ! or ? followed by space, or at a line break (headings, list items).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


CONTEXT_POLICIES = ("auto", "relevance", "lead", "tail")
"""How a context over the budget is fitted: keep the most relevant documents or sentences, packed
greedily into the budget (``relevance``); keep the best-ranked document whole and then the
next-ranked ones while they fit (``lead``, :func:`select_context`'s ``lead_limit``); keep its start
and cut its end (``tail``, the policy before 0.x); or ``auto`` (the default, :func:`row_policy`)."""
DEFAULT_CONTEXT_POLICY = "auto"
AUTO_POLICY = "lead"
"""The policy of ``"auto"`` under the ``"auto"`` budget, chosen on development rows by the
pre-registered rule 4 of docs/results.md ("Amendment 3"; issue 40)."""
ContextBudget = int | Literal["auto", "window"] | None
"""A context budget: a number of model tokens for every row, ``"auto"`` (:func:`row_budget`), or
``"window"`` / ``None`` (the model window only: every context that fits is read whole)."""
AUTO: Literal["auto"] = "auto"
WINDOW: Literal["window"] = "window"
DEFAULT_CONTEXT_BUDGET: ContextBudget = AUTO
"""The default context budget: ``"auto"``, the relevance window of :data:`AUTO_BUDGET` tokens for a
context of :data:`AUTO_MIN_DOCUMENTS` or more documents, the model window for a single document. The
one place every consumer's default comes from (``evaluate``, ``grounding``, the guard, the pytest
plug-in, the framework evaluators, trace scoring all build ``ConSens()`` without a budget)."""
AUTO_BUDGET = 128
"""The relevance window's budget under ``"auto"``, chosen on development rows by the pre-registered
rule of docs/results.md, "The default relevance window" (issue 40)."""
AUTO_MIN_DOCUMENTS = 2
"""Under ``"auto"``, a context of at least this many non-empty documents is read through the window;
a single document is read whole (the window's budget cost AUROC on single documents there)."""


def check_context_budget(budget: ContextBudget) -> ContextBudget:
    """``budget`` when it is a positive number of tokens, ``"auto"``, or ``"window"`` or ``None`` (the
    model window).

    >>> check_context_budget(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: context_budget: must be a positive number of tokens, 'auto', ... got 0
    """
    if budget in (AUTO, WINDOW) or budget is None:
        return budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ParameterError(
            f"must be a positive number of tokens, 'auto', 'window' or None, got {budget!r}",
            parameter="context_budget",
        )
    return budget


def row_budget(budget: ContextBudget, documents: int) -> int | None:
    """The budget a context of ``documents`` non-empty documents is read at (``None``: the model
    window): ``"auto"`` gives :data:`AUTO_BUDGET` to a context of several documents and the model
    window to a single document.

    >>> row_budget("auto", 1), row_budget("auto", 5), row_budget("window", 5), row_budget(64, 1)
    (None, 128, None, 64)
    """
    if budget == AUTO:
        return AUTO_BUDGET if documents >= AUTO_MIN_DOCUMENTS else None
    if budget == WINDOW or budget is None:
        return None
    return int(budget)


def row_policy(policy: str, budget: ContextBudget) -> str:
    """The policy a row is fitted with: ``"auto"`` is :data:`AUTO_POLICY` under the ``"auto"``
    budget, and ``relevance`` under a number of tokens or the model window (a number is then a hard
    cap: ``lead`` may read the best-ranked document past it).

    >>> row_policy("auto", "auto"), row_policy("auto", 128), row_policy("auto", None)
    ('lead', 'relevance', 'relevance')
    >>> row_policy("tail", "auto")
    'tail'
    """
    if policy != DEFAULT_CONTEXT_POLICY:
        return policy
    return AUTO_POLICY if budget == AUTO else "relevance"


def check_context_policy(policy: str) -> str:
    """``policy`` when it is one of :data:`CONTEXT_POLICIES`.

    >>> check_context_policy("head")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: context_policy: must be one of auto, relevance, lead, tail, got 'head'
    """
    if policy not in CONTEXT_POLICIES:
        raise ParameterError(
            f"must be one of {', '.join(CONTEXT_POLICIES)}, got {policy!r}", parameter="context_policy"
        )
    return policy


@dataclass(frozen=True)
class Selection:
    """The context as scored: its parts (``(document index, text kept of it)`` in original order),
    the documents left out, how many tokens were dropped and how (``unit``: ``all`` when nothing was,
    ``documents``, ``sentences`` or ``tail``)."""

    parts: list[tuple[int, str]]
    separator: str
    dropped_documents: list[int]
    dropped_tokens: int
    unit: str

    @property
    def context(self) -> str:
        return self.separator.join(text for _, text in self.parts)

    @property
    def kept_documents(self) -> list[int]:
        return [d for d, _ in self.parts]

    def renumbered(self, positions: Sequence[int]) -> Selection:
        """The same selection with document ``i`` renamed ``positions[i]`` (indices into the row's
        contexts, empty ones included)."""
        return replace(
            self,
            parts=[(positions[d], t) for d, t in self.parts],
            dropped_documents=[positions[d] for d in self.dropped_documents],
        )

    def note(self) -> str:
        """The row's note on what was dropped."""
        if self.unit == "tail":
            return (
                f"context truncated: {self.dropped_tokens} tokens dropped from its end "
                "to fit the window or budget"
            )
        left_out = f"; documents not scored: {self.dropped_documents}" if self.dropped_documents else ""
        return (
            f"context truncated to the budget: kept the {self.unit} most relevant to the answer, "
            f"{self.dropped_tokens} tokens dropped{left_out}"
        )


def tail_fit(count_tokens: Callable[[str], int], context: str, budget: int) -> tuple[str, int]:
    """The ``tail`` policy: keep the start of the context, cut its end to fit ``budget``.

    Documents keep their order, so the last documents lose their tails first. Returns the fitted
    context and how many tokens were dropped (0 when it already fits).

    >>> tail_fit(lambda s: len(s.split()), "one two three four", 2)
    ('one two', 2)
    """
    total = count_tokens(context)
    if total <= budget:
        return context, 0
    words = context.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # the longest word prefix that fits
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    kept = " ".join(words[:lo])
    return kept, total - count_tokens(kept)


def tail_selection(documents: Sequence[str], kept: str, dropped_tokens: int, separator: str) -> Selection:
    """The selection of a tail cut that kept the text ``kept``, a prefix of the joined documents.

    >>> s = tail_selection(["a b", "c d", "e"], "a b\\n\\nc", 2, "\\n\\n")
    >>> s.parts, s.dropped_documents, s.unit
    ([(0, 'a b'), (1, 'c')], [2], 'tail')
    """
    if not dropped_tokens:
        return Selection(list(enumerate(documents)), separator, [], 0, "all")
    parts: list[tuple[int, str]] = []
    start = 0
    for d, doc in enumerate(documents):
        if start >= len(kept):
            break
        parts.append((d, kept[start : start + len(doc)]))
        start += len(doc) + len(separator)
    parts = [(d, t) for d, t in parts if t.strip()]
    kept_docs = {d for d, _ in parts}
    dropped = [d for d in range(len(documents)) if d not in kept_docs]
    return Selection(parts, separator, dropped, dropped_tokens, "tail")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (non-empty, stripped).

    >>> split_sentences("One. Two!\\nThree")
    ['One.', 'Two!', 'Three']
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _greedy(costs: Sequence[int], ranking: Sequence[int], budget: int, separator: int) -> list[int]:
    """Indices taken in ``ranking`` order while they fit ``budget`` (each after the first also pays
    ``separator``); returned in original order."""
    taken: list[int] = []
    used = 0
    for i in ranking:
        cost = costs[i] + (separator if taken else 0)
        if used + cost <= budget:
            taken.append(i)
            used += cost
    return sorted(taken)


def _ranking(scores: Sequence[float]) -> list[int]:
    # Ties keep the original order (sorted is stable), so the choice is deterministic.
    return sorted(range(len(scores)), key=lambda i: -scores[i])


@dataclass(frozen=True)
class _Units:
    """What a relevance window is packed from: the documents, or, when the best-ranked document alone
    is over the budget (one long document), the sentences of all documents; with their token costs,
    their BM25 ranking for the query, and the separator's cost."""

    units: list[tuple[int, str]]  # (document index, text)
    costs: list[int]
    ranking: list[int]
    separator_cost: int
    sentences: bool

    @classmethod
    def of(
        cls,
        documents: Sequence[str],
        query: str,
        budget: int,
        count_tokens: Callable[[str], int],
        separator: str,
    ) -> _Units:
        sep_cost = max(count_tokens(separator), 0)
        costs = [count_tokens(d) for d in documents]
        ranking = _ranking(BM25(list(documents)).scores(query))
        if costs[ranking[0]] <= budget:
            return cls(list(enumerate(documents)), costs, ranking, sep_cost, False)
        units = [(d, s) for d, doc in enumerate(documents) for s in split_sentences(doc)]
        texts = [s for _, s in units]
        s_costs = [count_tokens(" " + s) for s in texts]
        return cls(units, s_costs, _ranking(BM25(texts).scores(query)), sep_cost, True)

    def take(self, ranking: Sequence[int], budget: int) -> list[int]:
        """The units of ``ranking`` greedily within ``budget``, in original order."""
        return _greedy(self.costs, ranking, budget, self.separator_cost)

    def parts(self, taken: Sequence[int]) -> list[tuple[int, str]]:
        """The taken units as ``(document index, text)`` parts; a document's sentences stay one part."""
        parts: list[tuple[int, str]] = []
        for i in taken:
            doc, text = self.units[i]
            if self.sentences and parts and parts[-1][0] == doc:
                parts[-1] = (doc, parts[-1][1] + " " + text)
            else:
                parts.append((doc, text))
        return parts


def _lead(costs: Sequence[int], ranking: Sequence[int], budget: int, separator: int) -> list[int]:
    """The ``lead`` packing: the best-ranked unit whatever its cost, then the next-ranked ones while
    the total stays within ``budget`` (or the first unit's cost, when that is larger), stopping at the
    first that does not fit; in original order."""
    taken = [ranking[0]]
    used = costs[ranking[0]]
    limit = max(budget, used)
    for i in ranking[1:]:
        if used + separator + costs[i] > limit:
            break  # a short document ranked far below is not read just because it fits
        taken.append(i)
        used += separator + costs[i]
    return sorted(taken)


def select_context(
    documents: Sequence[str],
    query: str,
    budget: int,
    count_tokens: Callable[[str], int],
    *,
    separator: str = "\n\n",
    lead_limit: int | None = None,
) -> Selection:
    """Keep the documents (or sentences) of ``documents`` most relevant to ``query`` within ``budget``
    tokens, in their original order.

    With ``lead_limit`` (the ``lead`` policy), the best-ranked document is kept whole when it is at
    most ``lead_limit`` tokens (the model window), even over ``budget``; the next-ranked documents
    follow while the total stays within ``budget`` (or the first document's length), and the packing
    stops at the first that does not fit. The best-ranked document is read as the answer's source
    would be read alone, never cut to sentences of other documents, and a short document ranked far
    below is not read just because it fits. Only a best-ranked document over ``lead_limit`` falls back
    to sentences (within ``lead_limit``).

    >>> count = lambda s: len(s.split())
    >>> docs = ["Paris is in France.", "Bananas are yellow fruit.", "Berlin is the capital of Germany."]
    >>> s = select_context(docs, "What is the capital of Germany? Berlin.", 10, count)
    >>> s.kept_documents, s.dropped_documents, s.unit
    ([0, 2], [1], 'documents')
    >>> s.context
    'Paris is in France.\\n\\nBerlin is the capital of Germany.'
    >>> select_context(docs, "What is the capital of Germany? Berlin.", 4, count, lead_limit=50).context
    'Berlin is the capital of Germany.'
    """
    joined = separator.join(documents)
    total = count_tokens(joined)
    if total <= budget:
        return Selection(list(enumerate(documents)), separator, [], 0, "all")
    units = _Units.of(documents, query, budget if lead_limit is None else lead_limit, count_tokens, separator)
    if lead_limit is not None and not units.sentences:
        taken = _lead(units.costs, units.ranking, budget, units.separator_cost)
    else:
        taken = units.take(units.ranking, budget if lead_limit is None else lead_limit)
    parts = units.parts(taken)
    unit = "sentences" if units.sentences else "documents"
    if not parts:  # not one sentence fits: read the start of the context rather than nothing
        return tail_selection(documents, *tail_fit(count_tokens, joined, budget), separator)
    kept = {d for d, _ in parts}
    dropped = [i for i in range(len(documents)) if i not in kept]
    context = separator.join(t for _, t in parts)
    return Selection(parts, separator, dropped, max(total - count_tokens(context), 0), unit)


def fit_context(
    documents: Sequence[str],
    query: str,
    budget: int,
    window: int,
    count_tokens: Callable[[str], int],
    policy: str,
    separator: str,
) -> Selection:
    """What a row reads under ``policy`` (:data:`CONTEXT_POLICIES`): ``documents`` fitted to ``budget``
    (at most ``window``, the model window less the prompt and answer). A relevance selection whose
    join is still over ``window`` (the parts' token counts need not add up to their join's) and the
    ``tail`` policy cut the context's end instead.

    >>> count = lambda s: len(s.split())
    >>> fit_context(["a b c", "d e"], "d", 2, 10, count, "tail", " ").context
    'a b'
    """
    if policy != "tail":
        lead = window if policy == "lead" else None
        chosen = select_context(documents, query, budget, count_tokens, separator=separator, lead_limit=lead)
        if chosen.unit == "all" or count_tokens(chosen.context) <= window:
            return chosen
    limit = budget if policy == "tail" else window
    return tail_selection(documents, *tail_fit(count_tokens, separator.join(documents), limit), separator)


def relevance_windows(
    documents: Sequence[str],
    query: str,
    budget: int,
    count_tokens: Callable[[str], int],
    max_windows: int,
    *,
    separator: str = "\n\n",
) -> list[list[tuple[int, str]]]:
    """Up to ``max_windows`` windows of ``(document index, text)`` parts, each within ``budget``
    tokens: the first is the relevance window of :func:`select_context`
    (the same units, the same greedy BM25 order), each next one is packed the same way from the
    units left over. A context that fits the budget is one window.

    >>> count = lambda s: len(s.split())
    >>> docs = ["Paris is in France.", "Bananas are yellow fruit.", "Berlin is the capital of Germany."]
    >>> for window in relevance_windows(docs, "What is the capital of Germany? Berlin.", 6, count, 3):
    ...     print(window)
    [(2, 'Berlin is the capital of Germany.')]
    [(0, 'Paris is in France.')]
    [(1, 'Bananas are yellow fruit.')]
    >>> len(relevance_windows(docs, "capital", 100, count, 3))
    1
    """
    if count_tokens(separator.join(documents)) <= budget:
        return [list(enumerate(documents))]
    units = _Units.of(documents, query, budget, count_tokens, separator)
    windows: list[list[tuple[int, str]]] = []
    left = units.ranking
    while left and len(windows) < max_windows:
        taken = units.take(left, budget)
        if not taken:
            break
        windows.append(units.parts(taken))
        chosen = set(taken)
        left = [i for i in left if i not in chosen]
    return windows or [list(enumerate(documents))]  # nothing fits: the scorer cuts it as usual
