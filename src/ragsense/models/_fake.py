"""A deterministic fake model for fast unit tests of logic. Never the only test of a feature.

Tokens are whitespace-separated words (a leading space belongs to the token, as in BPE). A token's
log-probability is high when its lowercase text occurs in the prompt and low otherwise, so
context-dependent metrics behave in the expected direction without a real model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    ScoreRequest,
)

_TOKEN = re.compile(r"\s*\S+")


def _noise(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 65535.0


class FakeModel:
    """Deterministic stand-in implementing every capability."""

    def __init__(self, name: str = "fake", context_window: int = 4096) -> None:
        self._info = ModelInfo(
            name=name, backend="fake", context_window=context_window, fingerprint=f"fake:{name}"
        )
        self.calls: list[int] = []  # batch sizes seen by score(), for tests of batching

    @property
    def info(self) -> ModelInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    async def aclose(self) -> None:
        return None

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        self.calls.append(len(requests))
        return [self._score_one(r) for r in requests]

    def _score_one(self, req: ScoreRequest) -> ContinuationScore:
        if not req.continuation:
            raise ValueError("empty continuation: nothing to score")
        prompt_words = {w.strip(".,;:!?").lower() for w in req.prompt.split()}
        tokens, offsets, logprobs = [], [], []
        for m in _TOKEN.finditer(req.continuation):
            word = m.group().strip().strip(".,;:!?").lower()
            seen = word in prompt_words
            tokens.append(m.group())
            offsets.append((m.start(), m.end()))
            logprobs.append(-0.2 - _noise(word) if seen else -6.0 - 2 * _noise(word))
        n_prompt = self.count_tokens(req.prompt)
        if n_prompt + len(tokens) > self._info.context_window:
            raise ValueError(
                f"prompt + continuation is {n_prompt + len(tokens)} tokens, over the context window of "
                f"{self._info.context_window}; truncate the context first"
            )
        return ContinuationScore(tuple(tokens), tuple(offsets), tuple(logprobs), n_prompt)

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        """Each choice's total is the sum of ``score([ScoreRequest(prompt, choice)])`` log-probs."""
        out = []
        for req in requests:
            if not req.choices:
                raise ValueError("ChoiceRequest has no choices: give at least one")
            out.append(
                tuple(float(sum(self._score_one(ScoreRequest(req.prompt, c)).logprobs)) for c in req.choices)
            )
        return out

    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        out = []
        for p in prompts:
            lines = [ln for ln in p.strip().splitlines() if ln.strip()]
            text = f"fake answer about {lines[-1][:40] if lines else ''}".strip()
            words = text.split()[: config.max_new_tokens]
            out.append(Generation(" ".join(words), "stop", len(words)))
        return out

    @property
    def chat_available(self) -> bool:
        return True

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        # A conversation is rendered as its turns one per line, so the fake answers its last line.
        prompts = ["\n".join(f"{m.role}: {m.content}" for m in conv) for conv in conversations]
        return await self.generate(prompts, config)


def create_fake_model(model_id: str = "fake", **options: Any) -> FakeModel:
    window = int(options.pop("context_window", 4096))
    if options:
        raise TypeError(f"unknown options for the fake backend: {', '.join(sorted(options))}")
    return FakeModel(model_id, context_window=window)
