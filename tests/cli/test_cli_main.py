"""The command line's own rules: no prefix matching, a closed pipe, the exit codes in the help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import _main, _models, main


def test_a_misspelt_long_option_is_refused_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    # "--metric" used to be taken as "--metrics" by argparse's prefix matching.
    with pytest.raises(SystemExit) as info:
        main(["evaluate", "--sample", "--model", "fake", "--metric", "consens", "--no-store"])
    assert info.value.code == 2
    assert "unrecognized arguments: --metric" in capsys.readouterr().err


def test_a_closed_pipe_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    def reader_gone(args: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(_models, "run", reader_gone)
    assert main(["models"]) == _main.EXIT_BROKEN_PIPE


def test_evaluate_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code in ("0 every row scored", "3 some rows have errors", "4 a gate failed", "2 usage"):
        assert code in text


def test_an_existing_output_is_refused_in_the_command_lines_own_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("{}\n", encoding="utf-8")
    args = ["evaluate", "--sample", "--model", "fake", "--metrics", "consens", "--no-store", "-o", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "already exists; continue it with --resume or replace it with --overwrite" in err
    assert "=True" not in err  # Python's keywords are for Python callers
