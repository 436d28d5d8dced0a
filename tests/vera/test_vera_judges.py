"""Judges that never fail to parse: label scoring, structured chat with validation and retry, the cache."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsense.errors import CapabilityError, ModelCallError, ParameterError
from ragsense.models import ChatMessage, Generation, GenerationConfig, ModelInfo, load_model
from ragsense.models._fake import FakeModel
from ragsense.vera import (
    CONTEXT_RELEVANCE,
    PROMPTS,
    RESPONSE_ADHERENCE,
    SPLIT_STATEMENTS,
    STATEMENT_RELEVANCE,
    AdherenceInput,
    ChatJudge,
    LabelJudge,
    SplitInput,
    StatementInput,
    make_judge,
)

ITEM = StatementInput(question="Who designed the Orvel bridge?", statement="Mara Quint designed it.")


class ScriptedChat:
    """A chat model that replies from a script (one entry per call) and records what it was sent."""

    def __init__(self, replies: list[str | Exception], *, name: str = "scripted-chat") -> None:
        self.replies = list(replies)
        self.sent: list[tuple[list[ChatMessage], GenerationConfig]] = []
        self._info = ModelInfo(name=name, backend="scripted", context_window=4096, fingerprint=name)

    @property
    def info(self) -> ModelInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None

    @property
    def chat_available(self) -> bool:
        return True

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        out = []
        for conversation in conversations:
            self.sent.append((list(conversation), config))
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            out.append(Generation(reply))
        return out


# -- prompts --------------------------------------------------------------------------------------

# Editing a prompt's text changes its fingerprint; raise the version with it and re-pin both here
# (the fingerprint is in every cache key, the version tells users the prompt changed).
PINNED = {
    "retrieval_need": (1, "888413346bfbd044"),
    "context_relevance": (1, "084b8dd7f9d311cb"),
    "response_relevance": (1, "6d906b693d5b02ab"),
    "response_adherence": (1, "f898286032977473"),
}


def test_prompt_versions_are_pinned() -> None:
    assert {p.name: (p.version, p.fingerprint) for p in PROMPTS} == PINNED


def test_prompt_renders_plain_and_chat() -> None:
    text = STATEMENT_RELEVANCE.render_plain(ITEM)
    assert text.startswith(STATEMENT_RELEVANCE.plain_prefix())
    assert text.endswith("Statement: Mara Quint designed it.\nLabel:")
    assert "Label: relevant\nReason:" in text  # the worked examples
    chat = STATEMENT_RELEVANCE.render_chat(ITEM)
    assert chat[0].role == "system" and chat[-1].content.endswith("Statement: Mara Quint designed it.")
    assert json.loads(chat[2].content)["label"] == "relevant"  # examples answer in the JSON format
    schema = RESPONSE_ADHERENCE.json_schema()
    assert list(schema["properties"]) == ["reason", "label", "correction"]
    assert schema["properties"]["label"]["enum"] == ["stated", "inferable", "unsupported"]


def test_context_prompt_hides_empty_preceding_sentence() -> None:
    item = CONTEXT_RELEVANCE.input_model(question="Q?", sentence="S.", preceding="")
    assert "Preceding sentence" not in CONTEXT_RELEVANCE.render_item(item)


def test_prompt_parse_validates() -> None:
    ok = RESPONSE_ADHERENCE.parse('{"reason": "r", "label": "unsupported", "correction": " "}')
    assert ok.label == "unsupported" and ok.correction is None  # blank correction means none
    with pytest.raises(ValueError, match="not one of"):
        RESPONSE_ADHERENCE.parse('{"reason": "r", "label": "maybe"}')
    with pytest.raises(ValueError):
        RESPONSE_ADHERENCE.parse('{"reason": "r", "label": "stated"')  # cut off
    with pytest.raises(ValueError):
        RESPONSE_ADHERENCE.parse('{"reason": "' + "x" * 400 + '", "label": "stated"}')


# -- label scoring --------------------------------------------------------------------------------


class CountingFake(FakeModel):
    def __init__(self, name: str = "fake") -> None:
        super().__init__(name)
        self.choice_calls = 0

    async def score_choices(self, requests: Any) -> list[tuple[float, ...]]:
        self.choice_calls += 1
        return await super().score_choices(requests)


def test_label_judge_probabilities_and_cache(tmp_path: Path) -> None:
    model = CountingFake()
    judge = LabelJudge(model, cache_dir=tmp_path)
    items = [ITEM, StatementInput(question="Who?", statement="Zebras juggle.")]
    first = asyncio.run(judge.judge(STATEMENT_RELEVANCE, items))
    for v in first:
        assert v.ok and v.probabilities is not None and v.label in STATEMENT_RELEVANCE.labels
        assert math.isclose(sum(v.probabilities.values()), 1.0, rel_tol=1e-9)
        assert v.confidence == max(v.probabilities.values())
    assert model.choice_calls == 1  # both items in one batched call
    again = LabelJudge(model, cache_dir=tmp_path)
    second = asyncio.run(again.judge(STATEMENT_RELEVANCE, items))
    assert second == first and model.choice_calls == 1  # served from disk, identical
    assert again.hits == 2 and again.misses == 0


def test_label_judge_cache_key_includes_model_and_prompt(tmp_path: Path) -> None:
    a = LabelJudge(FakeModel("a"), cache_dir=tmp_path)
    asyncio.run(a.judge(STATEMENT_RELEVANCE, [ITEM]))
    b = LabelJudge(FakeModel("b"), cache_dir=tmp_path)
    asyncio.run(b.judge(STATEMENT_RELEVANCE, [ITEM]))
    assert b.misses == 1
    c = LabelJudge(FakeModel("a"), cache_dir=tmp_path, calibrate=True)
    asyncio.run(c.judge(STATEMENT_RELEVANCE, [ITEM]))
    assert c.misses == 1


def test_label_judge_calibration_removes_the_prior() -> None:
    class Biased(FakeModel):
        async def score_choices(self, requests: Any) -> list[tuple[float, ...]]:
            # Always prefers "relevant" by 2 nats, plus 1 nat of real signal for statements about Quint.
            return [(-1.0 + (1.0 if "Quint designed" in r.prompt[-80:] else 0.0), -3.0) for r in requests]

    plain = asyncio.run(LabelJudge(Biased()).judge(STATEMENT_RELEVANCE, [ITEM]))
    calibrated = asyncio.run(LabelJudge(Biased(), calibrate=True).judge(STATEMENT_RELEVANCE, [ITEM]))
    assert plain[0].label == "relevant" and plain[0].confidence == pytest.approx(1 / (1 + math.exp(-3)))
    assert calibrated[0].label == "relevant" and calibrated[0].confidence == pytest.approx(
        1 / (1 + math.exp(-1))
    )
    other = StatementInput(question="Who?", statement="Zebras juggle.")
    [v] = asyncio.run(LabelJudge(Biased(), calibrate=True).judge(STATEMENT_RELEVANCE, [other]))
    assert v.confidence == pytest.approx(0.5)  # no signal left once the prior is divided out


def test_label_judge_isolates_a_failing_item() -> None:
    class Picky(FakeModel):
        async def score_choices(self, requests: Any) -> list[tuple[float, ...]]:
            if any("BOOM" in r.prompt for r in requests):
                raise ValueError("prompt is over the context window")
            return [(-1.0, -2.0) for _ in requests]

    bad = StatementInput(question="Q?", statement="BOOM")
    verdicts = asyncio.run(LabelJudge(Picky()).judge(STATEMENT_RELEVANCE, [ITEM, bad, ITEM]))
    assert [v.ok for v in verdicts] == [True, False, True]
    assert "context window" in str(verdicts[1].error) and verdicts[1].label is None


def test_label_judge_rejects_non_finite_scores() -> None:
    class Broken(FakeModel):
        async def score_choices(self, requests: Any) -> list[tuple[float, ...]]:
            return [(float("nan"), -1.0) for _ in requests]

    [v] = asyncio.run(LabelJudge(Broken()).judge(STATEMENT_RELEVANCE, [ITEM]))
    assert not v.ok and "non-finite" in str(v.error)


def test_label_judge_reasons() -> None:
    [v] = asyncio.run(LabelJudge(FakeModel(), reasons=True).judge(STATEMENT_RELEVANCE, [ITEM]))
    assert v.ok and v.reason  # the fake generates a line


def test_label_judge_needs_logprobs() -> None:
    with pytest.raises(CapabilityError, match="structured"):
        LabelJudge(ScriptedChat([]))


# -- structured chat --------------------------------------------------------------------------------

GOOD = '{"reason": "It names the designer.", "label": "relevant"}'


def test_chat_judge_sends_the_schema_and_validates() -> None:
    model = ScriptedChat([GOOD])
    [v] = asyncio.run(ChatJudge(model).judge(STATEMENT_RELEVANCE, [ITEM]))
    assert v.ok and v.label == "relevant" and v.reason == "It names the designer." and v.confidence is None
    conversation, config = model.sent[0]
    assert config.json_schema is not None
    assert json.loads(config.json_schema)["properties"]["label"]["enum"] == ["relevant", "irrelevant"]
    assert conversation[-1].content.endswith("Mara Quint designed it.")


@pytest.mark.parametrize(
    "bad", ['{"reason": "x", "label": "relev', '{"reason": "x", "label": "maybe"}', "Sure! relevant", "NaN"]
)
def test_chat_judge_retries_once_then_succeeds(bad: str) -> None:
    model = ScriptedChat([bad, GOOD])
    [v] = asyncio.run(ChatJudge(model).judge(STATEMENT_RELEVANCE, [ITEM]))
    assert v.ok and v.label == "relevant"
    retry_conversation = model.sent[1][0]
    assert retry_conversation[-2].content == bad and "JSON only" in retry_conversation[-1].content


def test_chat_judge_marks_item_failed_with_raw_text() -> None:
    model = ScriptedChat(["garbage one", "garbage two", GOOD])
    verdicts = asyncio.run(ChatJudge(model).judge(STATEMENT_RELEVANCE, [ITEM, ITEM]))
    failed = [v for v in verdicts if not v.ok]
    assert len(failed) == 1 and failed[0].raw == "garbage two" and failed[0].label is None
    assert "after 2 attempts" in str(failed[0].error)
    assert [v.label for v in verdicts if v.ok] == ["relevant"]


def test_chat_judge_turns_call_errors_into_failed_verdicts(tmp_path: Path) -> None:
    model = ScriptedChat([ModelCallError("timed out"), ModelCallError("timed out"), GOOD])
    judge = ChatJudge(model, cache_dir=tmp_path)
    [v] = asyncio.run(judge.judge(STATEMENT_RELEVANCE, [ITEM]))
    assert not v.ok and "timed out" in str(v.error) and v.raw is None
    [v2] = asyncio.run(judge.judge(STATEMENT_RELEVANCE, [ITEM]))  # failures are not cached: asked again
    assert v2.ok and v2.label == "relevant"


def test_chat_judge_correction_and_split(tmp_path: Path) -> None:
    reply = '{"reason": "The context says 1891.", "label": "unsupported", "correction": "It opened in 1891."}'
    model = ScriptedChat([reply, '{"statements": ["A is B.", "C is D."]}'])
    judge = ChatJudge(model, cache_dir=tmp_path)
    [v] = asyncio.run(
        judge.judge(
            RESPONSE_ADHERENCE, [AdherenceInput(context="It opened in 1891.", statement="It opened in 1895.")]
        )
    )
    assert v.label == "unsupported" and v.correction == "It opened in 1891."
    [split] = asyncio.run(judge.split([SplitInput(question="Q?", answer="A is B and C is D.")]))
    assert split == ["A is B.", "C is D."]
    assert json.loads(str(model.sent[1][1].json_schema)) == SPLIT_STATEMENTS.json_schema()
    [again] = asyncio.run(
        ChatJudge(model, cache_dir=tmp_path).split([SplitInput(question="Q?", answer="A is B and C is D.")])
    )
    assert again == split  # cached: the script has no replies left


def test_make_judge_modes() -> None:
    assert isinstance(make_judge(load_model("fake")), LabelJudge)
    assert isinstance(make_judge(load_model("fake"), "structured"), ChatJudge)
    assert isinstance(make_judge(ScriptedChat([])), ChatJudge)
    with pytest.raises(ParameterError):
        make_judge(load_model("fake"), "vibes")
