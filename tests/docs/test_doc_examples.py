"""The README's and the docs' examples run as written (issue 25): a doc example that breaks fails the suite.

Every fenced ``bash``/``sh``/``shell``/``console``/``python`` block of README.md and docs/*.md is run
(tests/docs/_blocks.py finds them and reads their markers):

* **One fresh folder per page, blocks in page order.** A reader follows a page top to bottom, so a
  later block may use a file an earlier block wrote (``scored.jsonl``, ``bands.json``, a run tagged
  ``v1``), and a block that breaks that chain fails. The folder starts with the reader's own files
  the examples name (``rows.jsonl``, ``rows.csv``, ``rows.parquet``, ``labelled.jsonl``, ...:
  :func:`_run.write_reader_files`), and the page's runs are recorded in its own run store
  (``RAGSENSE_STORE`` points into the folder).
* **Shell** blocks run with ``bash`` under ``set -euo pipefail``, this environment's ``ragsense``
  and ``python`` first on ``PATH``, a timeout that kills the block's whole process group. **Python**
  blocks run in this process in a fresh namespace (``>>>`` blocks as doctests).
* **Markers** (an HTML comment right above the block, invisible on the rendered page) say what the
  harness does differently, so every substitution is written where the example is:
  ``<!-- docs-test: model=fake -->`` runs the block on the fake model (bundled model names become
  ``fake``, ragsense commands that take a model get ``--model fake``, Python's default model is the
  fake), because the bundled model would take minutes where the fake takes a second;
  ``<!-- docs-test: server -->`` starts the block's first command (``ragsense guard --port N``) in the
  background on a free port, runs the others once it answers, then stops it;
  ``<!-- docs-test: exit-ok=4 -->`` lets a command exit 4 (a gate that fails on the sample, as
  documented); ``<!-- docs-test: skip (REASON) -->`` is for what cannot run here (a GPU, a server, a
  package index, an hour-long experiment) and needs its reason; ``<!-- docs-test: slow (REASON) -->``
  keeps a block that takes minutes (a real model, an experiment) out of the default suite: a page
  with such blocks is run a second time, whole, with ``-m slow``. An unknown marker fails.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import time
from pathlib import Path

import pytest

from ._blocks import Block, MarkerError, blocks_of_text, doc_pages, page_blocks, page_name
from ._run import (
    MODEL_SUBCOMMANDS,
    SKIPPED,
    code_to_run,
    run_block,
    run_python,
    run_shell,
    write_reader_files,
)


def _params() -> list[object]:
    """Each page once without its ``slow`` blocks, and a page with slow blocks once more, whole,
    under ``-m slow``."""
    params: list[object] = []
    for path in doc_pages():
        page = page_name(path)
        params.append(pytest.param(page, False, id=page))
        try:
            has_slow = any(block.slow for block in page_blocks(path))
        except MarkerError:  # reported by the page's own test
            has_slow = False
        if has_slow:
            params.append(pytest.param(page, True, id=f"{page}-with-slow", marks=pytest.mark.slow))
    return params


@pytest.mark.parametrize(("page", "with_slow"), _params())
def test_page_examples_run(
    page: str, with_slow: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ._blocks import REPO

    monkeypatch.setenv("RAGSENSE_STORE", str(tmp_path / "runs.sqlite"))
    write_reader_files(tmp_path)
    for block in page_blocks(REPO / page):
        if block.skip is not None or (block.slow is not None and not with_slow) or block.missing:
            SKIPPED.append(block)
            continue
        run_block(block, tmp_path)


# ------------------------------------------------------------------------------------- the harness


def test_readme_top_commands_are_found() -> None:
    from ._blocks import REPO

    first = page_blocks(REPO / "README.md")[0]
    assert first.where == "README.md:5"
    assert first.language == "bash"
    assert first.code.splitlines() == [
        "bash scripts/install.sh all && .venv/bin/ragsense evaluate --sample --metrics consens,similarity",
        "bash scripts/test.sh",
    ]
    assert first.skip is not None and "install" in first.skip  # the test install already ran


def test_every_page_is_read_and_blocks_are_found() -> None:
    pages = {page_name(path) for path in doc_pages()}
    assert "README.md" in pages and "docs/guard.md" in pages
    assert not any(page.startswith("docs/results/") for page in pages)
    blocks = [block for path in doc_pages() for block in page_blocks(path)]
    assert len(blocks) >= 30
    assert {block.language for block in blocks} == {"bash", "python"}


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- docs-test: fast -->", "unknown docs-test directive 'fast'"),
        ("<!-- docs-test: skip -->", "unknown docs-test directive 'skip'"),
        ("<!-- docs-test: skip ( ) -->", "a skip needs a reason"),
        ("<!-- docs-test: slow () -->", "a slow needs a reason"),
        ("<!-- docs-test: model=gemma -->", "unknown docs-test directive 'model=gemma'"),
        ("<!-- docs-test: model=fake; exit-ok=four -->", "unknown docs-test directive 'exit-ok=four'"),
    ],
)
def test_bad_markers_fail(marker: str, message: str) -> None:
    with pytest.raises(MarkerError, match=message):
        blocks_of_text(f"text\n{marker}\n```bash\nls\n```\n", "X.md")


def test_marker_needs_a_runnable_block_under_it() -> None:
    with pytest.raises(MarkerError, match=r"X\.md:1: docs-test marker above a json block"):
        blocks_of_text("<!-- docs-test: skip (x) -->\n```json\n{}\n```\n", "X.md")
    with pytest.raises(MarkerError, match=r"X\.md:1: docs-test marker with no code block under it"):
        blocks_of_text("<!-- docs-test: skip (x) -->\nSome text.\n```bash\nls\n```\n", "X.md")
    with pytest.raises(MarkerError, match=r"X\.md:2: docs-test marker with no code block"):
        blocks_of_text("x\n<!-- docs-test: model=fake -->\n", "X.md")


def test_markers_apply_to_the_next_block_only() -> None:
    text = "<!-- docs-test: skip (needs a GPU) -->\n\n```python\nx = 1\n```\n```sh\nls\n```\n"
    first, second = blocks_of_text(text, "X.md")
    assert (first.skip, first.line) == ("needs a GPU", 4)
    assert (second.skip, second.line, second.language) == (None, 7, "sh")


def test_fake_model_rewrite() -> None:
    code = (
        "ragsense evaluate rows.jsonl --metrics consens   # ragsense grounding\n"
        "ragsense runs\n"
        "ragsense vera enhance rows.jsonl -o e.jsonl --generator smollm2-135m\n"
        "ragsense grounding rows.jsonl \\\n  --model gemma3-270m\n"
    )
    block = Block("X.md", 1, "bash", code, fake_model=True)
    assert code_to_run(block).splitlines() == [
        "ragsense evaluate --model fake rows.jsonl --metrics consens   # ragsense grounding",
        "ragsense runs",
        "ragsense vera enhance --model fake rows.jsonl -o e.jsonl --generator fake",
        "ragsense grounding rows.jsonl \\",
        "  --model fake",
    ]
    assert code_to_run(Block("X.md", 1, "bash", code)) == code  # no marker, no rewrite


def test_shell_failure_names_the_line(tmp_path: Path) -> None:
    block = Block("X.md", 7, "bash", "true\nfalse\necho never\n")
    with pytest.raises(pytest.fail.Exception, match=r"X.md:7: exit 1"):
        run_shell(block, tmp_path)
    allowed = Block("X.md", 7, "bash", "(exit 4)\necho went on\n", exit_ok=(4,))
    assert run_shell(allowed, tmp_path) == "went on\n"
    with pytest.raises(pytest.fail.Exception, match=r"X.md:7: exit 3"):
        run_shell(Block("X.md", 7, "bash", "(exit 3)\necho went on\n", exit_ok=(4,)), tmp_path)


def test_python_traceback_names_the_page_line(tmp_path: Path) -> None:
    block = Block("X.md", 12, "python", "x = 1\nraise ValueError(x)\n")
    with pytest.raises(ValueError) as error:
        run_python(block, tmp_path)
    assert error.traceback[-1].lineno + 1 == 13 and str(error.traceback[-1].path) == "X.md"


def test_server_block_runs_in_the_background(tmp_path: Path) -> None:
    serve = "import sys, http.server as h; "
    serve += "h.test(h.SimpleHTTPRequestHandler, port=int(sys.argv[2]), bind=sys.argv[3])"
    code = f'python -c "{serve}" --port 8765 127.0.0.1   # serves\n'
    code += "curl -s localhost:8765/ | grep -c runs.sqlite\n"
    (tmp_path / "runs.sqlite").write_text("")
    block = Block("X.md", 3, "bash", code, server=True)
    assert "8765" not in code_to_run(block)
    assert run_shell(block, tmp_path).splitlines()[-1] == "1"  # the listing, then the server is stopped
    failing = Block("X.md", 3, "bash", code.replace("grep -c runs", "grep -c nothing"), server=True)
    start = time.perf_counter()
    with pytest.raises(pytest.fail.Exception, match="exit 1"):  # and a failure does not wait for it
        run_shell(failing, tmp_path)
    assert time.perf_counter() - start < 60


def test_harness_doctests() -> None:
    from . import _blocks

    failures, tried = doctest.testmod(_blocks, optionflags=doctest.ELLIPSIS)
    assert (failures, tried > 0) == (0, True)


def test_model_subcommands_take_model() -> None:
    """MODEL_SUBCOMMANDS is exactly what the parser gives --model (the rewrite adds it only there)."""
    import re

    from ragsense.cli import main

    for pattern in MODEL_SUBCOMMANDS:
        words = re.sub(r"\[\\w-\]\+", "consens-wikieval", pattern)
        words = re.sub(r"\(\?:(\w+)\|?.*?\)", r"\1", words).replace(r"\s+", " ")
        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
            main([*words.split(), "--help"])
        assert "--model" in help_text.getvalue(), words


def test_needs_skips_a_block_whose_module_is_missing() -> None:
    text = "<!-- docs-test: needs=json,no_such_module_xyz -->\n```python\nx = 1\n```\n"
    [block] = blocks_of_text(text, "X.md")
    assert block.needs == ("json", "no_such_module_xyz")
    assert block.missing == ["no_such_module_xyz"]
