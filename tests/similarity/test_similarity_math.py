"""The answer-context similarity baseline with the real MiniLM, and the window splitter."""

from __future__ import annotations

import doctest
import importlib
import itertools
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragsense.embeddings import CachedEmbedder, MiniLMEmbedder, Vectors
from ragsense.similarity._math import answer_context_similarity, context_windows

CURIE = "Marie Curie discovered polonium and radium in 1898 together with her husband Pierre."
FILLER = " ".join(
    f"The river port number {i} handled grain, timber and coal shipments for the northern towns."
    for i in range(40)
)
LONG_CONTEXT = FILLER + "\n\n" + CURIE  # the relevant sentence lies beyond MiniLM's 256 tokens


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


class WordEmbedder:
    """Cannot count tokens: windows fall back to one token per word."""

    name = "words"
    fingerprint = "words@1"
    dim = 2

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [[1.0, float(len(t.split()))] for t in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), 2)
        unit: Vectors = (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)
        return unit


def test_supported_answer_scores_higher_than_unrelated(minilm: MiniLMEmbedder) -> None:
    answers = [
        "Curie discovered radium and polonium.",
        "Photosynthesis happens in chloroplasts.",
    ]
    supported, unrelated = answer_context_similarity(answers, [CURIE, CURIE], minilm)
    assert supported > 0.6
    assert unrelated < 0.2
    assert -1.0 <= unrelated <= supported <= 1.0


def test_whole_mode_is_the_cosine_of_the_two_embeddings(minilm: MiniLMEmbedder) -> None:
    answer = "Pierre and Marie Curie found radium."
    [score] = answer_context_similarity([answer], [CURIE], minilm)
    a, c = minilm.embed([answer, CURIE])
    assert score == pytest.approx(float(a.astype(np.float64) @ c.astype(np.float64)), abs=1e-7)


def test_short_contexts_score_the_same_in_both_modes(minilm: MiniLMEmbedder) -> None:
    answers = ["Curie discovered radium.", "Grain was shipped."]
    contexts = [CURIE, "Grain and coal went through the port."]
    whole = answer_context_similarity(answers, contexts, minilm)
    chunked = answer_context_similarity(answers, contexts, minilm, mode="max_chunk")
    assert whole == chunked


def test_max_chunk_finds_an_answer_beyond_the_truncation_point(minilm: MiniLMEmbedder) -> None:
    assert minilm.count_truncated([LONG_CONTEXT]) == 1
    answer = "Marie Curie discovered radium and polonium."
    [whole] = answer_context_similarity([answer], [LONG_CONTEXT], minilm)
    [chunked] = answer_context_similarity([answer], [LONG_CONTEXT], minilm, mode="max_chunk")
    # "whole" sees only the filler (the model drops the tail); max_chunk reaches the last window.
    [filler_only] = answer_context_similarity([answer], [FILLER], minilm)
    assert whole == pytest.approx(filler_only, abs=1e-6)
    assert chunked > whole + 0.1


def test_windows_fit_the_model_overlap_and_cover_the_context(minilm: MiniLMEmbedder) -> None:
    windows = context_windows(LONG_CONTEXT, counter=minilm)
    assert len(windows) > 2
    counts = minilm.token_counts(windows)
    assert max(counts) <= 200 + 2  # [CLS] and [SEP]
    assert min(counts[:-1]) > 150  # windows are filled, not fragments
    assert windows[0].startswith("The river port number 0")
    assert windows[-1].endswith("husband Pierre.")
    for prev, nxt in itertools.pairwise(windows):
        assert prev in LONG_CONTEXT and nxt in LONG_CONTEXT
        shared = LONG_CONTEXT.index(prev) + len(prev) - LONG_CONTEXT.index(nxt)
        overlap = minilm.token_counts([LONG_CONTEXT[LONG_CONTEXT.index(nxt) :][:shared]])[0] - 2
        assert 30 <= overlap <= 50
    words = re.findall(r"\S+", LONG_CONTEXT)
    covered = {w for win in windows for w in re.findall(r"\S+", win)}
    assert covered == set(words)


def test_windows_without_a_token_counter() -> None:
    text = " ".join(f"w{i}" for i in range(10))
    assert context_windows(text, window_tokens=4, overlap_tokens=1) == [
        "w0 w1 w2 w3",
        "w3 w4 w5 w6",
        "w6 w7 w8 w9",
    ]
    assert context_windows(text, window_tokens=5, overlap_tokens=0) == ["w0 w1 w2 w3 w4", "w5 w6 w7 w8 w9"]
    assert context_windows("a\n\nb  c", window_tokens=10, overlap_tokens=2) == [
        "a\n\nb  c"
    ]  # whitespace kept
    assert context_windows("   ") == ["   "]
    assert context_windows("") == [""]


def test_a_word_longer_than_the_window_gets_its_own_window(minilm: MiniLMEmbedder) -> None:
    long_word = "x-" * 150  # one whitespace word, 300 word pieces (BERT splits at punctuation)
    assert minilm.token_counts([long_word])[0] > 256
    assert context_windows(f"before {long_word} after", counter=minilm) == ["before", long_word, "after"]


def test_mode_and_input_errors(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(ValueError, match="2 answers but 1 contexts"):
        answer_context_similarity(["a", "b"], ["c"], minilm)
    with pytest.raises(ValueError, match="unknown mode"):
        answer_context_similarity(["a"], ["c"], minilm, mode="mean")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequences"):
        answer_context_similarity("a", "c", minilm)
    with pytest.raises(ValueError, match="overlap_tokens"):
        context_windows("a b", window_tokens=4, overlap_tokens=4)
    with pytest.raises(ValueError, match="window_tokens"):
        context_windows("a b", window_tokens=0, overlap_tokens=0)
    assert answer_context_similarity([], [], minilm) == []


def test_any_embedder_works_and_the_cache_keeps_token_counting(
    minilm: MiniLMEmbedder, tmp_path: Path
) -> None:
    scores = answer_context_similarity(
        ["one two"], ["one two three four five"], WordEmbedder(), mode="max_chunk"
    )
    assert len(scores) == 1 and -1.0 <= scores[0] <= 1.0
    answer = "Marie Curie discovered radium and polonium."
    direct = answer_context_similarity([answer], [LONG_CONTEXT], minilm, mode="max_chunk")
    with CachedEmbedder(minilm, tmp_path) as cached:
        via_cache = answer_context_similarity([answer], [LONG_CONTEXT], cached, mode="max_chunk")
    assert via_cache == direct


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module("ragsense.similarity._math"))
    assert result.attempted > 0
    assert result.failed == 0
