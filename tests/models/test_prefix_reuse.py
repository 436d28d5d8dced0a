"""Prompts that share a leading part (issue 27): the prompt pass runs in declared segments, and a kept
prompt's first segments serve a prompt that starts with them, with bit-identical results.

Unit tests of the pieces (the template's split points, the cuts a request's splits become, the
cache's prefix index and cropped copies) on small inputs, then the bundled SmolLM2 on HaluEval rows
with distractor documents and leave-one-out attribution: scores are identical with reuse on, with the
cache off and with reuse off, and the leave-one-out prompts start from the full context's state.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import ragsense.models._hf_scoring as scoring
from ragsense.consens import GroundingScorer, PromptTemplate
from ragsense.data import load_halueval
from ragsense.models import ScoreRequest, TransformersModel
from ragsense.models._hf_prompt_cache import PromptStateCache, cropped_copy
from ragsense.models._hf_scoring import cuts_of
from ragsense.models._hf_shared import MIN_SEGMENT


def _state(tokens: int) -> tuple[Any, Any]:
    """A stand-in for (DynamicCache, last state) whose key at position i is i."""
    keys = torch.arange(tokens, dtype=torch.float32).reshape(1, 1, tokens, 1).repeat(1, 2, 1, 4)
    layers = [SimpleNamespace(keys=keys.clone(), values=keys.clone() + 0.5) for _ in range(2)]
    return SimpleNamespace(layers=layers), torch.zeros(1, 8)


def test_the_template_splits_after_each_document_and_at_the_context_end() -> None:
    t = PromptTemplate()
    docs = ["Alpha one.", "Beta two.", "Gamma three."]
    prompt, splits = t.render_split("Q?", docs)
    assert prompt == t.render("Q?", docs)
    assert [prompt[:s].rsplit("\n", 1)[-1] for s in splits] == docs
    # A cut of the join (the tail policy): the documents wholly before its end, then its end.
    cut = t.join(docs)[:15]
    prompt, splits = t.render_split("Q?", docs, cut)
    assert [prompt[:s][-3:] for s in splits] == ["ne.", "Bet"]
    assert t.render_split("Q?", []) == (t.render_context("Q?", ""), ())
    first = PromptTemplate("Q: {question}\nC: {context}\nA:")
    odd = "What is {context}?"  # a question before the context holds its placeholder: no split
    assert first.render_split(odd, docs)[1] == ()
    assert len(first.render_split("Why?", docs)[1]) == 3
    with pytest.raises(ValueError, match="splits"):
        ScoreRequest("abc", " d", (4,))


def test_splits_become_cuts_only_at_token_starts_a_segment_apart() -> None:
    offsets = [(i, i + 1) for i in range(400)]  # one character a token
    req = ScoreRequest("x" * 400, " y", (5, MIN_SEGMENT, MIN_SEGMENT + 10, 300, 399))
    assert cuts_of(req, offsets, 400) == (MIN_SEGMENT, 300)  # 5 and +10 are too close to the cut before
    assert cuts_of(req, offsets, 350) == (MIN_SEGMENT, 300)  # 399 is not inside the prompt's tokens
    wide = [(2 * i, 2 * i + 2) for i in range(200)]  # two characters a token: odd splits fall inside one
    odd = ScoreRequest("x" * 400, " y", (2 * MIN_SEGMENT + 1, 2 * MIN_SEGMENT + 60))
    assert cuts_of(odd, wide, 200) == (MIN_SEGMENT + 30,)


def test_a_kept_prompt_serves_its_first_segments_and_nothing_else() -> None:
    cache = PromptStateCache(max_tokens=100)
    ids = tuple(range(10, 40))
    cache.put(ids, *_state(30), (10, 20))
    other = ids[:20] + (99,) * 15  # same first two segments, then different
    hit = cache.get_prefix(other, (10, 20))
    assert hit is not None and hit[0] == 20
    keys = hit[1].layers[0].keys
    assert keys.shape[-2] == 20 and torch.equal(keys[0, 0, :, 0], torch.arange(20.0))
    assert hit[1].layers[1].values.shape[-2] == 20
    # Diverging inside the second segment: only the first is shared.
    part = cache.get_prefix(ids[:15] + (99,) * 20, (10, 20))
    assert part is not None and part[0] == 10 and part[1].layers[0].keys.shape[-2] == 10
    # Same ids but other cuts before the shared point: the states differ in their bits, so no hit.
    assert cache.get_prefix(other, (5, 20)) is None
    assert cache.get_prefix(other, (15,)) is None  # 15 is no kept cut
    assert cache.get_prefix(other, ()) is None
    assert cache.get(other, (10, 20)) is None  # not held whole
    stats = cache.stats()
    assert (stats.prefix_hits, stats.prefix_tokens) == (2, 30)
    # The kept entry is untouched by the copies, and served whole only for its own ids and cuts.
    whole = cache.get(ids, (10, 20))
    assert whole is not None and whole[0].layers[0].keys.shape[-2] == 30
    assert cache.get(ids) is None


def test_prefixes_go_with_their_entry_and_can_be_refused() -> None:
    cache = PromptStateCache(max_tokens=50)
    a = tuple(range(30))
    cache.put(a, *_state(30), (10,))
    cache.put(tuple(range(100, 130)), *_state(30), (10,))  # evicts a
    assert cache.stats().evictions == 1
    assert cache.get_prefix(a[:10] + (7,) * 5, (10,)) is None
    cache.put(a, *_state(30), (10,), prefixes=False)  # e.g. a sliding-window layer: cannot be cut
    assert cache.get_prefix(a[:10] + (7,) * 5, (10,)) is None
    assert cache.get(a, (10,)) is not None
    cache.clear()
    assert cache.stats().entries == 0 and not cache._prefixes


def test_a_cropped_copy_leaves_the_original_whole() -> None:
    state, _ = _state(12)
    copy = cropped_copy(state, 5)
    copy.layers[0].keys.fill_(-1.0)
    assert state.layers[0].keys.shape[-2] == 12 and float(state.layers[0].keys.min()) == 0.0


# -- the bundled model on HaluEval rows with distractors -------------------------------------------


def _rows(data: Path, count: int = 1, documents: int = 3) -> list[tuple[str, list[str], str]]:
    """HaluEval rows whose context is the row's knowledge among the next rows' knowledge passages,
    two passages a document (so that documents pass MIN_SEGMENT tokens), the row's own second."""
    items = load_halueval(data / "halueval_dev")
    rows = []
    for i in range(count):
        item = items[i]
        others = [x.knowledge for x in items[i + 1 : i + 2 * documents]]
        passages = [*others[:2], item.knowledge, *others[2:]]
        docs = [" ".join(passages[j : j + 2]) for j in range(0, 2 * documents, 2)]
        rows.append((item.question, docs, item.right_answer))
    return rows


