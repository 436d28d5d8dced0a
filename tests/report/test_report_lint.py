"""The page's script as the page runs it (row.js, summary.js and main.js joined in one function)
passes Biome with the repository's biome.jsonc, whose scope rules (undeclared and unused names) the
separate files cannot have: a name one file declares and another uses. scripts/test.sh lints the
asset files themselves; Biome is pinned in package.json and package-lock.json (``npm ci``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragsense.report._page import script

ROOT = Path(__file__).resolve().parents[2]
BIOME = ROOT / "node_modules" / ".bin" / "biome"


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    if not BIOME.exists():
        pytest.skip("Biome is not installed (npm ci; scripts/install.sh test does it): lint skipped")
    command = [str(BIOME), "lint", "--error-on-warnings", f"--config-path={ROOT}", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_the_page_script_passes_the_linter(tmp_path: Path) -> None:
    path = tmp_path / "page.js"
    path.write_text(script(), encoding="utf-8")
    result = lint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_sees_names_across_the_parts(tmp_path: Path) -> None:
    """The joined script is linted with the scope rules on: an undeclared name and an unused one fail."""
    path = tmp_path / "page.js"
    path.write_text(script().replace("\n})();\n", "\nconst unused = undeclared;\n})();\n"), encoding="utf-8")
    result = lint(path)
    assert result.returncode != 0
    assert "noUndeclaredVariables" in result.stdout + result.stderr
    assert "noUnusedVariables" in result.stdout + result.stderr
