"""Every numeric flag is range-checked where it is parsed: a bad value exits 2 naming the flag, before
any model loads or any server binds. A negative ``--max-body-bytes`` once started the guard, and
``--timeout 0`` or ``--per-key-concurrency 0`` ended it as an internal error (exit 1)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from typing import Any

import pytest

from ragsense.cli import main
from ragsense.cli._main import build_parser
from ragsense.cli._numbers import CHECKED_TYPES
from ragsense.errors import ParameterError


def _numeric_flags() -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """(subcommand path, action) for every option that takes a value through a ``type``."""

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Any]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, (*path, name))
            elif action.option_strings and action.type is not None:
                yield path, action

    root = build_parser()
    yield from walk(root, ())


def test_every_numeric_flag_is_range_checked() -> None:
    unchecked = [
        f"ragsense {' '.join(path)} {action.option_strings[-1]} ({getattr(action.type, '__name__', '?')})"
        for path, action in _numeric_flags()
        if action.type not in CHECKED_TYPES
    ]
    assert not unchecked, "use a type from ragsense.cli._numbers: " + "; ".join(unchecked)
    assert sum(1 for _ in _numeric_flags()) >= 40  # the walk reaches the nested subcommands


# Where a bad value lands: the command line that must refuse it before doing anything.
REFUSED = [
    (["guard", "--model", "fake"], "--max-body-bytes", "-1"),
    (["guard", "--model", "fake"], "--timeout", "0"),
    (["guard", "--model", "fake"], "--per-key-concurrency", "0"),
    (["guard", "--model", "fake"], "--max-wait-ms", "-5"),
    (["guard", "--model", "fake"], "--per-key-rate", "nan"),
    (["guard", "--model", "fake"], "--port", "70000"),
    (["serve", "--model", "fake"], "--port", "-1"),
    (["evaluate", "--sample", "--model", "fake"], "--chunk-size", "0"),
    (["evaluate", "--sample", "--model", "fake"], "--threads", "-2"),
    (["evaluate", "--sample", "--model", "fake", "--engine", "ray"], "--workers", "0"),
    (["experiment", "consens-wikieval", "--model", "fake"], "--limit", "0"),
    (["experiment", "consens-wikieval", "--model", "fake"], "--seed", "-1"),
    (["experiment", "consens-distractors", "--model", "fake"], "--max-windows", "0"),
    (["calibrate", "rows.jsonl", "-o", "bands.json"], "--target-precision", "1.5"),
    (["bench", "kinship", "--out", "k"], "--distractors", "inf"),
]


@pytest.mark.parametrize(
    ("command", "flag", "value"), REFUSED, ids=[f"{c[0]} {f} {v}" for c, f, v in REFUSED]
)
def test_a_bad_number_exits_2_naming_the_flag(
    command: list[str],
    flag: str,
    value: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a server started with an invalid setting")

    monkeypatch.setattr("ragsense.guard.serve", never)
    monkeypatch.setattr("ragsense.serve.run_server", never)
    with pytest.raises(SystemExit) as exit_:
        main([*command, flag, value])
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err


def test_the_guard_config_refuses_bad_settings_from_python() -> None:
    from ragsense.guard import GuardConfig, Limits

    for field, bad in (("max_body_bytes", -1), ("max_rows", 0), ("max_documents", True)):
        with pytest.raises(ParameterError) as error:
            Limits(**{field: bad})
        assert error.value.parameter == field
    for field, bad in (
        ("timeout_s", 0.0),
        ("body_timeout_s", math.nan),
        ("max_wait_ms", -1.0),
        ("hostile_delay_s", math.inf),
        ("max_batch_rows", 0),
        ("concurrency_per_key", 0),
        ("rate_per_key", -2.0),
        ("burst", 0),
    ):
        with pytest.raises(ParameterError) as error:
            GuardConfig(model="fake", **{field: bad})
        assert error.value.parameter == field
    with pytest.raises(ParameterError, match="max_queue_rows"):
        GuardConfig(model="fake", limits=Limits(max_rows=20), max_queue_rows=10)
    assert GuardConfig(model="fake", max_wait_ms=0.0, hostile_delay_s=0.0).max_wait_ms == 0.0


def test_an_openai_model_without_a_server_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("RAGSENSE_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    argv = ["evaluate", "--sample", "--metrics", "consens", "--model", "openai:gpt-x", "--table", "never"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--base-url" in err and "internal error" not in err


def test_a_limit_too_small_for_the_split_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the data is read (it used to end as an internal error)."""
    assert main(["experiment", "correctness-squad", "--limit", "6", "--data", "no-such-file.json"]) == 2
    err = capsys.readouterr().err
    assert "limit: must be at least 10" in err and "internal error" not in err
