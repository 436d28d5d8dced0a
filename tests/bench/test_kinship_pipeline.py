"""The kinship benchmark against ragsense's own pipeline: real MiniLM, real FAISS, bundled SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragsense.bench.kinship import PipelineSystem, RetrievalOnlySystem, generate_kinship_source, run_kinship
from ragsense.embeddings import load_embedder


def test_retriever_alone_finds_the_control_document(tmp_path: Path) -> None:
    """The issue's target: control retrieval recall at k=5 of at least 0.95 (every query, 12 names).

    Hybrid retrieval meets it (measured 1.000); MiniLM alone does not quite (measured 0.918)."""
    source = generate_kinship_source(12, 3, seed=0)
    embedder = load_embedder("minilm", cache=True)
    recall = {}
    for retrieval in ("dense", "hybrid"):
        system = RetrievalOnlySystem(None, embedder, store_kind="faiss", retrieval=retrieval)
        run = run_kinship(source, system, [5, 80], tmp_path / retrieval, relations=["grandfather"])
        by = {(r["k"], r["condition"]): r for r in run.results}
        assert by[(5, "control")]["n"] == 208
        assert by[(5, "control")]["accuracy"] is None  # nothing was answered
        # Two-document questions: more retrieved documents, more of the chain found.
        assert by[(80, "grandfather")]["retrieval_recall"] > by[(5, "grandfather")]["retrieval_recall"]
        assert run.timings["generation"] == 0.0
        recall[retrieval] = by[(5, "control")]["retrieval_recall"]
    assert recall["hybrid"] >= 0.95
    assert 0.85 <= recall["dense"] < recall["hybrid"]


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
@pytest.mark.model
def test_pipeline_system_with_smollm2_is_deterministic(smollm2: Any, tmp_path: Path) -> None:
    source = generate_kinship_source(4, 2, seed=0)
    embedder = load_embedder("minilm", cache=True)
    results = []
    for name in ("a", "b"):
        system = PipelineSystem(smollm2, embedder)
        run = run_kinship(source, system, [5], tmp_path / name, relations=["father"], max_queries=3)
        assert run.timings["generation"] > 0 and run.timings["indexing"] > 0
        results.append(run.results)
    assert results[0] == results[1]
    answers = [json.loads(line) for line in (tmp_path / "a" / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 6 and all(isinstance(a["answer"], str) and a["answer"] for a in answers)
    control = [a for a in answers if a["condition"] == "control"]
    assert all(a["retrieval_recall"] == 1.0 for a in control)
    assert {a["answer"] for a in answers} == {
        json.loads(line)["answer"] for line in (tmp_path / "b" / "answers.jsonl").read_text().splitlines()
    }
