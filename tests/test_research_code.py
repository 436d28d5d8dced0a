"""Research code (benchmarks/ and papers/) runs as packages from the repository root (``python -m``) and
uses ragsense's public API: no ``sys.path`` edits, no import of a private ``ragsense`` module.

Each check lists its offenders as ``file:line`` so a failure says where to look.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks", "papers")


def _scripts() -> Iterator[tuple[str, ast.Module]]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _private_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of each import of a ``ragsense`` module with a ``_`` part, or of a ``_`` name
    imported from a ``ragsense`` module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        private = [m for m in modules if m.split(".")[0] == "ragsense" and _has_private_part(m)]
        if private:
            yield node.lineno, private[0]


def _has_private_part(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split("."))


def test_the_folders_hold_scripts() -> None:
    # Guards the checks below against passing vacuously on an empty or moved tree.
    names = [name for name, _ in _scripts()]
    assert any(n.startswith("benchmarks/bench_") for n in names)
    assert {"papers/consens", "papers/correctness", "papers/vera", "papers/kinship"} <= {
        n.rsplit("/", 1)[0] for n in names
    }


def test_no_script_edits_sys_path() -> None:
    offenders = []
    for name, tree in _scripts():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, "sys.path used (run the script with python -m instead): " + ", ".join(offenders)


# Scripts that measure a backend's internal choices, which no public name exposes, and why. Keep it short:
# a script here is tied to private code and breaks with it.
INTERNAL_MEASUREMENTS = {
    "benchmarks/bench_prefix_reuse.py": "times the segmented prompt pass that chose MIN_SEGMENT and checks "
    "a cropped KV state against a segmented pass (the transformers backend's own prompt_state)",
}


def test_no_script_imports_a_private_ragsense_module() -> None:
    offenders = [
        f"{name}:{line} {module}"
        for name, tree in _scripts()
        if name not in INTERNAL_MEASUREMENTS
        for line, module in _private_imports(tree)
    ]
    assert not offenders, "private ragsense imports (use or add a public name): " + ", ".join(offenders)


def test_the_private_import_check_catches_both_forms() -> None:
    tree = ast.parse(
        "import ragsense.models._hf_scoring as s\nfrom ragsense.consens import _evidence\n"
        "from ragsense.stats import wilson_ci\nfrom ragsense.experiments._figures import contrast\n"
    )
    assert [line for line, _ in _private_imports(tree)] == [1, 2, 4]


def test_every_internal_measurement_still_needs_its_exception() -> None:
    # An exception whose script no longer imports private code (or is gone) must leave the list.
    scripts = dict(_scripts())
    for name in INTERNAL_MEASUREMENTS:
        assert name in scripts, f"{name} is gone: remove it from INTERNAL_MEASUREMENTS"
        assert list(_private_imports(scripts[name])), f"{name} no longer needs its exception"


def test_the_benchmarks_output_helper_prints_and_saves_one_line() -> None:
    import doctest

    import benchmarks.output

    result = doctest.testmod(benchmarks.output)
    assert result.attempted >= 3 and result.failed == 0
