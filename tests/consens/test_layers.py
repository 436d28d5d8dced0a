"""The methods sit below the spine: importing ``consens``, ``correctness`` or ``similarity`` (metric
included) loads none of ``ragsense.evaluation``, ``ragsense.cli`` or ``ragsense.runs``, and no module of
theirs names one (a lower floor importing a higher one would make the layers a cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ragsense

METHODS = ("consens", "correctness", "similarity")
HIGHER = ("ragsense.evaluation", "ragsense.cli", "ragsense.runs")


def test_importing_the_methods_loads_no_higher_floor() -> None:
    code = (
        "import sys\n"
        + "".join(f"import ragsense.{m}\n" for m in METHODS)
        + f"print(sorted(m for m in sys.modules if m.startswith({HIGHER!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("method", METHODS)
def test_no_module_of_a_method_names_a_higher_floor(method: str) -> None:
    folder = Path(ragsense.__file__).parent / method
    named: list[str] = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                named.append(f"{path.name}: {node.module}")
            elif isinstance(node, ast.Import):
                named.extend(f"{path.name}: {alias.name}" for alias in node.names)
    assert named, folder  # the walk found the package's imports
    assert [n for n in named if n.split(": ")[1].startswith(HIGHER)] == []
