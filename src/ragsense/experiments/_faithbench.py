"""FaithBench-dev (Bao et al., 2025): LLM summaries with human labels, scored by ConSens beside the
trivial baselines and the predictions of the detectors that ship with the data, on the same rows.

Unpaired, unlike the answer pairs of :mod:`ragsense.experiments._consens` (whose scoring loop, output
writer and header it reuses).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragsense.consens import Aggregation, GroundingScorer
from ragsense.data import load_faithbench
from ragsense.embeddings import load_embedder
from ragsense.experiments._consens import Pair, Row, _header, _score_all, _write
from ragsense.experiments._figures import unpaired
from ragsense.models import LanguageModel
from ragsense.similarity import MODES, answer_context_similarity
from ragsense.stats import roc_auc
from ragsense.text import unsupported_share

FAITHBENCH_QUESTION = "Summarize the passage."
"""The question every FaithBench summary is scored under (the dataset has none)."""


def consens_faithbench(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
) -> dict[str, Any]:
    """FaithBench summaries (Bao et al., 2025): consistent vs hallucinated, with other detectors beside.

    Each summary is scored against its source under the question "Summarize the passage."; the
    human label (1 consistent, 0 hallucinated: :func:`ragsense.data.load_faithbench`) is the truth.
    Unlike the paired sets, the two classes are different summaries, so every figure is an unpaired
    AUROC. Beside every aggregation: the trivial baselines (the shorter summary is consistent; the
    share of scored words the source does not state; MiniLM similarity) and the predictions of the
    detectors that ship with the data (HHEM-2.1, GPT-4o, ...), all on the same rows.
    """
    started = time.perf_counter()
    items = load_faithbench(data)[:limit]
    rows: list[Row] = [(FAITHBENCH_QUESTION, [it.source], it.summary) for it in items]
    # The paper's method reads the whole context (the relevance window is its own experiment).
    scorer = GroundingScorer(model, context_budget="window", binding=None, learned=True)
    res = _score_all(scorer, rows, attribution=False, desc="consens-faithbench")
    embedder = load_embedder("minilm", cache=True)
    similarity = {
        mode: answer_context_similarity(
            [it.summary for it in items],
            [it.source for it in items],
            embedder,
            mode=mode,  # type: ignore[arg-type]
        )
        for mode in MODES
    }
    _write(
        out,
        "consens-faithbench",
        [
            {
                "id": it.id,
                "passage": it.passage,
                "label": it.label,
                "summarizer": it.summarizer,
                "result": r.to_dict(),
                **{f"similarity_{m}": similarity[m][i] for m in MODES},
                "detectors": it.detectors,
            }
            for i, (it, r) in enumerate(zip(items, res, strict=True))
        ],
    )

    def split(values: Sequence[float]) -> Pair:
        return (
            [v for v, it in zip(values, items, strict=True) if it.label == 1],
            [v for v, it in zip(values, items, strict=True) if it.label == 0],
        )

    scores = {agg.value: split([r.consens_by_aggregation[agg.value] for r in res]) for agg in Aggregation}
    baselines = {
        "answer_length": split([-float(len(it.summary.split())) for it in items]),
        "lexical_support": split(
            [
                -unsupported_share([w.word for w in r.words], [it.source])
                for it, r in zip(items, res, strict=True)
            ]
        ),
        **{f"similarity_{m}": split(similarity[m]) for m in MODES},
    }
    detectors = sorted({k for it in items for k in it.detectors})
    default = scorer.aggregation.value
    return {
        "experiment": "consens-faithbench",
        "n": len(items),
        "n_consistent": sum(it.label for it in items),
        "auroc": round(roc_auc(*scores[default]), 4),
        "by_aggregation": {k: unpaired(*v) for k, v in scores.items()},
        "baselines": {k: unpaired(*v) for k, v in baselines.items()},
        "detectors": {k: unpaired(*split([it.detectors.get(k, 0.0) for it in items])) for k in detectors},
        "verdicts": dict(sorted(Counter(r.verdict for r in res).items())),
        "truncated_rows": sum(r.truncated for r in res),
        **_header(model, scorer, started),
    }