@pytest.mark.model
def test_attribution_is_bit_identical_with_and_without_prefix_reuse(
    smollm2: TransformersModel, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows(shared_data)
    run: list[int] = []  # prompt tokens each prompt pass ran
    original = scoring.prompt_state

    def spy(kernel: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
        run.append(len(ids) - kwargs.get("start", 0))
        return original(kernel, ids, *args, **kwargs)

    monkeypatch.setattr(scoring, "prompt_state", spy)
    results = {}
    tokens = {}
    settings = {"reuse": {}, "without": {"reuse_prompts": False}}
    for name, options in settings.items():
        model = smollm2.with_settings(**options)
        start = len(run)
        results[name] = asyncio.run(
            GroundingScorer(model, context_budget="window").score(rows, attribution=True)
        )
        tokens[name] = sum(run[start:])
        if name == "reuse":
            stats = model.prompt_cache_stats()
            assert stats is not None and stats.prefix_hits >= len(rows) and stats.prefix_tokens > 0
    dicts = {name: [r.to_dict() for r in res] for name, res in results.items()}
    assert dicts["reuse"] == dicts["without"]
    assert all(len(r.attribution or []) == 3 for r in results["reuse"])
    assert tokens["reuse"] < 0.8 * tokens["without"]
    # A row's own score does not depend on attribution being asked for (same prompts, same cuts).
    plain = asyncio.run(GroundingScorer(smollm2.with_settings(), context_budget="window").score(rows))
    assert [r.consens for r in plain] == [r.consens for r in results["without"]]
