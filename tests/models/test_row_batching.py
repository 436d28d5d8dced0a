"""Rows batched into one forward pass (``max_batch_size > 1``, the GPU default) against one row per pass.

The bundled SmolLM2 on CPU in float32, on the golden WikiEval rows (two contexts of different length,
each with a grounded and an ungrounded answer of different lengths): the batched prompt route
(models/_hf_batched.py) must really batch, give the unbatched route's log-probs within TOKEN_TOL and
its ConSens scores within SCORE_TOL with the same verdicts (attribution too), and repeat itself bit
for bit. Padding changes the matrix products' shapes, so the bits of the two routes differ; the
tolerances are the measured worst cases with headroom (docs/speed.md, "Batching rows").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import ragsense.models._hf_scoring as scoring
from ragsense.consens import GroundingResult, GroundingScorer, PromptTemplate
from ragsense.models import ScoreRequest, TransformersModel

pytestmark = pytest.mark.model

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "wikieval.json"
# Measured on these rows (AMD EPYC, AVX2, torch 2.13 CPU, OMP_NUM_THREADS=2): 2.3e-5 in a token's
# log-probability (of magnitude up to ~15: 2e-6 relative; tests/models/test_padded_batch.py allows 1e-4
# for the padded full pass), up to 6.6e-7 in a ConSens score on the eight golden rows.
TOKEN_TOL = 1e-4
SCORE_TOL = 1e-5


def _rows() -> list[tuple[str, list[str], str]]:
    """The golden rows of the two shortest contexts, both answers each; the longer context split into
    three documents so attribution has documents to leave out."""
    golden = json.loads(GOLDEN.read_text())
    by_context: dict[str, list[dict[str, Any]]] = {}
    for row in golden:
        by_context.setdefault(row["contexts"][0], []).append(row)
    contexts = sorted(by_context, key=len)[:2]
    rows = []
    for context in contexts:
        words = context.split(" ")
        third = len(words) // 3
        documents = [" ".join(words[i : i + third]) for i in range(0, 3 * third, third)]
        documents[-1] += " " + " ".join(words[3 * third :])
        rows += [(r["question"], documents, r["answer"]) for r in by_context[context]]
    return rows


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of prompts in each batched prompt pass."""
    sizes: list[int] = []
    original = scoring.prompt_states

    def spy(kernel: Any, prompts: Any, pad_id: int) -> Any:
        sizes.append(len(prompts))
        return original(kernel, prompts, pad_id)

    monkeypatch.setattr(scoring, "prompt_states", spy)
    return sizes


def _score(model: TransformersModel, rows: list[tuple[str, list[str], str]]) -> list[GroundingResult]:
    results = asyncio.run(GroundingScorer(model).score(rows, attribution=True))
    assert all(isinstance(r, GroundingResult) for r in results)
    return [r for r in results if isinstance(r, GroundingResult)]


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
def test_batched_log_probs_are_the_single_row_ones_within_float_noise(
    smollm2: TransformersModel, spied: list[int]
) -> None:
    template = PromptTemplate()
    rows = _rows()
    requests = [
        ScoreRequest(template.render(q, docs if with_context else [""]), template.continuation(a))
        for q, docs, a in rows
        for with_context in (True, False)
    ]
    single = smollm2.with_settings(max_batch_size=1).score_sync(requests)
    assert spied == []  # one row per pass never takes the batched route
    batched_model = smollm2.with_settings(max_batch_size=8)
    batched = batched_model.score_sync(requests)
    # Four prompts (two contexts, two questions without one), each shared by two answers: one pass.
    assert spied == [4]
    worst = 0.0
    for s, b in zip(single, batched, strict=True):
        assert (s.tokens, s.offsets, s.prompt_tokens) == (b.tokens, b.offsets, b.prompt_tokens)
        worst = max(worst, *(abs(x - y) for x, y in zip(s.logprobs, b.logprobs, strict=True)))
    assert worst < TOKEN_TOL
    # The same computation again (a fresh prompt cache, the same batch plan): the same bits.
    assert smollm2.with_settings(max_batch_size=8).score_sync(requests) == batched
    # The prompts' states were kept: a later call reads none again (the shared route on kept states).
    again = batched_model.score_sync(requests)
    stats = batched_model.prompt_cache_stats()
    assert stats is not None and stats.hits == 4 and spied == [4, 4]
    for s, b in zip(single, again, strict=True):
        assert max(abs(x - y) for x, y in zip(s.logprobs, b.logprobs, strict=True)) < TOKEN_TOL


def test_consens_and_attribution_batched_agree_with_one_row_per_pass(
    smollm2: TransformersModel, spied: list[int]
) -> None:
    rows = _rows()[:2]  # one context, both answers: its prompt, its three leave-one-out prompts
    single = _score(smollm2.with_settings(max_batch_size=1), rows)
    batched = _score(smollm2.with_settings(max_batch_size=8), rows)
    assert spied and max(spied) > 1
    for s, b in zip(single, batched, strict=True):
        assert abs(s.consens - b.consens) < SCORE_TOL
        assert s.verdict == b.verdict
        assert s.attribution is not None and b.attribution is not None and len(s.attribution) == 3
        for x, y in zip(s.attribution, b.attribution, strict=True):
            assert x.index == y.index and abs(x.drop - y.drop) < SCORE_TOL
        top = max(s.attribution, key=lambda a: a.drop).index
        assert top == max(b.attribution, key=lambda a: a.drop).index
