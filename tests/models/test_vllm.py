"""The vLLM backend: its load-time errors here, its request mapping against the transformers backend, and
(where a CUDA GPU and vLLM are present) its real scores against the transformers backend's."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from ragsense.errors import BackendUnavailableError
from ragsense.models import ChoiceRequest, ScoreRequest, load_model
from ragsense.models._vllm import VLLMModel

HAS_VLLM = importlib.util.find_spec("vllm") is not None
REQUESTS = [
    ScoreRequest("Question: Where is the Eiffel Tower?\nAnswer:", " It stands in Paris, France."),
    ScoreRequest("The capital of Italy is", " Rome."),
    ScoreRequest("Context: Ada Lovelace wrote the first program.\nWho wrote it? Answer:", " Ada Lovelace"),
]


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_the_error_names_the_extra() -> None:
    with pytest.raises(BackendUnavailableError, match=r"pip install 'ragsense\[vllm\]'"):
        load_model("vllm:smollm2-135m")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present")
def test_without_a_gpu_the_error_says_so_at_load_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM importable (a stand-in module) but no GPU: the load must stop before building an engine.
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    with pytest.raises(BackendUnavailableError, match="needs a CUDA GPU and none is visible"):
        load_model("vllm:smollm2-135m")


class _Logprob:
    def __init__(self, logprob: float) -> None:
        self.logprob = logprob


class _Params:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class _EngineOnTransformers:
    """vLLM's ``LLM.generate`` contract (token-id prompts in, ``prompt_logprobs`` out: ``None`` at the
    first position, then ``{token_id: Logprob}``) computed by the bundled transformers model."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls: list[int] = []

    def generate(
        self, prompts: Sequence[dict[str, Any]], params: _Params, use_tqdm: bool = False
    ) -> list[Any]:
        assert params.kwargs["prompt_logprobs"] == 0 and params.kwargs["max_tokens"] == 1
        self.calls.append(sum(len(p["prompt_token_ids"]) for p in prompts))
        outputs = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            with torch.inference_mode():
                states, _ = self.model.forward_hidden(torch.tensor([ids]))
                values = self.model.token_logprobs(states[0, :-1], torch.tensor(ids[1:])).tolist()
            logprobs = [None] + [{t: _Logprob(v)} for t, v in zip(ids[1:], values, strict=True)]
            outputs.append(types.SimpleNamespace(prompt_logprobs=logprobs))
        return outputs


@pytest.mark.model
def test_scores_follow_the_contract_and_match_the_transformers_backend(smollm2: Any) -> None:
    engine = _EngineOnTransformers(smollm2)
    model = VLLMModel(
        engine,
        smollm2.tokenizer,
        name="smollm2-135m",
        fingerprint="test",
        context_window=2048,
        max_score_tokens=40,  # forces several engine calls
        sampling_params=_Params,
    )
    got = asyncio.run(model.score(REQUESTS))
    want = asyncio.run(smollm2.score(REQUESTS))
    assert len(engine.calls) >= 2 and max(engine.calls) <= 40  # grouped under the token budget
    for g, w in zip(got, want, strict=True):
        assert g.tokens == w.tokens and g.offsets == w.offsets and g.prompt_tokens == w.prompt_tokens
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    [choices] = asyncio.run(
        model.score_choices([ChoiceRequest("The capital of Italy is", (" Rome.", " Paris."))])
    )
    assert choices[0] == pytest.approx(want[1].total, abs=1e-4) and choices[0] > choices[1]


@pytest.mark.skipif(not (HAS_VLLM and torch.cuda.is_available()), reason="needs vLLM and a CUDA GPU")
@pytest.mark.model
def test_real_vllm_scores_match_the_transformers_backend(smollm2: Any) -> None:
    # float32 on both sides: what is left is kernel order (stated tolerance 2e-3 nats per token).
    model = load_model("vllm:smollm2-135m", dtype="float32", gpu_memory_utilization=0.3)
    got = asyncio.run(model.score(REQUESTS))  # type: ignore[attr-defined]
    want = asyncio.run(smollm2.score(REQUESTS))
    for g, w in zip(got, want, strict=True):
        assert g.tokens == w.tokens
        assert g.logprobs == pytest.approx(w.logprobs, abs=2e-3)
