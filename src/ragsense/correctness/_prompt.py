"""The base model's prompt p = instruction i + context c + question q, with the character span of each part.

The instruction (a task line and one worked example) is the same text in every condition, so the
Baseline prompt is the Normal prompt with the context line removed: "i and q remain consistent across
all conditions", as the paper requires.
"""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_VERSION = "correctness-prompt-v1"

INSTRUCTION = (
    "Answer the question with a short phrase from the context.\n\n"
    "Context: The Amazon River flows through Peru, Colombia and Brazil before it reaches the sea.\n"
    "Question: Which countries does the Amazon River flow through?\n"
    "Answer: Peru, Colombia and Brazil"
)

# The answer ends at the first line break: SQuAD answers are short phrases.
ANSWER_STOPS = ("\n",)

PLACES = ("prompt", "instruction", "context", "question", "output")
"""Where the log-likelihood is read, in the paper's order (Section 3.4.1)."""


@dataclass(frozen=True)
class PromptParts:
    """A rendered prompt and the ``[start, end)`` character span of each of its places.

    ``context`` is ``None`` in the Baseline condition, which has no context.
    """

    text: str
    instruction: tuple[int, int]
    context: tuple[int, int] | None
    question: tuple[int, int]


def build_prompt(question: str, context: str | None, *, instruction: str = INSTRUCTION) -> PromptParts:
    r"""Render the prompt for one condition (``context=None``: Baseline).

    The instruction's span starts after its first word: a model without a BOS token cannot score the
    first token of a text, so no backend scores that word and every backend reads the same tokens.

    >>> parts = build_prompt("Who?", "Ann met Bob.", instruction="Answer it.")
    >>> parts.text
    'Answer it.\n\nContext: Ann met Bob.\nQuestion: Who?\nAnswer:'
    >>> parts.text[slice(*parts.context)], parts.text[slice(*parts.question)]
    ('Ann met Bob.', 'Who?')
    >>> build_prompt("Who?", None, instruction="Answer it.").text
    'Answer it.\n\nQuestion: Who?\nAnswer:'
    """
    first_space = instruction.find(" ")
    instruction_span = (first_space if first_space > 0 else 0, len(instruction))
    text = instruction + "\n\n"
    context_span: tuple[int, int] | None = None
    if context is not None:
        text += "Context: "
        context_span = (len(text), len(text) + len(context))
        text += context + "\n"
    text += "Question: "
    question_span = (len(text), len(text) + len(question))
    text += question + "\nAnswer:"
    return PromptParts(text=text, instruction=instruction_span, context=context_span, question=question_span)
