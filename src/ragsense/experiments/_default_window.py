"""``consens-default-window``: choose ConSens's default context budget, and when it applies (issue 40).

A RAG answer usually comes with several retrieved documents, most of them irrelevant to it. This
experiment chooses, on development rows only, the budget of the relevance window that ConSens reads
by default and the switch-over rule (which rows read the window, which read their context whole),
then reports the chosen default on rows of other documents. The sets are pairs of a right and a
hallucinated answer (summary, response) to one question over one document, from

* ``qa``, ``summarization``, ``dialogue``: HaluEval's release beyond HaluEval-dev
  (``halueval_more``; the question of a summary is "Summarize the document.", of a response the
  dialogue so far);
* ``summedits``: SummEdits' earnings calls (``summedits_dev/ectsum.json``), a consistent and an
  inconsistent summary of one document per pair.

Each set is split by document (a seeded hash of the document's text), so a document's pairs stay on
one side: ``choose`` picks the default, ``report`` gives its figures. The k distractor documents
come from other pairs of the same part (:func:`~ragsense.experiments.with_distractors`).

The pre-registered rule (docs/results.md, "The default relevance window"), applied to ``choose``:

1. the budget is the smallest of :data:`GRID` whose mean AUROC over the sets at
   :data:`CHOOSE_K` distractors is within ``tolerance`` of the best mean;
2. a context of one document is read through the window too only when the window's mean AUROC at
   k = 0 over the sets is at least the whole document's; otherwise it is read whole;
3. a context of two or more documents is read through the window (one that fits the budget is
   read whole anyway).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsense.data import default_data_dir
from ragsense.errors import ParameterError
from ragsense.experiments._distractors import Pair, _write, choose_budget, score_cell
from ragsense.experiments._figures import length_baseline
from ragsense.models import LanguageModel
from ragsense.stats import bootstrap_ci, roc_auc

SETS = ("qa", "summarization", "dialogue", "summedits")
GRID = (128, 256)
"""The candidate budgets, in model tokens (512 was dropped before any window was scored: CPU)."""
CHOOSE_K = {"qa": 20, "summarization": 20, "dialogue": 20, "summedits": 10}
"""Distractors per context when choosing (SummEdits' half holds 11 documents: 10 others)."""
REPORT_KS = {
    "qa": (0, 5, 10, 20),
    "summarization": (0, 5, 10, 20),
    "dialogue": (0, 5, 10, 20),
    "summedits": (0, 5, 10),
}
SUMMARY_QUESTION = "Summarize the document."


def _rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


_MORE_FILES: dict[str, tuple[str, int, str, tuple[str | None, str, str, str]]] = {
    "qa": (
        "qa_rows_501_10000.jsonl.gz",
        501,
        "qa",
        ("question", "knowledge", "right_answer", "hallucinated_answer"),
    ),
    "summarization": (
        "summarization_rows_1_5000.jsonl.gz",
        1,
        "sum",
        (None, "document", "right_summary", "hallucinated_summary"),
    ),
    "dialogue": (
        "dialogue.jsonl.gz",
        1,
        "dlg",
        ("dialogue_history", "knowledge", "right_response", "hallucinated_response"),
    ),
}
"""halueval_more's sets: file, number of its first row, id prefix, and the fields holding the question
(None: :data:`SUMMARY_QUESTION`), the document, the right and the hallucinated answer."""


def load_more_pairs(name: str, data_dir: str | None = None) -> list[Pair]:
    """The pairs of one set (module docstring), in file order."""
    root = Path(data_dir) if data_dir else default_data_dir()
    more = root / "halueval_more"
    if name in _MORE_FILES:
        file, first, prefix, (question, document, right, wrong) = _MORE_FILES[name]
        return [
            Pair(
                f"{prefix}{i + first}",
                SUMMARY_QUESTION if question is None else r[question],
                [r[document]],
                r[right],
                r[wrong],
            )
            for i, r in enumerate(_rows(more / file))
        ]
    if name == "summedits":
        with open(root / "summedits_dev" / "ectsum.json", encoding="utf-8") as fh:
            items = json.load(fh)
        by_doc: dict[str, tuple[list[str], list[str]]] = {}
        for item in items:
            pos, neg = by_doc.setdefault(item["doc"], ([], []))
            (pos if item["label"] == 1 else neg).append(item["summary"])
        # The i-th consistent summary of a document beside its i-th inconsistent one; pairs are
        # ordered by i, so the first pairs of a part cover all its documents.
        pairs = [
            (i, d, Pair(f"se{d}:{i}", SUMMARY_QUESTION, [doc], pos[i], neg[i]))
            for d, (doc, (pos, neg)) in enumerate(by_doc.items())
            for i in range(min(len(pos), len(neg)))
        ]
        return [p for _, _, p in sorted(pairs, key=lambda t: (t[0], t[1]))]
    raise ParameterError(f"data sets are {', '.join(SETS)}, got {name!r}", parameter="sets")


def split_by_document(pairs: Sequence[Pair], seed: int, shuffle: bool = True) -> dict[str, list[Pair]]:
    """``choose`` and ``report``: a seeded hash of each pair's document text picks its side, so every
    pair of a document lands on one side; each side is shuffled (seeded) unless ``shuffle`` is false.

    >>> ps = [Pair(str(i), "q", [f"doc {i % 3}"], "a", "b") for i in range(9)]
    >>> parts = split_by_document(ps, 0)
    >>> sides = {p.documents[0]: side for side, part in parts.items() for p in part}
    >>> len(sides), sum(len(v) for v in parts.values())
    (3, 9)
    """
    parts: dict[str, list[Pair]] = {"choose": [], "report": []}
    for p in pairs:
        digest = hashlib.sha256(f"default-window:{seed}:{p.documents[0]}".encode()).digest()
        parts["choose" if digest[0] % 2 == 0 else "report"].append(p)
    if shuffle:
        for side, part in parts.items():
            random.Random(f"default-window:{seed}:{side}").shuffle(part)
    return parts


def choose_default(
    window_k: Mapping[str, Mapping[int, float]],
    whole_k0: Mapping[str, float],
    window_k0: Mapping[str, Mapping[int, float]],
    tolerance: float = 0.01,
) -> dict[str, Any]:
    """The pre-registered rule (module docstring) on the ``choose`` part's AUROCs: ``window_k`` per
    set and budget at :data:`CHOOSE_K`, ``whole_k0`` and ``window_k0`` per set at k = 0.

    >>> choose_default({"a": {128: 0.80, 256: 0.85}, "b": {128: 0.9, 256: 0.9}},
    ...                {"a": 0.86, "b": 0.9}, {"a": {128: 0.8, 256: 0.84}, "b": {128: 0.9, 256: 0.9}})
    {'budget': 256, 'single_document': 'whole', 'mean_window': {128: 0.85, 256: 0.875}, \
'mean_whole_k0': 0.88, 'mean_window_k0': 0.87}
    """
    budgets = sorted(next(iter(window_k.values())))
    mean = {b: round(sum(s[b] for s in window_k.values()) / len(window_k), 4) for b in budgets}
    budget = choose_budget({name: dict(s) for name, s in window_k.items()}, tolerance)
    whole = round(sum(whole_k0.values()) / len(whole_k0), 4)
    window = round(sum(s[budget] for s in window_k0.values()) / len(window_k0), 4)
    return {
        "budget": budget,
        "single_document": "window" if window >= whole else "whole",
        "mean_window": mean,
        "mean_whole_k0": whole,
        "mean_window_k0": window,
    }


def auroc_difference(
    a: tuple[Sequence[float], Sequence[float]], b: tuple[Sequence[float], Sequence[float]]
) -> dict[str, Any]:
    """AUROC(a) - AUROC(b) on the same pairs, with a paired bootstrap interval (pairs resampled).

    >>> auroc_difference(([0.9, 0.8, 0.7], [0.1, 0.2, 0.3]), ([0.9, 0.8, 0.7], [0.1, 0.2, 0.3]))["difference"]
    0.0
    """

    def diff(ap: Any, an: Any, bp: Any, bn: Any) -> float:
        return roc_auc(ap, an) - roc_auc(bp, bn)

    lo, hi = bootstrap_ci(diff, a[0], a[1], b[0], b[1], n=2000, seed=0, paired=True)
    return {"difference": round(diff(*a, *b), 4), "ci95": [round(lo, 4), round(hi, 4)]}


def _scores(items: list[dict[str, Any]], key: str = "consens") -> tuple[list[float], list[float]]:
    return [r[key] for r in items[0::2]], [r[key] for r in items[1::2]]


def _fits(model: LanguageModel, pairs: Sequence[Pair], budget: int) -> bool:
    """Whether every pair's one document fits ``budget`` (the window then reads it whole)."""
    return all(model.count_tokens(p.documents[0]) <= budget for p in pairs)


FITS = "every document fits the budget: read whole"


def choose_from_files(folder: str, sets: Sequence[str] = SETS, tolerance: float = 0.01) -> dict[str, Any]:
    """The rule (:func:`choose_default`) on the ``choose`` part's per-item files in ``folder``; a
    k = 0 window cell that was not written because every document fits is the whole document's.
    The k = 0 window is read at the chosen budget only (the rule needs no other)."""
    root = Path(folder)

    def auroc(name: str) -> float:
        with gzip.open(root / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            items = [json.loads(line) for line in fh]
        return round(roc_auc(*_scores(items)), 4)

    window_k = {
        name: {
            int(path.name.split("-b")[-1].split(".")[0]): auroc(path.name.removesuffix(".jsonl.gz"))
            for path in root.glob(f"choose-{name}-k{CHOOSE_K[name]}-b*.jsonl.gz")
        }
        for name in sets
    }
    whole_k0 = {name: auroc(f"choose-{name}-k0-whole") for name in sets}
    budget = choose_budget(window_k, tolerance)
    window_k0 = {
        name: {
            budget: auroc(f"choose-{name}-k0-b{budget}")
            if (root / f"choose-{name}-k0-b{budget}.jsonl.gz").exists()
            else whole_k0[name]
        }
        for name in sets
    }
    return {
        **choose_default(window_k, whole_k0, window_k0, tolerance),
        "window_k": window_k,
        "whole_k0": whole_k0,
        "window_k0": window_k0,
    }


def consens_default_window(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    part: str = "choose",
    sets: Sequence[str] = SETS,
    budgets: Sequence[int] = GRID,
    full_ks: Mapping[str, Sequence[int]] | None = None,
    ks: Mapping[str, Sequence[int]] | None = None,
    pool_size: int = 100,
    whole: bool = True,
    k0_budgets: Sequence[int] = GRID,
    budget: int | None = None,
    policy: str = "relevance",
    offset: int = 0,
) -> dict[str, Any]:
    """Run one part (module docstring). ``limit``: pairs per set (default 25); ``part="choose"``
    scores the whole document at k = 0 (``whole``), the window at each of ``budgets`` at
    :data:`CHOOSE_K` and at each of ``k0_budgets`` at k = 0 (:func:`choose_from_files` applies the
    rule to the files written in ``out``); ``part="report"`` scores the library default (whatever
    ``ConSens()`` reads) at ``ks`` and the full pass at ``full_ks`` (default: k = 0 only) with the
    lexical-support and answer-length baselines. Distractors come from the first ``pool_size``
    pairs of the part. ``policy="lead"`` reads the window cells (``budgets``, ``k0_budgets`` and a
    report ``budget``) with ``context_policy="lead"`` (amendment 2; files end in ``-lead``);
    ``offset`` skips the part's first pairs (fresh report pairs)."""
    unknown = [name for name in sets if name not in SETS]
    if unknown or not sets or part not in ("choose", "report"):
        raise ParameterError(
            f"sets are {', '.join(SETS)} and parts choose, report; got {list(sets)}, {part!r}",
            parameter="sets",
        )
    n = 25 if limit is None else limit
    started = time.perf_counter()
    figures: dict[str, Any] = {
        "experiment": "consens-default-window",
        "model": model.info.name,
        "part": part,
        "pairs": n,
    }
    if policy not in ("relevance", "lead"):
        raise ParameterError(f"policies are relevance, lead; got {policy!r}", parameter="policy")
    # The relevance policy's cells keep their names of before amendment 2 (-b128); lead's are -lead128.
    window_condition, file_tag, tag = (
        ("budget", "b", "") if policy == "relevance" else ("lead", "lead", " lead")
    )
    if offset:
        figures["offset"] = offset
    for name in sets:
        pool = split_by_document(load_more_pairs(name, data), seed)[part][: max(pool_size, offset + n)]
        pairs = pool[offset : offset + n]
        table: dict[str, Any] = {
            "documents": len({p.documents[0] for p in pairs}),
            "baseline_answer_length": length_baseline([p.pos for p in pairs], [p.neg for p in pairs])[
                "auroc"
            ],
        }
        if part == "choose":
            k = CHOOSE_K[name]
            if whole:
                cell, items = score_cell(model, pairs, pool, 0, "full", 0, seed)
                table["k=0 whole"] = cell
                _write(out, f"choose-{name}-k0-whole", items)
            for b in budgets:
                cell, items = score_cell(model, pairs, pool, k, window_condition, b, seed)
                table[f"k={k} window {b}{tag}"] = cell
                _write(out, f"choose-{name}-k{k}-{file_tag}{b}", items)
            for b in k0_budgets:
                if _fits(model, pairs, b):  # every document fits: the window reads it whole
                    table[f"k=0 window {b}"] = FITS
                    continue
                cell, items = score_cell(model, pairs, pool, 0, window_condition, b, seed)
                table[f"k=0 window {b}{tag}"] = cell
                _write(out, f"choose-{name}-k0-{file_tag}{b}", items)
            print(json.dumps({name: table}, sort_keys=True), flush=True)
        else:
            set_ks = (ks or REPORT_KS).get(name, REPORT_KS[name])
            set_full = (full_ks or {}).get(name, (0,))
            clean: tuple[list[float], list[float]] | None = None
            for k in set_ks:
                row: dict[str, Any] = {}
                # With ``budget``, rows of several documents read ConSens(context_budget=budget): the
                # default's reading when budget is AUTO_BUDGET (tests/consens/test_default_window.py).
                windowed = budget is not None and k > 0
                condition, suffix = (
                    (window_condition, f"-{file_tag}{budget}") if windowed else ("default", "")
                )
                cell, items = score_cell(model, pairs, pool, k, condition, budget or 0, seed)
                row["default"] = cell
                row["baseline_lexical_support"] = round(roc_auc(*_scores(items, "lexical_support")), 4)
                if k == 0:
                    clean = _scores(items)
                elif clean is not None:
                    row["default_minus_clean"] = auroc_difference(_scores(items), clean)
                if k in set_full:
                    cell, full_items = score_cell(model, pairs, pool, k, "full", 0, seed)
                    row["full"] = cell
                    items += full_items
                table[f"k={k}"] = row
                _write(out, f"report-{name}-k{k}{suffix}", items)
                print(json.dumps({name: {f"k={k}": row}}, sort_keys=True), flush=True)
        figures[name] = table
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures


def choose_policy_from_files(folders: Sequence[str], sets: Sequence[str] = SETS) -> dict[str, Any]:
    """Amendment 3's rule (docs/results.md): pool each set's ``choose`` pairs at :data:`CHOOSE_K` over
    the per-item files of ``folders`` (``-b128`` for ``relevance``, ``-lead128`` for ``lead``; files
    hold a pair's two rows one after the other), and keep ``lead`` when its mean AUROC over ``sets``
    is at least ``relevance``'s (a tie goes to ``lead``: it reads less text unrelated to the answer).
    Only the pairs present under both policies count, so the two means are over the same pairs."""

    def pooled(name: str, tag: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for folder in folders:
            path = Path(folder) / f"choose-{name}-k{CHOOSE_K[name]}-{tag}.jsonl.gz"
            if path.exists():
                items = _rows(path)
                for pos, neg in zip(items[0::2], items[1::2], strict=True):
                    pairs[str(pos["id"]).rsplit(":", 1)[0]] = (pos, neg)
        return pairs

    per_set: dict[str, dict[str, Any]] = {}
    for name in sets:
        cells = {policy: pooled(name, tag) for policy, tag in (("relevance", "b128"), ("lead", "lead128"))}
        common = sorted(set(cells["relevance"]) & set(cells["lead"]))
        per_set[name] = {"pairs": len(common)} | {
            policy: round(
                roc_auc([cell[i][0]["consens"] for i in common], [cell[i][1]["consens"] for i in common]), 4
            )
            for policy, cell in cells.items()
        }
    mean = {p: round(sum(s[p] for s in per_set.values()) / len(per_set), 4) for p in ("relevance", "lead")}
    policy = "lead" if mean["lead"] >= mean["relevance"] else "relevance"
    return {"policy": policy, "mean": mean, "sets": per_set}
