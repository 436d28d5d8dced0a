"""The structured-output judge: a chat model's JSON under the prompt's schema, validated, asked again once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ragsense.cache import cache_key
from ragsense.errors import CapabilityError
from ragsense.models import ChatMessage, GenerationConfig, LanguageModel, SupportsChat, chat_available
from ragsense.vera._prompts import SPLIT_STATEMENTS, JudgePrompt, SplitInput, conversation_text
from ragsense.vera.judges._cache import VerdictCache
from ragsense.vera.judges._verdict import SplitResult, Verdict

# Room for a reason of up to 300 characters, the label and a correction.
CHAT_CONFIG_TOKENS = 256


class ChatJudge(VerdictCache):
    """Judge through a chat model's structured output: JSON under the prompt's schema, validated.

    A reply that does not validate is answered once with the validation error and a request for JSON
    only; a second bad reply, a timeout or a server error gives a failed verdict with the raw text.
    """

    def __init__(
        self, model: LanguageModel, *, cache_dir: str | Path | None = None, attempts: int = 2
    ) -> None:
        super().__init__(cache_dir)
        if not chat_available(model):
            raise CapabilityError(
                f"a structured-output judge needs a chat model; {model.info.name!r} has no chat format"
            )
        assert isinstance(model, SupportsChat)
        self.model: SupportsChat = model
        self.attempts = attempts

    @property
    def description(self) -> str:
        return f"structured:{self.model.info.name}"

    @property
    def can_split(self) -> bool:
        return True

    async def _ask(
        self, messages: list[ChatMessage], schema: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, error)``: one chat call, exceptions turned into an error."""
        config = GenerationConfig(max_new_tokens=CHAT_CONFIG_TOKENS, json_schema=json.dumps(schema))
        try:
            [generation] = await self.model.chat([messages], config)
        except (ValueError, RuntimeError, TypeError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return generation.text, None

    async def _validated(
        self, messages: list[ChatMessage], schema: dict[str, Any], parse: Any
    ) -> tuple[Any, Verdict | None]:
        """Ask, validate, ask again once on a bad reply. ``(parsed, None)`` or ``(None, failed verdict)``."""
        raw: str | None = None
        error = "no attempt made"
        conversation = list(messages)
        for attempt in range(self.attempts):
            text, call_error = await self._ask(conversation, schema)
            if text is None:
                error = f"the judge call failed: {call_error}"
                continue
            raw = text
            try:
                return parse(text), None
            except (ValidationError, ValueError) as exc:
                error = f"the judge's reply did not validate: {_short(exc)}"
                if attempt + 1 < self.attempts:
                    conversation = [
                        *messages,
                        ChatMessage("assistant", text),
                        ChatMessage(
                            "user", f"That reply is not valid ({_short(exc)}). Reply again with JSON only."
                        ),
                    ]
        tries = f"after {self.attempts} attempts" if self.attempts > 1 else "after 1 attempt"
        return None, Verdict(None, error=f"{error} ({tries})", raw=raw)

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        schema = prompt.json_schema()
        conversations = [prompt.render_chat(item) for item in items]
        keys = [
            cache_key("structured", self.model.info.fingerprint, prompt.fingerprint, conversation_text(c))
            for c in conversations
        ]

        async def one(key: str, conversation: list[ChatMessage]) -> Verdict:
            hit = self._get(key)
            if hit is not None:
                return Verdict(**hit)
            judgment, failed = await self._validated(conversation, schema, prompt.parse)
            if failed is not None:
                return failed
            verdict = Verdict(
                judgment.label,
                reason=judgment.reason.strip() or None,
                correction=judgment.correction if prompt.correctable else None,
            )
            self._put(key, verdict.to_dict())
            return verdict

        # The client bounds concurrency itself; local chat models run one at a time anyway.
        return list(await asyncio.gather(*(one(k, c) for k, c in zip(keys, conversations, strict=True))))

    async def split(self, items: Sequence[SplitInput]) -> list[SplitResult]:
        prompt = SPLIT_STATEMENTS
        schema = prompt.json_schema()

        async def one(item: SplitInput) -> SplitResult:
            conversation = prompt.render_chat(item)
            key = cache_key(
                "split", self.model.info.fingerprint, prompt.fingerprint, conversation_text(conversation)
            )
            hit = self._get(key)
            if hit is not None:
                return list(hit)
            statements, failed = await self._validated(conversation, schema, prompt.parse)
            if failed is not None:
                return failed
            self._put(key, statements)
            return list(statements)

        return list(await asyncio.gather(*(one(item) for item in items)))


def _short(exc: Exception) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."
