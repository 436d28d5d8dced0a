"""The command line's one table from errors to exit codes (``cli/_main.py``): every error ragsense
raises on purpose is a usage or setup error (2), a bug is an internal error (1), whatever its class."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import _main, _models, main
from ragsense.errors import (
    BackendUnavailableError,
    CapabilityError,
    InputError,
    ModelCallError,
    ModelNotFoundError,
    OutputExistsError,
    ParameterError,
)
from ragsense.evaluation import ResultCountError
from ragsense.runs import GateSpecError, RunNotFoundError, StoreVersionError

ROOT = Path(__file__).resolve().parents[2]


def failing_with(error: BaseException) -> Callable[[Any], int]:
    def run(args: Any) -> int:
        raise error

    return run


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ParameterError("must be at least 1", parameter="chunk_size"), 2),
        (InputError("not JSON", row=3), 2),
        (ModelNotFoundError("no model 'gpt-9'"), 2),
        (BackendUnavailableError("pip install 'ragsense[ray]'"), 2),
        (CapabilityError("the model gives no log-probabilities"), 2),
        (ModelCallError("server unreachable"), 2),
        (OutputExistsError("output file 'o.jsonl' already exists"), 2),
        (RunNotFoundError("no run 'abc'"), 2),
        (StoreVersionError("schema 9 is newer"), 2),
        (GateSpecError("cannot read 'x=y'"), 2),
        (FileNotFoundError(2, "No such file or directory", "rows.jsonl"), 2),
        (FileExistsError(17, "File exists", "out"), 2),
        (PermissionError(13, "Permission denied", "out"), 2),
        (ValueError("a bug"), 1),
        (TypeError("a bug"), 1),
        (KeyError("a bug"), 1),
        (ZeroDivisionError("a bug"), 1),
        (ResultCountError("metric 'x' returned 1 results for 2 rows"), 1),
        (KeyboardInterrupt(), 130),
        (BrokenPipeError(32, "Broken pipe"), 141),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_each_error_has_its_exit_code(error: BaseException, code: int) -> None:
    assert _main.exit_code(error) == code


def test_a_bug_is_an_internal_error_not_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_main.DEBUG_ENV, raising=False)
    monkeypatch.setattr(_models, "run", failing_with(ValueError("list.index(x): x not in list")))
    assert main(["models"]) == _main.EXIT_INTERNAL == 1
    err = capsys.readouterr().err
    assert err.startswith("ragsense: internal error: ValueError: list.index(x): x not in list\n")
    assert "please report it" in err and f"{_main.DEBUG_ENV}=1" in err
    assert "Traceback" not in err  # short unless asked


def test_the_debug_variable_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(_main.DEBUG_ENV, "1")
    monkeypatch.setattr(_models, "run", failing_with(TypeError("unsupported operand")))
    assert main(["models"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "raise error" in err
    assert "internal error: TypeError: unsupported operand" in err


def test_a_ragsense_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_main.DEBUG_ENV, raising=False)
    monkeypatch.setattr(_models, "run", failing_with(ParameterError("must be at least 1", parameter="k")))
    assert main(["models"]) == 2
    assert capsys.readouterr().err == "ragsense: error: k: must be at least 1\n"


def test_an_error_speaks_the_command_lines_words(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        _models, "run", failing_with(OutputExistsError("output file 'o.jsonl' already exists"))
    )
    assert main(["models"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_an_unknown_run_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "show", "no-such-run-anywhere"]) == 2
    assert capsys.readouterr().err.startswith("ragsense: error: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "--sample", "--model", "fake", "--no-store", "--workers", "2"],  # needs --engine ray
        ["runs", "show"],  # no run given
    ],
)
def test_a_usage_mistake_found_by_a_subcommand_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


def test_the_help_and_the_docs_name_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for code in (
        "0 every row scored",
        "3 some rows have errors",
        "4 a gate failed",
        "2 usage",
        "1 an internal error",
    ):
        assert code in help_text
    for doc in ("README.md", "docs/metrics.md", "docs/runs.md"):
        text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
        assert "1 an internal error" in text.replace("**", ""), doc
        assert _main.DEBUG_ENV in text, doc
    codes = {code for _, code in _main.EXIT_CODES}
    assert codes == {_main.EXIT_INTERNAL, 2, _main.EXIT_INTERRUPTED, _main.EXIT_BROKEN_PIPE}


@pytest.mark.parametrize("module", ["ragsense.cli._main", "ragsense.errors"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0


def test_a_vllm_model_from_the_cli_gets_its_own_error_not_a_bug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model flags once reached vLLM's factory as unknown options (device): an internal error.
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "question": "Q?", "contexts": ["C."], "answer": "A."}\n')
    argv = ["evaluate", str(rows), "--no-store", "--model", "vllm:smollm2-135m"]
    assert main([*argv, "--dtype", "bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and ("ragsense[vllm]" in err or "CUDA GPU" in err)
    assert main([*argv, "--device", "cpu"]) == 2
    assert "--device: the vLLM backend runs on a CUDA GPU" in capsys.readouterr().err
