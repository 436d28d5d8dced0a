"""The naive RAG pipeline: prompt shapes, document order, truncation, chat selection, real models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsense.errors import ParameterError
from ragsense.models import ChatMessage, Generation, GenerationConfig, ModelInfo
from ragsense.models._fake import FakeModel
from ragsense.rag import (
    GENERIC_EXAMPLES,
    InMemoryVectorIndex,
    NaiveRagPipeline,
    RagPrompt,
    open_vector_store,
)


class Keyword:
    """Toy embedder: one dimension per keyword, so retrieval order is known in advance."""

    name = fingerprint = "keyword"
    words = ("cat", "dog", "bird", "fish")
    dim = 4

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.array([[t.lower().count(w) + 0.01 * i for i, w in enumerate(self.words)] for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


class Recorder(FakeModel):
    """Records what the generator was sent."""

    def __init__(self, context_window: int = 4096, chat: bool = True) -> None:
        super().__init__("recorder", context_window=context_window)
        self.prompts: list[str] = []
        self.conversations: list[list[ChatMessage]] = []
        self._chat = chat

    @property
    def chat_available(self) -> bool:
        return self._chat

    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        self.prompts += list(prompts)
        return [Generation(f" answer {i}\n") for i in range(len(prompts))]

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        self.conversations += [list(c) for c in conversations]
        return [Generation("chat answer") for _ in conversations]


DOCS = ["A cat sat.", "A dog ran.", "A bird sang.", "A cat and a dog."]


def test_retrieval_and_plain_prompt_order() -> None:
    model = Recorder(chat=False)
    pipeline = NaiveRagPipeline(InMemoryVectorIndex(Keyword(), DOCS), model, k=2)
    assert pipeline.prompt_format == "plain"
    [answer] = pipeline.answer_sync(["Where is the cat?"])
    assert [d.text for d in answer.documents] == ["A cat sat.", "A cat and a dog."]
    assert [d.rank for d in answer.documents] == [0, 1]
    assert answer.answer == "answer 0"  # stripped
    prompt = model.prompts[0]
    assert prompt.index("- A cat sat.") < prompt.index("- A cat and a dog.")
    assert prompt.endswith("Question: Where is the cat?\nAnswer:")

    last = NaiveRagPipeline(
        InMemoryVectorIndex(Keyword(), DOCS), model, k=2, prompt=RagPrompt(document_order="best_last")
    )
    last.answer_sync(["Where is the cat?"])
    assert model.prompts[1].index("- A cat and a dog.") < model.prompts[1].index("- A cat sat.")


def test_chat_format_and_few_shot() -> None:
    model = Recorder(chat=True)
    prompt = RagPrompt(examples=GENERIC_EXAMPLES)
    pipeline = NaiveRagPipeline(InMemoryVectorIndex(Keyword(), DOCS), model, k=1, prompt=prompt)
    assert pipeline.prompt_format == "chat"
    [answer] = pipeline.answer_sync(["Which bird?"])
    conv = model.conversations[0]
    assert [m.role for m in conv] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert conv[2].content == GENERIC_EXAMPLES[0].answer
    assert conv[-1].content == "Documents:\n- A bird sang.\n\nQuestion: Which bird?"
    assert answer.prompt_format == "chat"
    plain = NaiveRagPipeline(
        InMemoryVectorIndex(Keyword(), DOCS), model, k=1, prompt=prompt, prompt_format="plain"
    )
    plain.answer_sync(["Which bird?"])
    assert model.prompts[-1].count("Answer: ") == 2  # both examples, then the open "Answer:"
    with pytest.raises(ParameterError, match="no chat format"):
        NaiveRagPipeline(InMemoryVectorIndex(Keyword(), DOCS), Recorder(chat=False), prompt_format="chat")


def test_questions_are_answered_independently() -> None:
    model = Recorder(chat=False)
    pipeline = NaiveRagPipeline(InMemoryVectorIndex(Keyword(), DOCS), model, k=1)
    answers = pipeline.answer_sync(["the cat?", "the fish?", "the dog?"])
    assert len(model.prompts) == 3
    assert "dog" not in model.prompts[0] and "cat" not in model.prompts[2].split("Question")[0]
    assert [a.question for a in answers] == ["the cat?", "the fish?", "the dog?"]


def test_truncation_drops_lowest_ranked_documents() -> None:
    long_docs = [f"cat {'word ' * 30}{i}" for i in range(6)]
    # Fake tokens are words: instruction ~17 + each document ~33 + question; 140 leaves room for 2.
    model = Recorder(context_window=140 + 32 + 16, chat=False)
    pipeline = NaiveRagPipeline(InMemoryVectorIndex(Keyword(), long_docs), model, k=6)
    [answer] = pipeline.answer_sync(["cat?"])
    assert answer.k == 6
    assert answer.documents_dropped == 6 - len(answer.documents)
    assert 0 < len(answer.documents) < 6
    assert [d.rank for d in answer.documents] == list(range(len(answer.documents)))  # the best kept
    assert model.count_tokens(model.prompts[0]) <= 140


def test_pipeline_needs_generation() -> None:
    class InfoOnly:
        info = ModelInfo(name="bare", backend="none", context_window=64, fingerprint="bare")

        def count_tokens(self, text: str) -> int:
            return 1

        async def aclose(self) -> None:
            return None

    with pytest.raises(Exception, match="SupportsGeneration"):
        NaiveRagPipeline(InMemoryVectorIndex(Keyword(), DOCS), InfoOnly())  # type: ignore[arg-type]


@pytest.mark.model
def test_real_pipeline_minilm_faiss_smollm2(smollm2: Any, tmp_path: Path) -> None:
    from ragsense.embeddings import load_embedder

    docs = [
        "Henry is the father of Oliver.",
        "Grace is the mother of Oliver.",
        "Amelia is the sister of Oliver.",
        "The Lorn river rises in the Brack hills.",
        "Walter is the husband of Grace.",
    ]
    store = open_vector_store("faiss", load_embedder("minilm"), docs, path=tmp_path / "store")
    pipeline = NaiveRagPipeline(store, smollm2, k=3, prompt=RagPrompt(examples=GENERIC_EXAMPLES))
    first = pipeline.answer_sync(["Who is the father of Oliver?", "Who is the sister of Oliver?"])
    assert first[0].documents[0].text == "Henry is the father of Oliver."
    assert first[1].documents[0].text == "Amelia is the sister of Oliver."
    assert all(a.answer for a in first)
    again = pipeline.answer_sync(["Who is the father of Oliver?", "Who is the sister of Oliver?"])
    assert [a.answer for a in again] == [a.answer for a in first]  # deterministic
    reopened = open_vector_store("faiss", load_embedder("minilm"), docs, path=tmp_path / "store")
    assert [h.index for h in reopened.search(["Who is the father of Oliver?"], 5)[0]] == [
        d.index for d in pipeline.retrieve(["Who is the father of Oliver?"], 5)[0]
    ]
