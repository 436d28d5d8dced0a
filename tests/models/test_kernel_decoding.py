"""The one log-prob kernel and the greedy decoder of the transformers backend, on the bundled models."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import ragsense.models._kernel as kernel_module
from ragsense.models import GenerationConfig, ScoreRequest
from ragsense.models._decoding import hf_generate

pytestmark = pytest.mark.model

PROMPTS = [
    "Documents:\nAmelia is the wife of Oliver.\nQuestion: Who is the husband of Amelia?\nAnswer:",
    "The capital of France is",
    "Question: Name three colours.\nAnswer:",
]
CONFIGS = [
    GenerationConfig(max_new_tokens=24),
    GenerationConfig(max_new_tokens=24, stop=("\n",)),
    GenerationConfig(max_new_tokens=24, stop=("\n\n", "\nQuestion:", ".")),
]


CONFIG_IDS = ["no-stop", "newline", "multi-token-stops"]
# Every stop rule on SmolLM2 in the default suite; on Gemma (a 262k vocabulary: Hugging Face generate is
# slow there) all three with -m slow (the default suite's 15 minutes).
CASES = [pytest.param("smollm2", c, id=f"smollm2-{i}") for c, i in zip(CONFIGS, CONFIG_IDS, strict=True)] + [
    pytest.param("gemma3", c, id=f"gemma3-{i}", marks=pytest.mark.slow)
    for c, i in zip(CONFIGS, CONFIG_IDS, strict=True)
]


@pytest.mark.parametrize(("name", "config"), CASES)
def test_greedy_generation_reproduces_hf_generate(name: str, config: GenerationConfig, request: Any) -> None:
    model = request.getfixturevalue(name)
    ours = model.generate_sync(PROMPTS, config)
    theirs = hf_generate(
        model._model,
        model.tokenizer,
        model.torch_device,
        model._pad_id,
        lambda lengths: [[i] for i in range(len(lengths))],
        PROMPTS,
        config,
        add_special_tokens=True,
    )
    assert ours == theirs  # text, finish_reason and n_tokens


def test_target_logprobs_are_the_log_softmax_and_independent_of_the_chunking(
    smollm2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = smollm2.kernel
    ids = torch.tensor([smollm2.tokenizer("Paris is the capital and largest city of France.")["input_ids"]])
    with torch.inference_mode():
        states, _ = kernel.forward(ids)
        rows, targets = states[0, :-1], ids[0, 1:]
        full = torch.log_softmax(kernel.logits(rows), dim=-1)
        expected = full.gather(1, targets[:, None])[:, 0]
        got = kernel.target_logprobs(rows, targets)
        # Same maths, another reduction order over 49k logits: float32 agrees to about 3e-5 nats.
        assert torch.allclose(got, expected, atol=1e-4, rtol=0)
        values, best = kernel.target_logprobs_top(rows, targets, 3)
        assert torch.equal(values, got)
        assert [row for chunk in best for row in chunk[1]] == full.topk(3, dim=-1).indices.tolist()
        monkeypatch.setattr(kernel_module, "HEAD_CHUNK", 3)  # many chunks: the same values
        assert torch.allclose(kernel.target_logprobs(rows, targets), got, atol=1e-4, rtol=0)
        # One position, several candidates; the full row of one position.
        at = kernel.logprobs_at(rows[:1], targets[:2])
        assert torch.allclose(at, full[0, targets[:2]], atol=1e-4, rtol=0)
        assert torch.allclose(kernel.next_token_logprobs(rows[:1]), full[0], atol=1e-4, rtol=0)


def test_score_and_prompt_logprobs_share_the_kernel_bit_for_bit(gemma3: Any) -> None:
    text = "Marie Curie won two Nobel prizes."
    [echo] = gemma3.prompt_logprobs_sync([text])
    assert echo.tokens[0] == "Marie" and echo.logprobs[0] is not None  # Gemma adds a BOS
    [whole] = gemma3.score_sync([ScoreRequest("", text)])
    assert list(echo.logprobs) == list(whole.logprobs)
