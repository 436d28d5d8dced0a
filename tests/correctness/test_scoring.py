"""Batched answering and its failure handling, with stub models: fast tests, no language model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

from ragsense.correctness._scoring import RawCondition, answer_all
from ragsense.errors import ModelCallError, ParameterError
from ragsense.models import ContinuationScore, GenerationConfig, ModelInfo, ScoredGeneration

CONFIG = GenerationConfig(max_new_tokens=4, stop=("\n",))


class _Stub:
    """Scored generation that answers each prompt with itself upper-cased, and fails a call holding a
    prompt that starts with ``fail``: with the exception ``failures`` maps the rest of that prompt to."""

    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = failures or {}
        self.calls: list[list[str]] = []

    @property
    def info(self) -> ModelInfo:
        return ModelInfo("stub", "stub", 2048, "stub@1")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None

    async def generate_scored(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        self.calls.append(list(prompts))
        for prompt in prompts:
            if prompt.startswith("fail"):
                raise self.failures[prompt[4:]]
        empty = ContinuationScore((), (), (), 0)
        return [ScoredGeneration(p.upper(), "stop", empty, (), (-0.5,)) for p in prompts]


def _run(model: _Stub, groups: list[list[str]]) -> dict[str, RawCondition | Exception]:
    return asyncio.run(answer_all(model, groups, CONFIG))  # type: ignore[arg-type]


def test_all_groups_go_in_one_call_and_shared_prompts_once() -> None:
    model = _Stub()
    out = _run(model, [["a", "b"], ["b", "c"], [], ["a"]])
    assert model.calls == [["a", "b", "c"]]
    assert {p: r.text for p, r in out.items() if isinstance(r, RawCondition)} == {
        "a": "A",
        "b": "B",
        "c": "C",
    }
    assert _run(model, [[], []]) == {} and len(model.calls) == 1


def test_a_failed_batch_is_retried_per_group_and_marks_only_the_failing_one() -> None:
    model = _Stub({"500": ModelCallError("HTTP 500"), "tmo": TimeoutError("slow")})
    out = _run(model, [["a", "b"], ["b", "fail500"], ["c"], ["failtmo", "d"]])
    # One batched call, then one call per group with the prompts no earlier group holds.
    assert model.calls == [
        ["a", "b", "fail500", "c", "failtmo", "d"],
        ["a", "b"],
        ["fail500"],
        ["c"],
        ["failtmo", "d"],
    ]
    assert [type(out[p]).__name__ for p in ("a", "b", "fail500", "c", "failtmo", "d")] == [
        "RawCondition",
        "RawCondition",
        "ModelCallError",
        "RawCondition",
        "TimeoutError",
        "TimeoutError",
    ]


def test_a_single_group_is_not_retried() -> None:
    model = _Stub({"x": ModelCallError("down")})
    out = _run(model, [["a", "failx"]])
    assert len(model.calls) == 1 and isinstance(out["a"], ModelCallError) and out["a"] is out["failx"]


def test_an_http_client_error_becomes_a_model_call_error() -> None:
    cause = httpx.ConnectError("connection refused")
    out = _run(_Stub({"x": cause}), [["failx"]])
    error = out["failx"]
    assert isinstance(error, ModelCallError) and "ConnectError: connection refused" in str(error)
    assert error.__cause__ is cause


def test_a_bad_setting_stops_the_run_instead_of_marking_rows() -> None:
    model = _Stub({"x": ParameterError("greedy only", parameter="temperature")})
    with pytest.raises(ParameterError, match="temperature"):
        _run(model, [["a"], ["failx"]])
