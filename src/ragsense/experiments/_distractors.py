"""``consens-distractors``: ConSens when the context holds many documents, most of them irrelevant.

Real retrieval hands a generator 5 to 50 documents. Each WikiEval and HaluEval-dev pair (a grounded
and an ungrounded answer to one question) is scored against its own document with k = 0, 5, 10, 20,
40 documents of other items of the same set shuffled in (seeded; the k-document sets are nested),
under these context policies:

* ``budget``: the relevance window, the documents (or sentences) most relevant to the answer within
  the context budget (``ConSens(context_budget=B)``);
* ``tail``: the same budget, filled from the start of the context and cut at its end;
* ``full``: no budget, today's pass: the whole context, its end cut at the model window;
* ``windows`` (a study, not a library policy): several windows each within the budget, the first
  the relevance window, the next ones packed the same way from the units (documents, or sentences)
  left over, in BM25 order, at most ``max_windows``; the answer is scored under each, and each word
  keeps its best evidence (its lowest NLL over the windows; stated when any window states it)
  before the default aggregation (:func:`combine_windows`). It costs about one pass per window.

The items of each set are split in two seeded halves. Pre-registered rules, applied to the
development half only: the budget is the smallest of ``budgets`` whose mean AUROC over the two sets
at k = ``dev_k`` is within ``tolerance`` of the best; the windows study wins when its mean AUROC
over the two sets at k = ``dev_k`` and the chosen budget exceeds the single relevance window's by
more than ``tolerance`` (only then would it become a ``context_policy``). The report half gives the
figures. Each cell has the AUROC with its paired bootstrap interval and rows/s; the trivial
baselines (answer length, lexical support of the answer's words in the whole k-document context)
are reported beside it.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsense.consens import (
    DEFAULT_AGGREGATION,
    ConSens,
    GroundingResult,
    PromptTemplate,
    consens_from_word_nll,
    relevance_windows,
)
from ragsense.data import load_halueval, load_wikieval
from ragsense.errors import ParameterError
from ragsense.evaluation import evaluate
from ragsense.experiments._figures import contrast, length_baseline
from ragsense.models import LanguageModel
from ragsense.stats import roc_auc
from ragsense.text import unsupported_share

SETS = ("wikieval", "halueval")
KS = (0, 5, 10, 20, 40)
BUDGETS = (128, 256, 384, 512)
CONDITIONS = ("budget", "tail", "full")
MAX_WINDOWS = 4
WINDOWS_KS = (0, 20)


class Pair:
    """One question with its grounded (``pos``) and ungrounded (``neg``) answer and its documents."""

    def __init__(self, item_id: str, question: str, documents: list[str], pos: str, neg: str) -> None:
        self.id, self.question, self.documents, self.pos, self.neg = item_id, question, documents, pos, neg


def load_pairs(name: str) -> list[Pair]:
    """The pairs of ``wikieval`` or ``halueval`` (the shared data sets)."""
    if name == "wikieval":
        return [
            Pair(it.id, it.question, list(it.context_v1), it.grounded_answer, it.ungrounded_answer)
            for it in load_wikieval(None)
        ]
    return [
        Pair(it.id, it.question, [it.knowledge], it.right_answer, it.hallucinated_answer)
        for it in load_halueval(None)
    ]


def split_parts(pairs: Sequence[Pair], seed: int) -> dict[str, list[Pair]]:
    """Two seeded halves: ``dev`` (choose the budget) and ``report`` (the figures).

    >>> ps = [Pair(str(i), "q", ["d"], "a", "b") for i in range(6)]
    >>> parts = split_parts(ps, 0)
    >>> sorted(p.id for p in parts["dev"] + parts["report"]) == [str(i) for i in range(6)]
    True
    """
    order = list(range(len(pairs)))
    random.Random(f"distractors-split:{seed}").shuffle(order)
    half = len(order) // 2
    return {
        "dev": [pairs[i] for i in sorted(order[:half])],
        "report": [pairs[i] for i in sorted(order[half:])],
    }


def with_distractors(pair: Pair, pool: Sequence[Pair], k: int, seed: int) -> tuple[list[str], list[int]]:
    """The pair's documents with ``k`` documents of other pairs, shuffled in (seeded by item; the
    first ``k`` of one fixed draw, so k = 5 is part of k = 20); and where the pair's own documents are.

    >>> ps = [Pair(str(i), "q", [f"doc {i}"], "a", "b") for i in range(5)]
    >>> docs, own = with_distractors(ps[0], ps, 3, 0)
    >>> len(docs), docs[own[0]]
    (4, 'doc 0')
    """
    rng = random.Random(f"distractors:{seed}:{pair.id}")
    # Each text once, and never the pair's own (pairs can share a document: SummEdits' summaries);
    # WikiEval's and HaluEval-dev's documents are distinct, so their draws are those of before.
    own_texts = set(pair.documents)
    others = list(
        dict.fromkeys(d for p in pool if p.id != pair.id for d in p.documents if d not in own_texts)
    )
    drawn = rng.sample(others, min(k, len(others)))
    docs = [(d, True) for d in pair.documents] + [(d, False) for d in drawn]
    rng.shuffle(docs)
    return [d for d, _ in docs], [i for i, (_, own) in enumerate(docs) if own]


def combine_windows(results: Sequence[GroundingResult]) -> tuple[float, list[float]]:
    """Each word's best evidence over the windows' results (its lowest context NLL; stated when any
    window states it), aggregated as the default score; and each window's own score.

    One window gives that window's score back (tests/experiments/test_distractors.py).
    """
    keys = [(w.start, w.end) for w in results[0].words]
    by_key = [{(w.start, w.end): w for w in r.words} for r in results]
    keys = [key for key in keys if all(key in words for words in by_key)]
    nll_empty = [by_key[0][key].nll_empty for key in keys]
    best = [min(words[key].nll_context for words in by_key) for key in keys]
    stated = [any(words[key].stated for words in by_key) for key in keys]
    score, _ = consens_from_word_nll(nll_empty, best, DEFAULT_AGGREGATION, stated)
    return score, [r.consens for r in results]


def score_windows_cell(
    model: LanguageModel,
    pairs: Sequence[Pair],
    pool: Sequence[Pair],
    k: int,
    budget: int,
    seed: int,
    max_windows: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``windows`` condition of one k: as :func:`score_cell`, one row per answer and window."""
    separator = PromptTemplate().document_separator
    records: list[dict[str, Any]] = []
    rows: list[tuple[Pair, str, str, list[str], list[int], list[list[tuple[int, str]]]]] = []
    started = time.perf_counter()
    for p in pairs:
        docs, own = with_distractors(p, pool, k, seed)
        for label, answer in (("pos", p.pos), ("neg", p.neg)):
            windows = relevance_windows(
                docs, f"{p.question}\n{answer}", budget, model.count_tokens, max_windows, separator=separator
            )
            rows.append((p, label, answer, docs, own, windows))
            for j, parts in enumerate(windows):
                records.append(
                    {
                        "id": f"{p.id}:{label}:w{j}",
                        "question": p.question,
                        "contexts": [text for _, text in parts],
                        "answer": answer,
                    }
                )
    # No budget here: each window is within it already, and a second selection inside a window
    # (token counts of parts need not add up to their join's) would make the first window differ
    # from the single relevance window.
    run = evaluate(records, [ConSens(model)], chunk_size=16, progress=False)
    seconds = time.perf_counter() - started
    results: list[GroundingResult] = []
    for row in run.rows:
        if row["errors"]:
            first = row["errors"][0]
            raise RuntimeError(f"row {row['id']}: {first['metric']} {first['field']}: {first['message']}")
        results.append(GroundingResult.from_dict(row))
    scores: list[float] = []
    per_item: list[dict[str, Any]] = []
    start = 0
    for p, label, _answer, docs, own, windows in rows:
        mine = results[start : start + len(windows)]
        start += len(windows)
        score, each = combine_windows(mine)
        scores.append(score)
        # Documents read: those a window's scorer kept (indices of the window mapped back to the row's).
        read = sorted({parts[d][0] for parts, r in zip(windows, mine, strict=True) for d in r.kept_documents})
        per_item.append(
            {
                "id": f"{p.id}:{label}",
                "k": k,
                "condition": "windows",
                "budget": budget,
                "max_windows": max_windows,
                "own_documents": own,
                "consens": score,
                "window_consens": each,
                "windows": [[d for d, _ in parts] for parts in windows],
                "kept_documents": read,
                "truncated_windows": sum(r.truncated for r in mine),
                "lexical_support": -unsupported_share([w.word for w in mine[0].words], docs),
            }
        )
    figures = contrast(scores[0::2], scores[1::2])
    best_window = [max(item["window_consens"]) for item in per_item]
    cell = {
        "auroc": figures["auroc"],
        "auroc_ci95": figures["auroc_ci95"],
        "rows_per_s": round(len(rows) / seconds, 3),
        "seconds": round(seconds, 1),
        "windows_per_row": round(len(records) / len(rows), 2),
        "truncated_rows": sum(item["truncated_windows"] > 0 for item in per_item),
        "own_document_kept": round(
            sum(any(o in item["kept_documents"] for o in item["own_documents"]) for item in per_item)
            / len(per_item),
            4,
        ),
        # Not a candidate (no rule chose it): the best single window's score, from the same passes.
        "auroc_best_window_score": round(roc_auc(best_window[0::2], best_window[1::2]), 4),
    }
    return cell, per_item


