"""Running the documentation's examples: the reader's files, the fake-model rewrite, shell and Python.

Shell blocks run with ``bash`` under ``set -euo pipefail`` and the ``ragsense`` command of this
interpreter's environment first on ``PATH``; Python blocks run in this process (no interpreter start,
no second torch import), with the page's folder as the working directory.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import json
import os
import random
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._blocks import REPO, SHELL_LANGUAGES, Block

BIN = Path(sys.executable).parent  # .venv/bin: ragsense and python of the environment under test
BLOCK_TIMEOUT_S = 120
SLOW_BLOCK_TIMEOUT_S = 1200  # a slow block runs the real model: minutes
SKIPPED: list[Block] = []  # the blocks a marker skipped, and each page's time: the terminal summary
TIMES: dict[str, tuple[float, float]] = {}  # block -> (wall seconds, CPU seconds of the block's processes)

# The bundled model names a ``model=fake`` marker turns into ``fake``.
_BUNDLED = re.compile(r"(?<![\w.-])(smollm2-135m|gemma3-270m)(?![\w.-])")
# The subcommands that take --model: a ``model=fake`` marker adds ``--model fake`` to those that name
# none (test_model_subcommands_take_model checks the list against the parser).
MODEL_SUBCOMMANDS = (
    "evaluate",
    "grounding",
    "calibrate",
    "guard",
    "serve",
    r"experiment\s+[\w-]+",
    r"bench\s+kinship",
    r"vera\s+(?:evaluate|enhance)",
    r"correctness\s+(?:features|predict)",
)
_COMMAND = re.compile(r"(?<![\w/.-])ragsense\s+(?:" + "|".join(MODEL_SUBCOMMANDS) + r")(?![\w-])")


# ---------------------------------------------------------------------------------------------- files


def _sample_rows() -> list[dict[str, Any]]:
    from ragsense.data import sample_rows_path

    with sample_rows_path().open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _labelled_rows(sample: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """24 grounded rows (a sentence of the context as the answer) and 24 invented ones, labelled."""
    rng = random.Random(0)
    invented = ["Zorvian", "marmalade", "seventeen", "Kestrel", "basalt", "lanterns", "Oslo", "violins"]
    rows: list[dict[str, Any]] = []
    for n in range(48):
        base = sample[n % len(sample)]
        sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", " ".join(base["contexts"])) if s.strip()]
        grounded = n % 2 == 0
        answer = sentences[n % len(sentences)] if grounded else " ".join(rng.sample(invented, 4)) + "."
        row = {key: base[key] for key in ("question", "contexts")}
        rows.append({"id": f"{base['id']}-{n}", **row, "answer": answer, "label": int(grounded)})
    return rows


def write_reader_files(folder: Path) -> list[str]:
    """The reader's own files the examples name, written into ``folder``; returns their names.

    ``rows.*`` (and the correctness pages' ``train*``, ``new*`` and ``test_rows`` files) are the bundled
    sample of 10 rows (question, contexts, answer, reference); ``rows-v2.jsonl`` is the same rows with
    the invented answers fixed; ``labelled.jsonl`` holds 48 rows labelled 1 (grounded) or 0. As in a
    checkout, ``benchmarks/``, ``papers/`` and ``docs/results/`` are there too (links to this repository's).
    """
    from ragsense.data import write_csv, write_jsonl, write_parquet

    sample = _sample_rows()
    fixed = [{**row, "answer": row["reference"]} if row["expected"] != "grounded" else row for row in sample]
    jsonl = {
        "rows.jsonl": sample,
        "rows-v2.jsonl": fixed,
        "labelled.jsonl": _labelled_rows(sample),
        **{name: sample for name in ("train.jsonl", "train_rows.jsonl", "test_rows.jsonl", "new.jsonl")},
        "new_rows.jsonl": sample,
    }
    for name, rows in jsonl.items():
        write_jsonl(folder / name, rows)
    write_csv(folder / "rows.csv", sample)
    write_parquet(folder / "rows.parquet", sample)
    # Examples that run a script of the repository or read a committed result run from a checkout.
    (folder / "benchmarks").symlink_to(REPO / "benchmarks", target_is_directory=True)
    (folder / "papers").symlink_to(REPO / "papers", target_is_directory=True)
    (folder / "docs").mkdir()
    (folder / "docs" / "results").symlink_to(REPO / "docs" / "results", target_is_directory=True)
    return sorted([*jsonl, "rows.csv", "rows.parquet", "benchmarks", "papers", "docs/results"])


# ---------------------------------------------------------------------------------------------- code


def code_to_run(block: Block) -> str:
    """The block's code as the harness runs it: with ``model=fake``, the bundled model names become
    ``fake`` and every ragsense command that takes a model and names none gets ``--model fake``; with
    ``server``, see :func:`_serve_first`."""
    code = block.code
    if block.language == "console":  # only the commands: lines after a "$ " prompt
        code = "".join(line[2:] + "\n" for line in code.splitlines() if line.startswith("$ "))
    if block.fake_model:
        code = _BUNDLED.sub("fake", code)
        if block.language in SHELL_LANGUAGES:
            code = "\n".join(_add_model(command) for command in _commands(code)) + "\n"
    if block.server:
        code = _serve_first(code, block)
    return code


def _serve_first(code: str, block: Block) -> str:
    """The first command in the background, on a free port (its ``--port N``: every ``N`` of the block
    becomes that port, so another test's server cannot answer in its place); the others once the port
    answers; then, however the block ends, the server is stopped (SIGTERM: its graceful shutdown) and
    waited for."""
    first, *rest = _commands(code)
    found = re.search(r"--port[ =](\d+)", first)
    if found is None:
        raise ValueError(f"{block.where}: a server block's first command needs --port N")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    first, *rest = (re.sub(rf"(?<!\d){found[1]}(?!\d)", str(port), command) for command in [first, *rest])
    wait = (
        f"for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
        'kill -0 "$server" || exit 1; sleep 0.1; done'
    )
    # Stopped however the block ends (a failing command too: a server left running would hold the
    # block's output open until the timeout).
    stop = """trap 'rc=$?; kill "$server" 2>/dev/null; wait "$server" || true; exit $rc' EXIT"""
    first = re.sub(r"\s+#[^'\"]*$", "", first)  # a trailing comment would swallow the "&"
    return "\n".join([f"{first} &", "server=$!", stop, wait, *rest]) + "\n"


def _commands(code: str) -> list[str]:
    """Shell lines with their backslash continuations joined back (so a command is one item)."""
    commands: list[str] = []
    current = ""
    for line in code.splitlines():
        current += line + "\n"
        if not line.rstrip().endswith("\\"):
            commands.append(current.rstrip("\n"))
            current = ""
    if current:
        commands.append(current.rstrip("\n"))
    return commands


def _add_model(command: str) -> str:
    body = command.split("#", 1)[0] if not command.lstrip().startswith("#") else ""
    if "--model" in body:
        return command
    return _COMMAND.sub(lambda m: m.group(0) + " --model fake", command, count=1)


# ---------------------------------------------------------------------------------------------- shell


def run_shell(block: Block, folder: Path) -> str:
    """Run a shell block in ``folder``; fail the test with its output unless it exits 0 (or a code
    its ``exit-ok`` allows at any command). A command still running at the timeout is killed with
    its whole process group (a server the example started included)."""
    code = code_to_run(block)
    if block.exit_ok:
        allowed = " ".join(str(c) for c in block.exit_ok)
        # Without -e, the ERR trap decides: a failing command whose status is allowed goes on.
        prologue = (
            f'set -uo pipefail\ntrap \'rc=$?; case " {allowed} " in *" $rc "*) ;; *) exit $rc;; esac\' ERR\n'
        )
        code += "exit 0\n"  # the last command's allowed status is not the block's
    else:
        prologue = "set -euo pipefail\n"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.Popen(
        ["bash", "-c", prologue + code],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, so the timeout kills servers it started too
    )
    timeout = BLOCK_TIMEOUT_S if block.slow is None else SLOW_BLOCK_TIMEOUT_S
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(
            f"{block.where}: still running after {timeout} s\n--- ran:\n{code}\n--- output:\n{output}"
        )
    with contextlib.suppress(ProcessLookupError):  # whatever the block left behind
        os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        pytest.fail(f"{block.where}: exit {process.returncode}\n--- ran:\n{code}\n--- output:\n{output}")
    return output


# ---------------------------------------------------------------------------------------------- python


@contextlib.contextmanager
def fake_default_model() -> Iterator[None]:
    """While a ``model=fake`` Python block runs, the process-wide pool (which ``ragsense.evaluate``,
    ``ragsense.grounding``, the metrics and the guard use) hands out the fake model for the default
    and the bundled names."""
    from ragsense.models import BUNDLED_MODELS, shared_pool

    pool = shared_pool()
    real_get = pool.get

    def get(spec: Any = None, **options: Any) -> Any:
        if spec is None or (isinstance(spec, str) and spec in BUNDLED_MODELS):
            return real_get("fake")
        return real_get(spec, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool, "get", get)
        yield


def run_python(block: Block, folder: Path) -> str:
    """Run a Python block in this process, in ``folder``, in a fresh namespace; tracebacks name the
    page's own line numbers. A block of ``>>>`` examples runs as a doctest."""
    code = code_to_run(block)
    output = io.StringIO()
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.chdir(folder)
        if block.fake_model:
            stack.enter_context(fake_default_model())
        stack.enter_context(contextlib.redirect_stdout(output))
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(code, {}, block.where, block.page, block.line - 1)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test, out=output.write)
            if runner.failures:
                pytest.fail(f"{block.where}: doctest failed\n{output.getvalue()}")
        else:
            # Blank lines in front, so the compiled lines are the page's lines.
            tree = compile("\n" * (block.line - 1) + code, block.page, "exec", ast.PyCF_ONLY_AST)
            exec(compile(tree, block.page, "exec"), {"__name__": "__docs__"})
    return output.getvalue()


def run_block(block: Block, folder: Path) -> str:
    """Run one block (shell or Python) in ``folder``, and note its wall and CPU time in ``TIMES``.

    CPU time (this process's for Python, the finished child processes' for shell) is what the suite
    pays on an idle machine; wall time grows with whatever else the machine runs."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    try:
        if block.language == "python":
            return run_python(block, folder)
        return run_shell(block, folder)
    finally:
        TIMES[block.where] = (time.perf_counter() - wall, _cpu_seconds() - cpu)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
