"""The naive RAG pipeline: embed, store, retrieve top k, prompt a generator, answer.

It is the system the kinship benchmark tests by default and the retriever other experiments use.
Every question is answered on its own: nothing from one question reaches another's prompt.

Truncation policy: when the prompt (instruction, examples, k documents, question) does not fit the
generator's context window with room for the answer, the lowest-ranked documents are left out one
by one until it fits; the answer records how many were dropped (``documents_dropped``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragsense._async import run_sync
from ragsense.errors import ParameterError
from ragsense.models import (
    Generation,
    GenerationConfig,
    LanguageModel,
    SupportsChat,
    SupportsGeneration,
    chat_available,
    require,
)
from ragsense.rag._prompt import PromptFormat, RagPrompt
from ragsense.rag._store import VectorStore

# Stop at a blank line or where the model starts a new question, not at the first newline: a base
# model often opens its answer with a line break ("Answer:\nHenry"), and stopping there gave Gemma-3-270M
# an empty answer on 129 of 216 kinship questions. The answer is the first non-empty line.
ANSWER_STOPS = ("\n\n", "\nQuestion:", "\nDocuments:")
DEFAULT_GENERATION = GenerationConfig(max_new_tokens=32, stop=ANSWER_STOPS)


def first_line(text: str) -> str:
    r"""The first non-empty line of a generation, stripped (the answer; the rest is run-on text).

    >>> first_line("\n  Henry\nQuestion: who else?")
    'Henry'
    """
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


@dataclass(frozen=True)
class RetrievedDocument:
    """A document as retrieved: its position and id in the store, text, cosine score, 0-based rank."""

    index: int
    id: str
    text: str
    score: float
    rank: int


@dataclass(frozen=True)
class RagAnswer:
    """The pipeline's answer and everything that went into it.

    ``documents`` are the documents given to the generator, best first (the prompt may list them in
    another order, see :class:`RagPrompt`); ``documents_dropped`` counts retrieved documents left out
    to fit the context window.
    """

    question: str
    answer: str
    documents: tuple[RetrievedDocument, ...]
    k: int
    prompt_format: str
    documents_dropped: int = 0
    finish_reason: str = "stop"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_prompt_format(prompt_format: PromptFormat, generator: LanguageModel) -> str:
    """``"chat"`` or ``"plain"``: ``"auto"`` is chat when the generator has a chat format.

    >>> from ragsense.models import load_model
    >>> resolve_prompt_format("auto", load_model("fake")), resolve_prompt_format("plain", load_model("fake"))
    ('chat', 'plain')
    """
    if prompt_format not in ("auto", "chat", "plain"):
        raise ParameterError(f"must be auto, chat or plain, got {prompt_format!r}", parameter="prompt_format")
    if prompt_format == "chat" and not chat_available(generator):
        raise ParameterError(
            f"{generator.info.name} has no chat format; use plain or auto", parameter="prompt_format"
        )
    return (
        "chat"
        if prompt_format == "chat" or (prompt_format == "auto" and chat_available(generator))
        else "plain"
    )


def retrieve_documents(store: VectorStore, questions: Sequence[str], k: int) -> list[list[RetrievedDocument]]:
    """The top ``k`` documents of ``store`` per question, best first (ties in store order)."""
    ids, docs = store.ids, store.documents
    return [
        [
            RetrievedDocument(h.index, ids[h.index], docs[h.index], h.score, rank)
            for rank, h in enumerate(hits)
        ]
        for hits in store.search(list(questions), k)
    ]


async def generate_answers(
    generator: SupportsGeneration,
    questions: Sequence[str],
    documents: Sequence[Sequence[str]],
    *,
    prompt: RagPrompt,
    prompt_format: str,
    generation: GenerationConfig = DEFAULT_GENERATION,
) -> list[Generation]:
    """Let ``generator`` answer each question from its documents (best first), batched.

    ``prompt_format`` is ``"chat"`` or ``"plain"`` (see :func:`resolve_prompt_format`). The documents
    must already fit the generator's window (:class:`NaiveRagPipeline` drops the lowest-ranked ones).
    """
    if prompt_format == "chat":
        if not isinstance(generator, SupportsChat):
            raise ParameterError(f"{generator.info.name} cannot chat", parameter="prompt_format")
        conversations = [prompt.render_chat(q, t) for q, t in zip(questions, documents, strict=True)]
        return await generator.chat(conversations, generation)
    prompts = [prompt.render_plain(q, t) for q, t in zip(questions, documents, strict=True)]
    return await generator.generate(prompts, generation)


def answer_function(
    generator: LanguageModel,
    *,
    prompt: RagPrompt | None = None,
    prompt_format: PromptFormat = "auto",
    generation: GenerationConfig = DEFAULT_GENERATION,
) -> Callable[[list[str], list[list[str]]], Coroutine[Any, Any, list[str]]]:
    """``await answer(questions, documents_per_question)``: first-line answers from ``generator``.

    The shape VERA's enhancer and pipeline take for "the generator"; documents are ranked best first.

    >>> import asyncio
    >>> from ragsense.models import load_model
    >>> answer = answer_function(load_model("fake"), prompt_format="plain")
    >>> asyncio.run(answer(["Who?"], [["Ann did it."]]))
    ['fake answer about Answer:']
    """
    checked = require(generator, SupportsGeneration, "the generator")  # type: ignore[type-abstract]
    fmt = resolve_prompt_format(prompt_format, checked)
    rag_prompt = prompt or RagPrompt()

    async def answer(questions: list[str], documents: list[list[str]]) -> list[str]:
        generations = await generate_answers(
            checked, questions, documents, prompt=rag_prompt, prompt_format=fmt, generation=generation
        )
        return [first_line(g.text) for g in generations]

    return answer


class NaiveRagPipeline:
    """Retrieve the top ``k`` documents from ``store`` and let ``generator`` answer from them.

    ``prompt_format``: ``"chat"`` sends a conversation in the generator's chat format, ``"plain"`` a
    completion prompt, ``"auto"`` (default) chat when the generator has a chat format.

    >>> import numpy as np
    >>> from ragsense.models import load_model
    >>> from ragsense.rag import InMemoryVectorIndex
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    >>> store = InMemoryVectorIndex(Toy(), ["The cat is black.", "The dog is white."])
    >>> pipeline = NaiveRagPipeline(store, load_model("fake"), k=1)
    >>> [answer] = pipeline.answer_sync(["What colour is the cat?"])
    >>> [d.text for d in answer.documents]
    ['The cat is black.']
    """

    def __init__(
        self,
        store: VectorStore,
        generator: LanguageModel,
        *,
        k: int = 5,
        prompt: RagPrompt | None = None,
        prompt_format: PromptFormat = "auto",
        generation: GenerationConfig = DEFAULT_GENERATION,
    ) -> None:
        self.store = store
        # mypy rejects a Protocol as type[T] (python/mypy#4717); require() only isinstance-checks.
        self.generator = require(generator, SupportsGeneration, "the RAG pipeline")  # type: ignore[type-abstract]
        self.k = k
        self.prompt = prompt or RagPrompt()
        self.prompt_format: str = resolve_prompt_format(prompt_format, generator)
        self.generation = generation

    def retrieve(self, questions: Sequence[str], k: int | None = None) -> list[list[RetrievedDocument]]:
        """The top ``k`` documents per question, best first (ties in store order)."""
        k = self.k if k is None else k
        ids, docs = self.store.ids, self.store.documents
        return [
            [
                RetrievedDocument(h.index, ids[h.index], docs[h.index], h.score, rank)
                for rank, h in enumerate(hits)
            ]
            for hits in self.store.search(list(questions), k)
        ]

    async def answer(self, questions: Sequence[str], k: int | None = None) -> list[RagAnswer]:
        """Retrieve and answer every question (generation batched across questions)."""
        return await self.answer_from(questions, self.retrieve(questions, k))

    def answer_sync(self, questions: Sequence[str], k: int | None = None) -> list[RagAnswer]:
        return run_sync(self.answer(questions, k))

    async def answer_from(
        self, questions: Sequence[str], retrieved: Sequence[Sequence[RetrievedDocument]]
    ) -> list[RagAnswer]:
        """Answer each question from documents already retrieved for it (best first)."""
        if len(questions) != len(retrieved):
            raise ValueError("one list of retrieved documents per question is needed")
        fitted = [self._fit(q, list(docs)) for q, docs in zip(questions, retrieved, strict=True)]
        texts = [[d.text for d in docs] for docs, _ in fitted]
        generations = await generate_answers(
            self.generator,
            questions,
            texts,
            prompt=self.prompt,
            prompt_format=self.prompt_format,
            generation=self.generation,
        )
        return [
            RagAnswer(
                question=q,
                answer=first_line(g.text),
                documents=tuple(docs),
                k=len(r),
                prompt_format=self.prompt_format,
                documents_dropped=dropped,
                finish_reason=g.finish_reason,
            )
            for q, r, (docs, dropped), g in zip(questions, retrieved, fitted, generations, strict=True)
        ]

    def _fit(self, question: str, docs: list[RetrievedDocument]) -> tuple[list[RetrievedDocument], int]:
        # The plain rendering is a close upper bound of the chat rendering's length (same text, and
        # chat markup is a handful of tokens), so one measure serves both formats; 16 tokens spare.
        budget = self.generator.info.context_window - self.generation.max_new_tokens - 16
        dropped = 0
        while (
            docs
            and self.generator.count_tokens(self.prompt.render_plain(question, [d.text for d in docs]))
            > budget
        ):
            docs = docs[:-1]
            dropped += 1
        return docs, dropped
