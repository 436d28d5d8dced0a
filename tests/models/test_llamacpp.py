"""The llama.cpp backend: the ScoreRequest contract (joint tokenization, continuation placement,
log-softmax) on a stand-in ``llama_cpp`` module, the install hint without it, and, where
llama-cpp-python is installed, the real library on the bundled SmolLM2 GGUF against the
transformers backend (slow)."""

from __future__ import annotations

import asyncio
import math
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsense.errors import BackendUnavailableError
from ragsense.models import ScoreRequest, load_model
from ragsense.models._llamacpp import _char_offsets

VOCAB = ["<s>", "Pa", "ris", " is", " in", " Fr", "ance", ".", " é", "t", "é"]


class _StandIn:
    """A byte-level tokenizer over VOCAB (longest match) and fixed logits: row i favours token i+1."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.n_tokens = 0
        self.scores = np.zeros((0, len(VOCAB)), dtype=np.float32)

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        ids, at = ([0] if add_bos else []), 0
        pieces = [v.encode() for v in VOCAB]
        while at < len(data):
            best = max(
                (i for i, p in enumerate(pieces) if i and data.startswith(p, at)),
                key=lambda i: len(pieces[i]),
            )
            ids.append(best)
            at += len(pieces[best])
        return ids

    def detokenize(self, ids: list[int], special: bool = False) -> bytes:
        return b"".join(b"" if i == 0 else VOCAB[i].encode() for i in ids)

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, ids: list[int]) -> None:
        rows = np.zeros((len(ids), len(VOCAB)), dtype=np.float32)
        for i in range(len(ids)):
            rows[i, (i + 1) % len(VOCAB)] = 3.0
        self.scores, self.n_tokens = rows, len(ids)

    def close(self) -> None:
        pass


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    module = types.ModuleType("llama_cpp")
    module.Llama = _StandIn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    return gguf


def test_char_offsets_map_utf8_bytes_to_characters() -> None:
    assert _char_offsets("aé") == [0, 1, 1, 2]


def test_scores_follow_the_request_contract(stand_in: Path) -> None:
    model = load_model(f"llamacpp:{stand_in}")
    assert model.info.backend == "llamacpp" and model.info.context_window == 4096
    [res] = asyncio.run(model.score([ScoreRequest("Paris is in", " France.")]))  # type: ignore[attr-defined]
    # <s> Pa ris " is" " in" | " Fr" ance .  -> the continuation starts at token 5
    assert res.tokens == (" Fr", "ance", ".") and res.prompt_tokens == 5
    assert res.offsets == ((0, 3), (3, 7), (7, 8)) and not res.straddles_boundary
    # Token i is predicted by row i-1, which puts 3.0 on token i: log(e^3 / (e^3 + 10)) each.
    expected = 3.0 - math.log(math.exp(3.0) + len(VOCAB) - 1)
    assert all(abs(lp - expected) < 1e-6 for lp in res.logprobs)


def test_multibyte_characters_keep_character_offsets(stand_in: Path) -> None:
    model = load_model(f"llamacpp:{stand_in}")
    [res] = asyncio.run(model.score([ScoreRequest("Paris", " été")]))  # type: ignore[attr-defined]
    assert res.tokens == (" é", "t", "é") and res.offsets == ((0, 2), (2, 3), (3, 4))


def test_count_tokens_and_bad_requests(stand_in: Path) -> None:
    model = load_model(f"llamacpp:{stand_in}", context_window=6)
    assert model.count_tokens("Paris is") == 3  # no BOS
    with pytest.raises(ValueError, match="over the context window of 6"):
        asyncio.run(model.score([ScoreRequest("Paris is in", " France.")]))  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="unknown options for the llamacpp backend: device"):
        load_model(f"llamacpp:{stand_in}", device="cuda")


def test_a_missing_file_and_a_missing_library_say_what_to_do(
    stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        load_model(f"llamacpp:{stand_in.parent / 'absent.gguf'}")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(BackendUnavailableError, match=r"ragsense\[llamacpp\]"):
        load_model(f"llamacpp:{stand_in}")


@pytest.mark.slow
def test_the_real_library_agrees_with_the_float32_path_on_smollm2() -> None:
    pytest.importorskip("llama_cpp")
    request = ScoreRequest(
        "Context: Paris is the capital of France.\nQuestion: What is the capital?\nAnswer:", " Paris."
    )
    ours = load_model("llamacpp:smollm2-135m")
    torch_model = load_model("smollm2-135m", threads=1)
    [a] = asyncio.run(ours.score([request]))  # type: ignore[attr-defined]
    [b] = asyncio.run(torch_model.score([request]))  # type: ignore[attr-defined]
    # The same tokens in the same places (the token strings differ in spelling: text against BPE symbols).
    assert a.offsets == b.offsets and a.prompt_tokens == b.prompt_tokens
    # Quantized matrix products against de-quantized float32 ones: close, not equal.
    assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 0.5
    [again] = asyncio.run(ours.score([request]))  # type: ignore[attr-defined]
    assert again.logprobs == a.logprobs  # deterministic at a fixed thread count


def test_checked_gguf_keeps_the_join_and_joins_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import hashlib
    from dataclasses import replace

    from ragsense.models import _bundled
    from ragsense.models._parted import PartedWeights

    weights = b"GGUF" + bytes(range(256)) * 4
    spec = _bundled.BUNDLED_MODELS["qwen2.5-coder-0.5b"]
    parts = PartedWeights("0", (), len(weights), hashlib.sha256(weights).hexdigest())
    monkeypatch.setitem(_bundled.BUNDLED_MODELS, spec.name, replace(spec, parts=parts))
    monkeypatch.setenv("RAGSENSE_CACHE_DIR", str(tmp_path))
    joins: list[Path] = []

    def join(s: _bundled.BundledModel, folder: Path) -> Path:  # stands in for joining the installed parts
        joins.append(folder)
        (folder / s.gguf_file).write_bytes(weights)
        return folder / s.gguf_file

    monkeypatch.setattr(_bundled, "_gguf_path", join)
    first = _bundled.checked_gguf(spec.name)
    assert first.read_bytes() == weights and len(joins) == 1
    assert _bundled.checked_gguf(spec.name) == first and len(joins) == 1  # kept, checked, not joined again
    first.write_bytes(weights[:-1] + b"x")  # altered in the cache
    assert _bundled.checked_gguf(spec.name).read_bytes() == weights and len(joins) == 2
