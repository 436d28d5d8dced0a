"""The methods sit below the spine: importing ``consens``, ``correctness`` or ``similarity`` (metric
included) loads none of ``ragsense.evaluation``, ``ragsense.cli`` or ``ragsense.runs`` at run time.
tests/test_house.py checks every import statement against the floors; this checks what importing does."""

from __future__ import annotations

import subprocess
import sys

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
