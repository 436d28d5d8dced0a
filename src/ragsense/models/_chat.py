"""Chat for the transformers backend: the model's own chat template, rendered to a prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsense.errors import CapabilityError
from ragsense.models._interface import ChatMessage


def has_chat_template(tokenizer: Any) -> bool:
    """Whether the tokenizer carries a chat template (a base model often does not)."""
    return bool(getattr(tokenizer, "chat_template", None))


def render_chat(tokenizer: Any, model_name: str, conversation: Sequence[ChatMessage]) -> str:
    """The conversation in the model's chat template, ending with the assistant's turn opener.

    The rendering already holds every special token it needs (BOS included): tokenize it without
    adding any.
    """
    if not has_chat_template(tokenizer):
        raise CapabilityError(f"{model_name} has no chat template; use a plain prompt")
    messages = [{"role": m.role, "content": m.content} for m in conversation]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text)


def strip_added_bos(tokenizer: Any, text: str) -> str:
    """``text`` without a leading BOS token text when ``tokenizer`` adds a BOS itself.

    A chat template's rendering already holds the BOS; scoring and generating functions that add
    special tokens would double it. Removing the text lets them add it back: the token ids are then
    those of the rendering tokenized without special tokens. A tokenizer that adds no BOS (SmolLM2,
    whose BOS text ``<|im_start|>`` opens every chat turn) leaves ``text`` alone.
    """
    bos = getattr(tokenizer, "bos_token", None)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if not bos or bos_id is None or not text.startswith(bos):
        return text
    try:
        with_special = list(tokenizer("a", add_special_tokens=True)["input_ids"])
        plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    except (TypeError, KeyError, AttributeError):
        return text
    adds_bos = len(with_special) > len(plain) and with_special[:1] == [bos_id]
    return text[len(bos) :] if adds_bos else text