def _metric(model: LanguageModel, condition: str, budget: int) -> ConSens:
    if condition == "budget":
        return ConSens(model, context_budget=budget)
    if condition in ("tail", "lead"):
        return ConSens(model, context_budget=budget, context_policy=condition)
    if condition == "default":
        return ConSens(model)  # the library's default, whatever it reads
    # The full pass: no budget, the whole context, its end cut at the model window.
    return ConSens(model, context_budget=None, context_policy="tail")


def score_cell(
    model: LanguageModel,
    pairs: Sequence[Pair],
    pool: Sequence[Pair],
    k: int,
    condition: str,
    budget: int,
    seed: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """AUROC (paired bootstrap interval), rows/s and per-item records of one (k, condition) cell."""
    records: list[dict[str, Any]] = []
    owns: list[list[int]] = []
    for p in pairs:
        docs, own = with_distractors(p, pool, k, seed)
        owns.append(own)
        for label, answer in (("pos", p.pos), ("neg", p.neg)):
            records.append(
                {"id": f"{p.id}:{label}", "question": p.question, "contexts": docs, "answer": answer}
            )
    started = time.perf_counter()
    run = evaluate(records, [_metric(model, condition, budget)], chunk_size=16, progress=False)
    seconds = time.perf_counter() - started
    results = []
    for row in run.rows:
        if row["errors"]:
            first = row["errors"][0]
            raise RuntimeError(f"row {row['id']}: {first['metric']} {first['field']}: {first['message']}")
        results.append(GroundingResult.from_dict(row))
    pos, neg = [r.consens for r in results[0::2]], [r.consens for r in results[1::2]]
    figures = contrast(pos, neg)
    cell = {
        "auroc": figures["auroc"],
        "auroc_ci95": figures["auroc_ci95"],
        "rows_per_s": round(len(records) / seconds, 3),
        "seconds": round(seconds, 1),
        "truncated_rows": sum(r.truncated for r in results),
        "own_document_kept": round(
            sum(any(o in r.kept_documents for o in own) for r, own in zip(results, _twice(owns), strict=True))
            / len(results),
            4,
        ),
    }
    per_item = [
        {
            "id": rec["id"],
            "k": k,
            "condition": condition,
            "budget": budget if condition in ("budget", "tail", "lead") else None,
            "own_documents": own,
            "consens": r.consens,
            "verdict": r.verdict,
            "kept_documents": r.kept_documents,
            "context_selection": r.context_selection,
            "context_tokens_dropped": r.context_tokens_dropped,
            "lexical_support": -unsupported_share([w.word for w in r.words], rec["contexts"]),
        }
        for rec, r, own in zip(records, results, _twice(owns), strict=True)
    ]
    return cell, per_item


def _twice(values: Sequence[Any]) -> list[Any]:
    return [v for v in values for _ in range(2)]


def _write(out: str | None, name: str, records: list[dict[str, Any]]) -> None:
    if not out:
        return
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same records give the same bytes.
    with gzip.GzipFile(path / f"{name}.jsonl.gz", "wb", mtime=0) as fh:
        for rec in records:
            fh.write((json.dumps(rec, allow_nan=False, sort_keys=True) + "\n").encode("utf-8"))


def choose_budget(dev: dict[str, dict[int, float]], tolerance: float) -> int:
    """The smallest budget whose mean AUROC over the sets is within ``tolerance`` of the best.

    >>> choose_budget({"a": {256: 0.80, 512: 0.86, 1024: 0.87}, "b": {256: 0.9, 512: 0.9, 1024: 0.9}}, 0.01)
    512
    """
    budgets = sorted(next(iter(dev.values())))
    mean = {b: sum(s[b] for s in dev.values()) / len(dev) for b in budgets}
    best = max(mean.values())
    return min(b for b in budgets if mean[b] >= best - tolerance)


def windows_win(single: dict[str, float], windows: dict[str, float], tolerance: float) -> bool:
    """Whether the windows' mean AUROC over the sets exceeds the single window's by more than
    ``tolerance`` (the pre-registered rule; development half only).

    >>> windows_win({"a": 0.80, "b": 0.90}, {"a": 0.83, "b": 0.90}, 0.01)
    True
    >>> windows_win({"a": 0.80, "b": 0.90}, {"a": 0.81, "b": 0.90}, 0.01)
    False
    """
    gain = sum(windows.values()) / len(windows) - sum(single.values()) / len(single)
    return gain > tolerance


def consens_distractors(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    ks: Sequence[int] = KS,
    budgets: Sequence[int] = BUDGETS,
    budget: int | None = None,
    dev_k: int = 20,
    full_ks: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    sets: Sequence[str] = SETS,
    tolerance: float = 0.01,
    max_windows: int = MAX_WINDOWS,
    windows_ks: Sequence[int] = WINDOWS_KS,
) -> dict[str, Any]:
    """Run the distractor benchmark (module docstring). ``limit``: pairs per set and part (default
    25); ``budget``: skip the development half and use this budget; ``full_ks``: the k at which the
    (slow) full-context pass runs, for every set or per set name (default: every k);
    ``windows_ks``: the k at which the windows study runs on the report half (empty: not at all;
    with ``budget`` given, the development half is skipped for it too)."""
    if data is not None:
        raise ParameterError("reads WikiEval and HaluEval-dev from the shared data folder", parameter="data")
    unknown = [name for name in sets if name not in SETS]
    if unknown or not sets:
        raise ParameterError(f"data sets are {', '.join(SETS)}, got {list(sets)}", parameter="sets")
    n = 25 if limit is None else limit
    started = time.perf_counter()
    parts = {name: split_parts(load_pairs(name), seed) for name in sets}
    figures: dict[str, Any] = {
        "experiment": "consens-distractors",
        "model": model.info.name,
        "pairs_per_part": n,
        "max_windows": max_windows,
    }
    if budget is None:
        dev: dict[str, dict[int, float]] = {}
        for name in sets:
            pool = parts[name]["dev"]
            dev[name] = {}
            for b in budgets:
                cell, dev_items = score_cell(model, pool[:n], pool, dev_k, "budget", b, seed)
                dev[name][b] = cell["auroc"]
                figures.setdefault("dev", {}).setdefault(name, {})[str(b)] = cell
                _write(out, f"dev-{name}-k{dev_k}-b{b}", dev_items)
        budget = choose_budget(dev, tolerance)
        figures["budget_rule"] = (
            f"smallest budget with mean dev AUROC at k={dev_k} within {tolerance} of the best"
        )
        if windows_ks:
            windows_dev: dict[str, float] = {}
            for name in sets:
                pool = parts[name]["dev"]
                cell, dev_items = score_windows_cell(model, pool[:n], pool, dev_k, budget, seed, max_windows)
                windows_dev[name] = cell["auroc"]
                figures["dev"][name][f"windows-{budget}"] = cell
                _write(out, f"dev-{name}-k{dev_k}-windows-b{budget}", dev_items)
            figures["windows_rule"] = (
                f"windows win when their mean dev AUROC at k={dev_k} and the chosen budget exceeds the "
                f"single relevance window's by more than {tolerance}"
            )
            figures["windows_win_dev"] = windows_win(
                {name: dev[name][budget] for name in sets}, windows_dev, tolerance
            )
    figures["budget"] = budget
    for name in sets:
        pool = parts[name]["report"]
        pairs = pool[:n]
        set_full_ks = full_ks.get(name) if isinstance(full_ks, Mapping) else full_ks
        table: dict[str, Any] = {
            "baseline_answer_length": length_baseline([p.pos for p in pairs], [p.neg for p in pairs])["auroc"]
        }
        for k in ks:
            row: dict[str, Any] = {}
            items: list[dict[str, Any]] = []
            for condition in CONDITIONS:
                if condition == "full" and set_full_ks is not None and k not in set_full_ks:
                    continue
                cell, cell_items = score_cell(model, pairs, pool, k, condition, budget, seed)
                row[condition] = cell
                items += cell_items
            if k in windows_ks:
                cell, cell_items = score_windows_cell(model, pairs, pool, k, budget, seed, max_windows)
                row["windows"] = cell
                items += cell_items
            lexical = [r["lexical_support"] for r in items[: 2 * len(pairs)]]
            row["baseline_lexical_support"] = round(roc_auc(lexical[0::2], lexical[1::2]), 4)
            table[f"k={k}"] = row
            _write(out, f"report-{name}-k{k}", items)
        figures[name] = table
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures
