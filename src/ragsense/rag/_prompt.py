"""How retrieved documents and a question become a generator's input.

One prompt object renders both shapes a generator can take: a conversation (instruction-tuned models
and chat APIs) and a plain completion prompt (base models). The same documents in the same order go
into either, so switching format changes only the wrapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ragsense.models import ChatMessage

DocumentOrder = Literal["auto", "best_first", "best_last"]
PromptFormat = Literal["auto", "chat", "plain"]

DEFAULT_INSTRUCTION = (
    "Answer the question using only the documents below. Reply with the answer only, in a few words."
)


@dataclass(frozen=True)
class FewShotExample:
    """A worked example shown before the real question (documents, question, answer)."""

    documents: tuple[str, ...]
    question: str
    answer: str


# Generic examples, deliberately about nothing the built-in benchmarks ask: they teach the format
# (read the documents, reply with a short span), not the task.
GENERIC_EXAMPLES: tuple[FewShotExample, ...] = (
    FewShotExample(
        documents=(
            "The Lorn river rises in the Brack hills.",
            "Tessaly is the largest town on the Lorn river.",
            "The Brack hills are known for slate quarries.",
        ),
        question="What is the largest town on the Lorn river?",
        answer="Tessaly",
    ),
    FewShotExample(
        documents=(
            "The Orvel bridge was designed by the engineer Mara Quint.",
            "The Orvel bridge opened in 1891.",
        ),
        question="Who designed the Orvel bridge?",
        answer="Mara Quint",
    ),
)


@dataclass(frozen=True)
class RagPrompt:
    """A versioned RAG prompt.

    ``document_order``: ``"best_first"`` lists the top-ranked document first (the usual LangChain
    order); ``"best_last"`` puts it right before the question; ``"auto"`` (default) is best last in a
    conversation and best first in a plain prompt. Measured on the kinship benchmark's control
    questions (docs/results.md): best last lifts SmolLM2-135M's chat answers from 0.29 to 0.63, while
    in a plain prompt without examples it costs both bundled models (0.25 -> 0.17, 0.58 -> 0.25).
    ``examples``: few-shot examples rendered in the same format before the real question.

    >>> prompt = RagPrompt(document_order="best_last")  # ranked best first in, best last out
    >>> print(prompt.render_plain("Who designed it?", ["A built it.", "B designed it."]))
    Answer the question using only the documents below. Reply with the answer only, in a few words.
    <BLANKLINE>
    Documents:
    - B designed it.
    - A built it.
    <BLANKLINE>
    Question: Who designed it?
    Answer:
    """

    instruction: str = DEFAULT_INSTRUCTION
    document_order: DocumentOrder = "auto"
    examples: tuple[FewShotExample, ...] = field(default=())
    version: str = "rag-prompt-v1"

    def ordered(self, ranked_documents: Sequence[str], *, chat: bool) -> list[str]:
        """Documents in prompt order, from documents ranked best first."""
        docs = list(ranked_documents)
        best_last = self.document_order == "best_last" or (self.document_order == "auto" and chat)
        return docs[::-1] if best_last else docs

    @staticmethod
    def _block(documents: Sequence[str], question: str) -> str:
        listed = "\n".join(f"- {d}" for d in documents) if documents else "(no documents)"
        return f"Documents:\n{listed}\n\nQuestion: {question}"

    def render_plain(self, question: str, ranked_documents: Sequence[str]) -> str:
        """A completion prompt ending in ``Answer:``; the generator continues it."""
        parts = [self.instruction, ""]
        for ex in self.examples:
            parts += [
                self._block(self.ordered(ex.documents, chat=False), ex.question),
                f"Answer: {ex.answer}",
                "",
            ]
        parts += [self._block(self.ordered(ranked_documents, chat=False), question), "Answer:"]
        return "\n".join(parts)

    def render_chat(self, question: str, ranked_documents: Sequence[str]) -> list[ChatMessage]:
        """A conversation: the instruction as system turn, examples as user/assistant turns."""
        messages = [ChatMessage("system", self.instruction)]
        for ex in self.examples:
            messages.append(
                ChatMessage("user", self._block(self.ordered(ex.documents, chat=True), ex.question))
            )
            messages.append(ChatMessage("assistant", ex.answer))
        messages.append(ChatMessage("user", self._block(self.ordered(ranked_documents, chat=True), question)))
        return messages
