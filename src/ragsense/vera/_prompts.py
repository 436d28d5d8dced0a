"""VERA's judge prompts: typed, versioned, with few-shot examples.

Each prompt is a :class:`JudgePrompt`: a pydantic input model, the allowed labels, an instruction and
worked examples. One object renders both shapes a judge uses:

- a plain completion prompt ending in ``Label:``, for judges that score the allowed labels with
  log-probabilities (the bundled models, ``ragsense serve``, vLLM);
- a conversation asking for a JSON reply ``{"reason": ..., "label": ...}`` under a JSON schema, for
  chat APIs without log-probabilities (structured output).

``version`` is part of every judge-cache key: editing a prompt's text without raising its version
would silently reuse answers to the old text, so a test pins each prompt's text hash to its version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ragsense.models import ChatMessage

REASON_MAX_CHARS = 300
InputT = TypeVar("InputT", bound=BaseModel)


class JudgeInput(BaseModel):
    """Base of every judge prompt's input: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class QuestionInput(JudgeInput):
    question: str


class ContextSentenceInput(JudgeInput):
    question: str
    sentence: str
    # The sentence before, so "It opened in 1891." can be judged: shown, never judged itself.
    preceding: str = ""


class StatementInput(JudgeInput):
    question: str
    statement: str


class AdherenceInput(JudgeInput):
    context: str
    statement: str


class SplitInput(JudgeInput):
    question: str
    answer: str


class Judgment(BaseModel):
    """A judge's validated reply: a short reason, one allowed label, an optional corrected statement."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=REASON_MAX_CHARS)
    label: str
    correction: str | None = None


class StatementList(BaseModel):
    """A judge's validated reply to the splitting prompt."""

    model_config = ConfigDict(extra="forbid")

    statements: list[str] = Field(min_length=1, max_length=32)


@dataclass(frozen=True)
class Example(Generic[InputT]):
    """A worked example: the input, the right label and the reason a careful judge would give."""

    input: InputT
    label: str
    reason: str
    correction: str | None = None


@dataclass(frozen=True)
class JudgePrompt(Generic[InputT]):
    """A labelling prompt. ``labels`` are single words; ``grounded_labels`` / ``positive_labels`` say
    which labels count as a pass for the step's score.

    >>> p = STATEMENT_RELEVANCE
    >>> text = p.render_plain(StatementInput(question="Who?", statement="Ann did."))
    >>> text.endswith("Statement: Ann did.\\nLabel:")
    True
    >>> p.choices
    (' relevant', ' irrelevant')
    """

    name: str
    version: int
    input_model: type[InputT]
    instruction: str
    labels: tuple[str, ...]
    positive_labels: tuple[str, ...]
    label_help: tuple[str, ...]
    examples: tuple[Example[InputT], ...]
    # The field names shown to the judge, in order, with their display names.
    fields: tuple[tuple[str, str], ...]
    correctable: bool = False
    # Leading fields that the items of one row share (the adherence context): a label-scoring judge
    # runs them once per row as a cached prefix instead of once per statement.
    shared_fields: int = 0

    @property
    def choices(self) -> tuple[str, ...]:
        """The continuations a label-scoring judge scores after ``Label:``."""
        return tuple(" " + label for label in self.labels)

    @property
    def fingerprint(self) -> str:
        """Hash of everything the judge sees except the item: part of every cache key."""
        blob = json.dumps(
            [self.name, self.version, self.instruction, self.labels, self.label_help, self._examples_text()]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # -- plain (label scoring) ------------------------------------------------------------------
    def render_item(self, item: InputT) -> str:
        values = item.model_dump()
        lines = []
        for field_name, shown in self.fields:
            value = str(values[field_name]).strip()
            if field_name == "preceding" and not value:
                continue
            lines.append(f"{shown}: {value}")
        return "\n".join(lines)

    def _label_lines(self) -> str:
        return "\n".join(
            f"- {label}: {text}" for label, text in zip(self.labels, self.label_help, strict=True)
        )

    def _examples_text(self) -> str:
        blocks = []
        for ex in self.examples:
            block = f"{self.render_item(ex.input)}\nLabel: {ex.label}\nReason: {ex.reason}"
            blocks.append(block)
        return "\n\n".join(blocks)

    def plain_prefix(self) -> str:
        """The instruction and worked examples: the part shared by every item (its KV state is reused)."""
        return f"{self.instruction}\nLabels:\n{self._label_lines()}\n\n{self._examples_text()}\n\n"

    def shared_length(self, item: InputT) -> int:
        """Characters of :meth:`render_plain` that items like ``item`` share: the instruction and
        examples, plus the first :attr:`shared_fields` field lines. It ends after one newline: BPE
        tokenizers (SmolLM2) write a trailing "\\n\\n" as one token but split it inside the full prompt.
        """
        if self.shared_fields <= 0:
            return len(self.plain_prefix()) - 1
        lines = self.render_item(item).split("\n")
        shared = "\n".join(lines[: self.shared_fields]) + "\n"
        return len(self.plain_prefix()) + len(shared)

    def render_plain(self, item: InputT) -> str:
        """The completion prompt for ``item``; a judge continues it with one of :attr:`choices`."""
        return f"{self.plain_prefix()}{self.render_item(item)}\nLabel:"

    def reason_prompt(self, item: InputT, label: str) -> str:
        """The prompt a label-scoring judge continues to explain the label it chose."""
        return f"{self.render_plain(item)} {label}\nReason:"

    # -- chat (structured output) ---------------------------------------------------------------
    def json_schema(self) -> dict[str, Any]:
        """The reply's JSON schema: reason first, so the judge reasons before it labels."""
        properties: dict[str, Any] = {
            "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
            "label": {"type": "string", "enum": list(self.labels)},
        }
        if self.correctable:
            properties["correction"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def _reply(self, ex: Example[InputT]) -> str:
        reply: dict[str, Any] = {"reason": ex.reason, "label": ex.label}
        if self.correctable:
            reply["correction"] = ex.correction
        return json.dumps(reply, ensure_ascii=False)

    def render_chat(self, item: InputT) -> list[ChatMessage]:
        """System instruction, the examples as earlier turns, then the item."""
        correction = (
            ' For an "unsupported" statement, "correction" is the statement corrected from the context '
            "when the context says what is true instead, else null; for other labels it is null."
            if self.correctable
            else ""
        )
        fields = '"reason": a short reason (one sentence), "label": one label'
        if self.correctable:
            fields += ', "correction": a corrected statement or null'
        system = (
            f"{self.instruction}\nLabels:\n{self._label_lines()}\n"
            f"Reply with JSON only: {{{fields}}}.{correction}"
        )
        messages = [ChatMessage("system", system)]
        for ex in self.examples:
            messages.append(ChatMessage("user", self.render_item(ex.input)))
            messages.append(ChatMessage("assistant", self._reply(ex)))
        messages.append(ChatMessage("user", self.render_item(item)))
        return messages

    def render_chat_labels(self, item: InputT) -> list[ChatMessage]:
        """A conversation for a label-scoring judge on a chat model: the instruction as the system turn,
        each worked example as a user turn answered by its bare label, then the item. The judge scores
        each label as the assistant's reply."""
        system = f"{self.instruction}\nLabels:\n{self._label_lines()}\nReply with the label only."
        messages = [ChatMessage("system", system)]
        for ex in self.examples:
            messages.append(ChatMessage("user", self.render_item(ex.input)))
            messages.append(ChatMessage("assistant", ex.label))
        messages.append(ChatMessage("user", self.render_item(item)))
        return messages

    def parse(self, text: str) -> Judgment:
        """Validate a JSON reply; raises ``ValueError`` naming what is wrong."""
        judgment = Judgment.model_validate_json(text)
        if judgment.label not in self.labels:
            raise ValueError(f"label {judgment.label!r} is not one of {', '.join(self.labels)}")
        if judgment.correction is not None and not judgment.correction.strip():
            judgment = judgment.model_copy(update={"correction": None})
        return judgment


RETRIEVAL_NEED = JudgePrompt(
    name="retrieval_need",
    version=1,
    input_model=QuestionInput,
    instruction=(
        "Decide whether answering the question needs facts from external documents (specific people, "
        "places, events, numbers, organisations, documents) or can be answered without any documents "
        "(greetings, arithmetic, rewriting, definitions of everyday words)."
    ),
    labels=("yes", "no"),
    positive_labels=("yes",),
    label_help=("documents are needed", "no documents are needed"),
    examples=(
        Example(
            QuestionInput(question="In which year did the Orvel bridge open?"),
            "yes",
            "The opening year of a specific bridge is a fact found in documents.",
        ),
        Example(QuestionInput(question="What is 12 times 7?"), "no", "Arithmetic needs no documents."),
    ),
    fields=(("question", "Question"),),
)

CONTEXT_RELEVANCE = JudgePrompt(
    name="context_relevance",
    version=1,
    input_model=ContextSentenceInput,
    instruction=(
        "Decide whether the sentence from a retrieved document helps answer the question: it states "
        "the answer or a fact needed to reach it. The preceding sentence is shown only so that words "
        "like 'it' or 'he' can be understood."
    ),
    labels=("relevant", "irrelevant"),
    positive_labels=("relevant",),
    label_help=("the sentence helps answer the question", "the sentence does not help"),
    examples=(
        Example(
            ContextSentenceInput(
                question="Who designed the Orvel bridge?",
                sentence="It was designed by the engineer Mara Quint.",
                preceding="The Orvel bridge crosses the Lorn river.",
            ),
            "relevant",
            "It names the bridge's designer, which is what the question asks.",
        ),
        Example(
            ContextSentenceInput(
                question="Who designed the Orvel bridge?",
                sentence="The Brack hills are known for slate quarries.",
                preceding="",
            ),
            "irrelevant",
            "Slate quarries say nothing about who designed the bridge.",
        ),
    ),
    fields=(("question", "Question"), ("preceding", "Preceding sentence"), ("sentence", "Sentence")),
)

STATEMENT_RELEVANCE = JudgePrompt(
    name="response_relevance",
    version=1,
    input_model=StatementInput,
    instruction=(
        "Decide whether the statement from an answer is relevant to the question: it gives the answer "
        "or information the question asks for. Whether it is true does not matter here."
    ),
    labels=("relevant", "irrelevant"),
    positive_labels=("relevant",),
    label_help=("it addresses the question", "it does not address the question"),
    examples=(
        Example(
            StatementInput(
                question="Who was the first person to set foot on the moon?",
                statement="Neil Armstrong was the first person to set foot on the moon.",
            ),
            "relevant",
            "It names the first person on the moon, which the question asks.",
        ),
        Example(
            StatementInput(
                question="Who was the first person to set foot on the moon?",
                statement="Buzz Aldrin was the second person to set foot on the moon.",
            ),
            "irrelevant",
            "The question asks only for the first person.",
        ),
    ),
    fields=(("question", "Question"), ("statement", "Statement")),
)

RESPONSE_ADHERENCE = JudgePrompt(
    name="response_adherence",
    version=1,
    input_model=AdherenceInput,
    instruction=(
        "Classify the statement against the context: 'stated' if the context says it directly, "
        "'inferable' if it follows logically from the context without being said, 'unsupported' if the "
        "context does not support it or contradicts it."
    ),
    labels=("stated", "inferable", "unsupported"),
    positive_labels=("stated", "inferable"),
    label_help=(
        "directly derivable from the context",
        "not said, but logically inferable from the context",
        "not grounded in the context, or contradicted by it",
    ),
    examples=(
        Example(
            AdherenceInput(
                context="The Orvel bridge opened in 1891. It was designed by Mara Quint.",
                statement="Mara Quint designed the Orvel bridge.",
            ),
            "stated",
            "The context says the bridge was designed by Mara Quint.",
        ),
        Example(
            AdherenceInput(
                context="The Orvel bridge opened in 1891. It was designed by Mara Quint.",
                statement="The Orvel bridge existed in 1900.",
            ),
            "inferable",
            "A bridge that opened in 1891 existed in 1900, though the context does not say so.",
        ),
        Example(
            AdherenceInput(
                context="The Orvel bridge opened in 1891. It was designed by Mara Quint.",
                statement="The Orvel bridge opened in 1895.",
            ),
            "unsupported",
            "The context gives 1891 as the opening year, not 1895.",
            correction="The Orvel bridge opened in 1891.",
        ),
    ),
    fields=(("context", "Context"), ("statement", "Statement")),
    correctable=True,
    shared_fields=1,
)

PROMPTS: tuple[JudgePrompt[Any], ...] = (
    RETRIEVAL_NEED,
    CONTEXT_RELEVANCE,
    STATEMENT_RELEVANCE,
    RESPONSE_ADHERENCE,
)


@dataclass(frozen=True)
class SplitPrompt:
    """Ask a chat judge to split an answer into atomic statements (structured output)."""

    name: str = "atomic_statements"
    version: int = 1
    instruction: str = (
        "Split the answer into atomic statements: short, self-contained sentences that each state one "
        "fact, with pronouns replaced by what they refer to. Keep the answer's own words, add nothing. "
        "A short answer such as a name or a number is one statement, kept as written."
    )
    examples: tuple[tuple[SplitInput, tuple[str, ...]], ...] = (
        (
            SplitInput(
                question="Who was the first person to set foot on the moon?",
                answer="Neil Armstrong was the first person to set foot on the moon, followed by "
                "Buzz Aldrin, who became the second person to do so.",
            ),
            (
                "Neil Armstrong was the first person to set foot on the moon.",
                "Buzz Aldrin was the second person to set foot on the moon.",
            ),
        ),
        (SplitInput(question="Who designed the Orvel bridge?", answer="Mara Quint"), ("Mara Quint",)),
    )

    @property
    def fingerprint(self) -> str:
        blob = json.dumps(
            [self.name, self.version, self.instruction, [(i.model_dump(), s) for i, s in self.examples]]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"statements": {"type": "array", "items": {"type": "string"}, "maxItems": 32}},
            "required": ["statements"],
            "additionalProperties": False,
        }

    def render_chat(self, item: SplitInput) -> list[ChatMessage]:
        messages = [
            ChatMessage("system", f'{self.instruction}\nReply with JSON only: {{"statements": [...]}}.')
        ]
        for ex, statements in self.examples:
            messages.append(ChatMessage("user", f"Question: {ex.question}\nAnswer: {ex.answer}"))
            messages.append(ChatMessage("assistant", json.dumps({"statements": list(statements)})))
        messages.append(ChatMessage("user", f"Question: {item.question}\nAnswer: {item.answer}"))
        return messages

    def parse(self, text: str) -> list[str]:
        statements = [s.strip() for s in StatementList.model_validate_json(text).statements]
        if not all(statements):
            raise ValueError("an empty statement")
        return statements


SPLIT_STATEMENTS = SplitPrompt()


def conversation_text(messages: Sequence[ChatMessage]) -> str:
    """A stable text form of a conversation, for cache keys."""
    return json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
