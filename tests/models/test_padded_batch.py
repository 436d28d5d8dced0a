"""The transformers backend's padded multi-row scoring path, on CPU.

On GPU the backend scores up to ``max_batch_size`` (default 32) requests per forward pass, right-padded
to the longest; on CPU the default is one row per pass, so without this file the padded path would run
only on GPU. ``max_batch_size`` (an option of ``load_model`` and of the :class:`TransformersModel`
constructor) forces it here; the results must be the single-row ones within float noise.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ragsense.models import ScoreRequest
from ragsense.models._hf_scoring import PackedScorer
from ragsense.models._transformers import TransformersModel

pytestmark = pytest.mark.model

LONG_CONTEXT = " ".join(
    [
        "The Orvel bridge crosses the river Anse at the old mill of Saint-Remy.",
        "It was designed by the engineer Mara Quint in 1931 and opened to traffic two years later.",
        "Its three concrete arches span 212 metres in all; the middle one is the widest in the region.",
        "During the flood of 1952 the water rose to the keystones, but the bridge held.",
        "It was restored in 1998, when the original lamps were replaced by copies made in Lyon.",
    ]
)
REQUESTS = [
    ScoreRequest(
        f"Context: {LONG_CONTEXT}\nQuestion: Who designed the Orvel bridge?\nAnswer:", " Mara Quint"
    ),
    ScoreRequest("Hi", " there"),
    ScoreRequest("Question: Who designed the Orvel bridge?\nAnswer:", " Mara Quint, an engineer."),
    ScoreRequest("The answer is Par", "is, of course"),  # a straddling token
    ScoreRequest("Prix: 42,50 € — wörld café", " 3.14 ünïcödé 🤗 done"),
    ScoreRequest(f"Context: {LONG_CONTEXT[:150]}\nAnswer:", " It opened in 1933."),
    ScoreRequest("Label:", " relevant"),
    ScoreRequest("Hi", " there"),  # a duplicate, scored once
]


def _sharing_weights(model: Any, **options: Any) -> TransformersModel:
    return TransformersModel(
        model._model, model.tokenizer, name=model.info.name, fingerprint=model.info.fingerprint, **options
    )


@pytest.fixture(scope="module")
def single_row(smollm2: Any) -> TransformersModel:
    return _sharing_weights(smollm2, max_batch_size=1)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int, list[int]]]]:
    """(rows, width, real tokens per row) of every forward pass of the scoring path."""
    calls: list[tuple[int, int, list[int]]] = []
    original = PackedScorer.continuation_logprobs

    def spy(self: PackedScorer, ids: Any, mask: Any, items: Any) -> list[list[float]]:
        calls.append((int(ids.shape[0]), int(ids.shape[1]), [int(n) for n in mask.sum(dim=1).tolist()]))
        return original(self, ids, mask, items)

    monkeypatch.setattr(PackedScorer, "continuation_logprobs", spy)
    yield calls


def test_padded_batches_give_single_row_scores(
    smollm2: Any, single_row: TransformersModel, recorded: list[tuple[int, int, list[int]]]
) -> None:
    assert single_row.max_batch_size == 1
    reference = single_row.score_sync(REQUESTS)
    assert all(rows == 1 for rows, _, _ in recorded)
    recorded.clear()

    batched = _sharing_weights(smollm2, max_batch_size=4)
    got = batched.score_sync(REQUESTS)

    # Padding really happened: two passes of up to 4 rows, the first mixing the longest request with
    # requests of a quarter of its length or less.
    assert [rows for rows, _, _ in recorded] == [4, 3]
    assert min(recorded[0][2]) <= recorded[0][1] / 4
    worst = 0.0
    for req, b, r in zip(REQUESTS, got, reference, strict=True):
        assert (b.tokens, b.offsets, b.prompt_tokens, b.straddles_boundary) == (
            r.tokens,
            r.offsets,
            r.prompt_tokens,
            r.straddles_boundary,
        ), req
        worst = max(worst, *(abs(x - y) for x, y in zip(b.logprobs, r.logprobs, strict=True)))
    assert worst < 1e-4
