"""VERA step 1 without a judge: does a question need documents? Fitted on the development half of the
committed set, reported on the other half (issue 28).

    python -m papers.vera.needs_documents --write src/ragsense/vera/retrieval_need.json

The set is ``ragsense/data/samples/needs_documents.jsonl``: SQuAD 2.0 answerable questions (by id;
their text is read from the SQuAD file) and questions about a user's own documents, which need
documents, and greetings, arithmetic and general-knowledge questions, which do not (all written for
this set). Each row names its half (``part``): SQuAD questions by article (titles sorted, even
positions development), the written ones alternately.

Candidates, each chosen on the development half only: a logistic regression on the question's MiniLM
embedding (classes weighted to balance, its L2 strength by 5-fold cross-validation on the development half,
its threshold from the cross-validated probabilities there), and the
trivial baseline, the question's length in words (threshold chosen on the development half). Printed:
balanced accuracy on both halves with a 95% stratified bootstrap interval (2,000 draws, seed 0), and
per kind the share called "needs documents"; ``--judge MODEL`` adds the judge path's step-1 label on
both halves (nothing fitted). ``--write`` ships the regression as versioned JSON
(weights only: no pickle).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.data import default_data_dir, load_squad_v2
from ragsense.embeddings import load_embedder
from ragsense.stats import bootstrap_ci
from ragsense.vera import (
    RETRIEVAL_NEED_VERSION,
    RetrievalCheck,
    VeraEvaluator,
    VeraSettings,
    needs_documents_set,
)


def _rows() -> list[dict[str, Any]]:
    rows = needs_documents_set()
    squad = {it.id: it.question for it in load_squad_v2(default_data_dir() / "squad_v2" / "dev-v2.0.json")}
    for r in rows:
        if "squad_id" in r:
            r["question"] = squad[r["squad_id"]]
    return rows


def _balanced(pred: Sequence[bool], gold: Sequence[bool]) -> str:
    pos = np.array([p for p, g in zip(pred, gold, strict=True) if g], dtype=float)
    neg = np.array([not p for p, g in zip(pred, gold, strict=True) if not g], dtype=float)

    def fn(a: Any, b: Any) -> float:
        return float((a.mean() + b.mean()) / 2)

    lo, hi = bootstrap_ci(fn, pos, neg)
    counts = f"needs: {int(pos.sum())}/{len(pos)}, no: {int(neg.sum())}/{len(neg)}"
    return f"{fn(pos, neg):.3f} [{lo:.3f}, {hi:.3f}] ({counts})"


def main(argv: Sequence[str] | None = None) -> None:
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    parser = argparse.ArgumentParser(prog="python -m papers.vera.needs_documents")
    parser.add_argument("--write", type=Path, help="write the fitted model here (JSON)")
    parser.add_argument(
        "--judge", help="also the judge path's step 1 with this judge model (e.g. smollm2-135m), both halves"
    )
    args = parser.parse_args(argv)
    rows = _rows()
    embedder = load_embedder("minilm")
    x = embedder.embed([r["question"] for r in rows]).astype(np.float64)
    y = np.array([r["needs_documents"] for r in rows])
    dev = np.array([r["part"] == "dev" for r in rows])
    model = LogisticRegressionCV(
        Cs=[0.1, 0.3, 1, 3, 10, 30, 100], cv=5, scoring="balanced_accuracy", class_weight="balanced"
    )
    model.fit(x[dev], y[dev])
    # The threshold from cross-validated probabilities on the development half: the fit itself
    # separates its own training rows perfectly, so its in-sample probabilities cannot set it.
    held = cross_val_predict(
        LogisticRegression(C=model.C_[0], class_weight="balanced", max_iter=1000),
        x[dev],
        y[dev],
        cv=StratifiedKFold(5, shuffle=True, random_state=0),
        method="predict_proba",
    )[:, 1]
    grid = [round(t, 2) for t in np.arange(0.05, 0.96, 0.05)]
    threshold = max(
        grid,
        key=lambda t: (np.mean(held[y[dev]] >= t) + np.mean(held[~y[dev]] < t), -abs(t - 0.5)),
    )
    proba = 1 / (1 + np.exp(-(x @ model.coef_[0] + model.intercept_[0])))
    pred = proba >= threshold
    words = np.array([len(r["question"].split()) for r in rows])
    cuts = sorted(set(words[dev].tolist()))
    best_cut = max(cuts, key=lambda c: (np.mean(words[dev & y] >= c) + np.mean(words[dev & ~y] < c), -c))
    print(
        f"rows: {int(dev.sum())} development, {int((~dev).sum())} report; "
        f"chosen C = {model.C_[0]:g}, threshold {threshold:g}"
    )
    print("| signal | development balanced accuracy | report balanced accuracy |")
    print("|---|---|---|")
    for name, p in (
        ("MiniLM logistic regression", pred),
        (f"question length >= {best_cut} words", words >= best_cut),
    ):
        print(f"| {name} | {_balanced(p[dev], y[dev])} | {_balanced(p[~dev], y[~dev])} |")
    if args.judge:
        vera = VeraEvaluator(args.judge, VeraSettings(signals="judge", cache=False))
        checks = vera.check_retrieval_need_sync([r["question"] for r in rows])
        judged = np.array([isinstance(c, RetrievalCheck) and c.required for c in checks])
        print(
            f"| judge {args.judge}, step 1 label | {_balanced(judged[dev], y[dev])} "
            f"| {_balanced(judged[~dev], y[~dev])} |"
        )
    print("\nreport half, share called 'needs documents' per kind (regression):")
    for kind in sorted({r["kind"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["kind"] == kind and not dev[i]]
        print(f"- {kind}: {int(pred[idx].sum())} of {len(idx)}")
    wrong = [
        rows[i]["id"] + ": " + rows[i]["question"] for i in range(len(rows)) if not dev[i] and pred[i] != y[i]
    ]
    print("\nreport-half errors:", *wrong, sep="\n- ")
    if args.write:
        payload = {
            "version": RETRIEVAL_NEED_VERSION,
            "kind": "logistic regression on the question's embedding: P(needs documents)",
            "embedder": embedder.name,
            "embedder_fingerprint": embedder.fingerprint,
            "trained_on": "ragsense/data/samples/needs_documents.jsonl, part=dev",
            "command": "python -m papers.vera.needs_documents --write src/ragsense/vera/retrieval_need.json",
            "C": float(model.C_[0]),
            "threshold": threshold,
            "intercept": float(model.intercept_[0]),
            "coef": [round(float(c), 8) for c in model.coef_[0]],
        }
        args.write.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
