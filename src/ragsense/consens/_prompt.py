"""The prompt ConSens scores the answer under."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The template of the ConSens paper, section 3 (the empty condition uses an empty context).
PAPER_TEMPLATE = (
    "Consider the following context:\n"
    "Context:\n"
    "{context}\n"
    "Please answer the following question:\n"
    "{question}\n"
    "Answer:"
)


@dataclass(frozen=True)
class PromptTemplate:
    """A template with ``{context}`` and ``{question}``; the answer follows it after ``answer_prefix``.

    >>> t = PromptTemplate()
    >>> t.render("Who?", ["Doc one.", "Doc two."]).splitlines()[2:4]
    ['Doc one.', '']
    >>> t.continuation("Alice.")
    ' Alice.'
    """

    template: str = PAPER_TEMPLATE
    document_separator: str = "\n\n"
    # Separates "Answer:" from the answer; part of the continuation so BPE sees " word" tokens.
    answer_prefix: str = " "

    def __post_init__(self) -> None:
        for field in ("{context}", "{question}"):
            if field not in self.template:
                raise ValueError(f"prompt template must contain {field}")

    def join(self, documents: Sequence[str]) -> str:
        return self.document_separator.join(documents)

    def render(self, question: str, documents: Sequence[str]) -> str:
        return self.render_context(question, self.join(documents))

    def render_context(self, question: str, context: str) -> str:
        # str.replace, not str.format: contexts often contain braces.
        return self.template.replace("{question}", question).replace("{context}", context)

    def render_split(
        self, question: str, documents: Sequence[str], context: str | None = None
    ) -> tuple[str, tuple[int, ...]]:
        """The prompt for ``context`` (default: the documents joined; else a cut of that join) and the
        character positions in it where each document within the context ends, and where the context
        ends: the points at which prompts over the same leading documents can share their prompt pass
        (:attr:`ScoreRequest.splits <ragsense.models.ScoreRequest.splits>`).

        >>> t = PromptTemplate("Q: {question}\\nC: {context}\\nA:")
        >>> prompt, splits = t.render_split("Why?", ["Doc one.", "Doc two."])
        >>> [prompt[:s][-8:] for s in splits]
        ['Doc one.', 'Doc two.']
        """
        context = self.join(documents) if context is None else context
        prompt = self.render_context(question, context)
        at = self.template.index("{context}")
        start = len(self.template[:at].replace("{question}", question))
        if not context or prompt[start : start + len(context)] != context:
            return prompt, ()  # no context, or a question that itself holds "{context}"
        ends: list[int] = []
        end = 0
        for document in documents:
            end += len(document)
            if end >= len(context):
                break
            ends.append(start + end)
            end += len(self.document_separator)
        return prompt, (*ends, start + len(context))

    def continuation(self, answer: str) -> str:
        return self.answer_prefix + answer
