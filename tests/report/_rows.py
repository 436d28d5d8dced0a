"""Synthetic output rows in the exact format ``ragsense evaluate --metrics attribution,vera,similarity``
writes (docs/metrics.md, docs/vera.md), with unique texts, for size and speed tests of the report.

Texts are made of pseudo-words from a seeded vocabulary, so they compress about as well as English
(no two rows share an answer or a document unless asked to).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from ragsense.consens import ATTRIBUTION_FIELDS, Aggregation, default_bands
from ragsense.consens import CONSENS_FIELDS as METRIC_FIELDS
from ragsense.runs import RunStore, StoredRun

# A fixed list, not the enum: a new aggregation must not change the random stream (and so every
# synthetic row) that the report tests' expectations were written against.
AGGREGATIONS = ["arithmetic", "geometric", "min_word", "q10", "q25", "tail25", "mean_tail", "share"]
assert set(AGGREGATIONS) <= {a.value for a in Aggregation}
CONSENS_FIELDS = [*METRIC_FIELDS, *ATTRIBUTION_FIELDS]  # as the metric writes them
METRICS: list[dict[str, Any]] = [
    {
        "name": "consens",
        "fields": CONSENS_FIELDS,
        "scores": ["consens"],
        "verdict": "verdict",
        "settings": {
            "model": "fake",
            "attribution": True,
            "aggregation": "q25",
            "template": "{context} {question}",
        },
        "models": {"model": "fake:fake"},
    },
    {
        "name": "vera",
        "fields": [
            "context_relevance",
            "response_relevance",
            "response_adherence",
            "retrieval_required",
            "vera",
        ],
        "scores": ["context_relevance", "response_relevance", "response_adherence"],
        "verdict": None,
        "settings": {"judge": "fake", "steps": ["context", "relevance", "adherence"], "retrieval": True},
        "models": {"judge": "fake:fake"},
    },
    {
        "name": "similarity",
        "fields": ["similarity", "similarity_mode", "embedder"],
        "scores": ["similarity"],
        "verdict": None,
        "settings": {"embedder": "minilm", "mode": "whole"},
        "models": {"embedder": "all-minilm-l6-v2@6bf4e11ea624eed8"},
    },
]
STOP = {"the", "a", "of", "and", "in", "to", "is", "it", "was", "by", "for", "on", "at", "as"}


class TextMaker:
    def __init__(self, rng: random.Random, vocabulary: int = 4000) -> None:
        self.rng = rng
        syllables = ["ka", "lo", "mi", "ren", "sa", "tor", "vel", "an", "bri", "cu", "dem", "fa", "gor", "hi"]
        words = set()
        while len(words) < vocabulary:
            words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
        self.words = sorted(words)
        weights = [1.0 / (k + 1) for k in range(len(self.words))]  # Zipf-like, as in English
        self.cumulative = list(itertools.accumulate(weights))

    def sentence(self, n: int) -> str:
        body = self.rng.choices(self.words, cum_weights=self.cumulative, k=n)
        for k in range(0, n, 4):
            body[k] = self.rng.choice(sorted(STOP))
        return " ".join(body).capitalize() + "."

    def text(self, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            s = self.sentence(self.rng.randint(6, 18))
            out.append(s)
            size += len(s) + 1
        return " ".join(out)


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for k, ch in enumerate(text):
        if ch == "." and (k + 1 == len(text) or text[k + 1] == " "):
            spans.append((start, k + 1))
            start = k + 2
    return spans


def _decision(
    index: int, text: str, start: int, end: int, keep: bool, label: str, **extra: Any
) -> dict[str, Any]:
    return {
        "index": index,
        "text": text[start:end],
        "keep": keep,
        "label": label,
        "start": start,
        "end": end,
        "confidence": extra.pop("confidence", None),
        "reason": None,
        "document": extra.pop("document", None),
        "consens": extra.pop("consens", None),
        "grounded_probability": extra.pop("grounded_probability", None),
        "correction": None,
        "forced_split": False,
        "consens_by_aggregation": extra.pop("consens_by_aggregation", None),
        "consens_word_nll": extra.pop("consens_word_nll", None),
        "token_logprobs": None,
    }


def make_row(
    k: int, maker: TextMaker, *, docs: int = 3, doc_chars: int = 1200, answer_words: int = 45
) -> dict[str, Any]:
    rng = maker.rng
    contexts = [maker.text(rng.randint(doc_chars // 2, doc_chars * 3 // 2)) for _ in range(docs)]
    answer = " ".join(maker.sentence(rng.randint(8, 16)) for _ in range(max(1, answer_words // 12)))
    words, position = [], 0
    for token in answer.split(" "):
        start = answer.index(token, position)
        position = start + len(token)
        bare = token.rstrip(".")
        if bare.lower() in STOP:
            continue
        nll_context = rng.uniform(0.1, 9.0)
        nll_empty = max(0.01, nll_context + rng.gauss(0.8, 2.0))
        words.append(
            {
                "word": bare,
                "start": start,
                "end": start + len(bare),
                "ppl_context": math.exp(nll_context),
                "ppl_empty": math.exp(nll_empty),
                "nll_context": nll_context,
                "nll_empty": nll_empty,
            }
        )
    consens = rng.uniform(-1.0, 1.0)
    bands = default_bands(Aggregation.Q25)
    grounded_at, ungrounded_below = bands.grounded_at, bands.ungrounded_below
    verdict = (
        "grounded" if consens >= grounded_at else "unsure" if consens >= ungrounded_below else "ungrounded"
    )
    by_aggregation = {a: rng.uniform(-1, 1) for a in AGGREGATIONS} | {"q25": consens}
    attribution = [
        {
            "index": i,
            "consens_without": (w := rng.uniform(-1, 1)),
            "drop": by_aggregation["geometric"] - w,
            "consens_without_by_aggregation": {a: rng.uniform(-1, 1) for a in AGGREGATIONS},
            "truncated": False,
        }
        for i in range(docs)
    ]
    context_decisions = []
    for d, doc in enumerate(contexts):
        for s, e in _sentences(doc):
            keep = rng.random() < 0.4
            context_decisions.append(
                _decision(
                    len(context_decisions),
                    doc,
                    s,
                    e,
                    keep,
                    "relevant" if keep else "irrelevant",
                    document=d,
                    confidence=rng.uniform(0.5, 1.0),
                )
            )
    statements = _sentences(answer)
    relevance = [
        _decision(
            i,
            answer,
            s,
            e,
            keep := rng.random() < 0.8,
            "relevant" if keep else "irrelevant",
            confidence=rng.uniform(0.5, 1),
        )
        for i, (s, e) in enumerate(statements)
    ]
    adherence = [
        _decision(
            i,
            answer,
            s,
            e,
            (c := rng.uniform(-1, 1)) > 0,
            "grounded" if c > 0 else "unsupported",
            consens=c,
            grounded_probability=(1 + c) / 2,
            consens_by_aggregation={a: rng.uniform(-1, 1) for a in AGGREGATIONS},
            consens_word_nll=[[rng.uniform(0, 9), rng.uniform(0, 9)] for _ in range(8)],
        )
        for i, (s, e) in enumerate(statements)
    ]

    def share(ds: list[dict[str, Any]]) -> float:
        return sum(d["keep"] for d in ds) / len(ds) if ds else 0.0

    errors = [] if k % 97 else [{"metric": "vera", "field": None, "message": f"judge failed on row {k}"}]
    return {
        "id": f"row-{k:05d}",
        "question": maker.sentence(rng.randint(6, 14))[:-1] + "?",
        "contexts": contexts,
        "answer": answer,
        "consens": consens,
        "consens_raw": rng.uniform(-3, 3),
        "ppl_context": rng.uniform(2, 400),
        "ppl_empty": rng.uniform(2, 400),
        "aggregation": "q25",
        "consens_by_aggregation": by_aggregation,
        "words": words,
        "fallback": None,
        "truncated": False,
        "context_tokens_dropped": 0,
        "notes": [],
        "verdict": verdict,
        "model": "fake",
        "attribution": attribution,
        "top_document": max(range(docs), key=lambda i: attribution[i]["drop"]) if docs > 1 else None,
        "context_relevance": share(context_decisions),
        "response_relevance": share(relevance),
        "response_adherence": share(adherence),
        "retrieval_required": True,
        "vera": {
            "judge": "labels:fake",
            "splitter": "rules",
            "retrieval": {"required": True, "confidence": rng.uniform(0.5, 1), "reason": None},
            "context": {
                "name": "context_relevance",
                "score": share(context_decisions),
                "decisions": context_decisions,
                "notes": [],
            },
            "relevance": {
                "name": "response_relevance",
                "score": share(relevance),
                "decisions": relevance,
                "notes": [],
            },
            "adherence": {
                "name": "response_adherence",
                "score": share(adherence),
                "decisions": adherence,
                "notes": [],
            },
        },
        "similarity": rng.uniform(0, 1),
        "similarity_mode": "whole",
        "embedder": "all-minilm-l6-v2",
        "errors": errors,
        "_row": k,
    }


def quick_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A stored summary for test runs, with normal-approximation intervals (the page shows what the
    store holds; this keeps SciPy's import out of the tests' setup)."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        failed = [any(e.get("metric") == metric["name"] for e in r["errors"]) for r in rows]
        scored = [r for r, bad in zip(rows, failed, strict=True) if not bad]
        scores = {}
        for key in metric["scores"]:
            values = [r[key] for r in scored if isinstance(r.get(key), float) and math.isfinite(r[key])]
            if values:
                mean = statistics.fmean(values)
                half = 1.96 * statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
                scores[key] = {"n": len(values), "mean": mean, "ci95": [mean - half, mean + half]}
        verdicts = dict(Counter(str(r[metric["verdict"]]) for r in scored)) if metric["verdict"] else {}
        out[metric["name"]] = {
            "n": len(scored),
            "errors": sum(failed),
            "scores": scores,
            "verdicts": verdicts,
        }
    return out


def synthetic_rows(n: int, *, seed: int = 0, **options: Any) -> list[dict[str, Any]]:
    maker = TextMaker(random.Random(seed))
    return [make_row(k, maker, **options) for k in range(n)]


def store_run(
    path: Path, rows: list[dict[str, Any]], *, tag: str | None = None, finish: bool = True
) -> StoredRun:
    """Record ``rows`` as a run in the store at ``path`` (complete with a summary, or incomplete)."""
    store = RunStore(path)
    recorder = store.start(
        metrics=METRICS, tag=tag, command="ragsense evaluate rows.jsonl", dataset="rows.jsonl"
    )
    recorder.add_rows(rows)
    if finish:
        recorder.finish({"n_rows": len(rows), "n_resumed": 0, "seconds": 1.5, "metrics": quick_summary(rows)})
    else:
        recorder.abandon("interrupted by the test")
    return store.get(recorder.run_id)
