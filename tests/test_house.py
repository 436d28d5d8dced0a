"""The house rules the code can check about itself: one error hierarchy, public names that exist, no
reaching into another package's private modules, no import cycles, imports that only go down a floor.

Words used below:

- a *package* is a directory under ``src/ragsense`` (``ragsense.data``, ``ragsense.bench.kinship``);
  a *unit* is a first-level package or top-level module (``data``, ``bench``, ``errors``, ``_access``);
  the package's root ``ragsense/__init__.py`` is the unit ``ragsense``.
- a *private module* (or name) is one whose name starts with ``_`` (not a dunder). It belongs to the
  package that holds it and may be imported from anywhere inside that package, its subpackages
  included, and from nowhere else. So ``ragsense._access``, ``ragsense._async`` and
  ``ragsense._version``, held by the top package itself, are the whole library's shared ground floor:
  every ragsense module may import them, while tests, benchmarks and users may not. Another package's
  names come from its public ``__init__`` (or a public module).
- the *floors* are docs/architecture.md's ("an import only goes down"), kept here as data: a unit may
  import units on its own floor or below, never above. Within a floor anything goes but a cycle.

The scans read the source with ``ast``, so imports inside functions and under ``TYPE_CHECKING`` count:
a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ragsense
from ragsense.errors import RagsenseError

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE_DIR = SRC / "ragsense"

FLOORS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "ground",
        frozenset(
            {"data", "text", "stats", "tables", "cache", "errors", "plugins", "_access", "_async", "_version"}
        ),
    ),
    ("model layer", frozenset({"models", "embeddings"})),
    ("contract", frozenset({"contract"})),  # the Metric contract: above the models, below the methods
    ("methods", frozenset({"consens", "vera", "correctness", "similarity", "rag"})),
    ("spine", frozenset({"evaluation", "runs", "report", "traces"})),
    ("applications", frozenset({"serve", "guard", "experiments", "bench", "testing", "integrations"})),
    # "nothing but cli/ imports guard" (nor another application): the command line, ``python -m
    # ragsense`` and the package root's lazy names sit above the other applications.
    # ``ragsense.grounding`` (``_grounding``), the one-row convenience over ``evaluate``, is a root name.
    ("entry points", frozenset({"cli", "__main__", "ragsense", "_grounding"})),
)
"""docs/architecture.md's floors, lowest first."""


@dataclass(frozen=True)
class Module:
    name: str  # dotted: ragsense.data._io; a package is named by its __init__: ragsense.data
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        """The package the module sits in (a package's ``__init__`` sits in the package itself)."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @property
    def unit(self) -> str:
        return unit_of(self.name)


@dataclass(frozen=True)
class Import:
    target: str  # the dotted name imported: a module, or module.name for ``from module import name``
    line: int


def unit_of(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "ragsense"


def source_modules() -> list[Module]:
    modules = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules.append(Module(".".join(parts[:-1] if is_package else parts), path, is_package))
    return modules


def imports_of(module: Module) -> Iterator[Import]:
    """Every ``ragsense`` import in the module, relative ones resolved, wherever it stands;
    ``from module import name`` gives ``module.name`` (a submodule, or a name of the module)."""
    for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.package.split(".")[: len(module.package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            yield from (Import(f"{origin}.{alias.name}", node.lineno) for alias in node.names)


def private_owner(dotted: str) -> str | None:
    """The package a private module or name belongs to (``ragsense.data`` for ``ragsense.data._io``),
    or None when the dotted name is public all the way."""
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def module_graph() -> dict[str, set[str]]:
    """Module -> the ragsense modules it imports (``from pkg import name`` is pkg's ``__init__`` unless
    ``name`` is a module itself)."""
    modules = {m.name: m for m in source_modules()}
    graph: dict[str, set[str]] = {}
    for module in modules.values():
        targets = set()
        for imported in imports_of(module):
            name = imported.target
            while name and name not in modules:  # module.name -> module; a missing leaf -> its parent
                name = name.rpartition(".")[0]
            if name.startswith("ragsense") and name != module.name:
                targets.add(name)
        graph[module.name] = targets
    return graph


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        edges = graph.setdefault(unit_of(module), set())
        edges.update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan), i.e. the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def importable_modules() -> Iterator[str]:
    for info in pkgutil.walk_packages(ragsense.__path__, "ragsense."):
        if info.name.endswith(".__main__"):  # running it is the command line
            continue
        if not framework_installed(info.name):
            continue  # its import raises BackendUnavailableError naming the extra (tests/integrations)
        yield info.name


def framework_installed(name: str) -> bool:
    """False for a ``ragsense.integrations.<framework>`` module whose framework is not installed."""
    from ragsense.integrations import FRAMEWORKS

    if not name.startswith("ragsense.integrations."):
        return True
    framework = FRAMEWORKS.get(name.removeprefix("ragsense.integrations."))
    return framework is None or importlib.util.find_spec(framework.split(".")[0]) is not None


def public_modules() -> list[str]:
    """The root and every module none of whose dotted parts is private."""
    return ["ragsense", *(name for name in importable_modules() if private_owner(name) is None)]


# ----------------------------------------------------------------------------------------------- tests


def test_the_scans_see_what_they_should() -> None:
    """The helpers themselves, on known facts: a failing scan must not pass silently by seeing nothing."""
    modules = {m.name: m for m in source_modules()}
    assert modules["ragsense.data"].package == "ragsense.data"
    assert modules["ragsense.data._io"].package == "ragsense.data"
    assert private_owner("ragsense.data._io.SUFFIXES") == "ragsense.data"
    assert private_owner("ragsense._version") == "ragsense"
    assert private_owner("ragsense.data.read_rows") is None
    assert "ragsense.data" in module_graph()["ragsense.evaluation._runner"]
    assert cycles({"a": {"b"}, "b": {"c", "a"}, "c": set()}) == [frozenset({"a", "b"})]
    assert unit_graph()["cli"] >= {"evaluation", "errors"}


def test_every_exception_derives_from_ragsense_error() -> None:
    """A ``SystemExit`` (the command line's ``UsageExit``) is a request to exit with a code, not an
    error, and must stay outside ``Exception`` so nothing catches it on the way out."""
    offenders = []
    for name in importable_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            defined_here = inspect.isclass(value) and value.__module__ == name
            if (
                defined_here
                and issubclass(value, BaseException)
                and not issubclass(value, RagsenseError | SystemExit)
            ):
                offenders.append(f"{name}.{value.__qualname__}")
    assert offenders == [], "exceptions outside RagsenseError: " + ", ".join(offenders)


def test_no_exception_class_hides_in_a_function() -> None:
    """The test above sees module-level classes; the AST finds the others, which must not be errors."""
    hidden = []
    for module in source_modules():
        for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    bases = [ast.unparse(b) for b in getattr(inner, "bases", [])]
                    if isinstance(inner, ast.ClassDef) and any(
                        b.endswith(("Error", "Exception")) for b in bases
                    ):
                        hidden.append(f"{module.path.relative_to(SRC)}:{inner.lineno} {inner.name}")
    assert hidden == []


def test_builtin_bases_are_kept_for_python_callers() -> None:
    from ragsense.evaluation import ResultCountError
    from ragsense.runs import GateSpecError, RunNotFoundError, StoreVersionError

    assert issubclass(RunNotFoundError, LookupError)
    assert issubclass(GateSpecError, ValueError)
    assert issubclass(ResultCountError, ValueError)
    assert issubclass(StoreVersionError, RuntimeError)


def test_no_private_imports_across_packages() -> None:
    offenders = []
    for module in source_modules():
        for imported in imports_of(module):
            owner = private_owner(imported.target)
            if owner is None or not imported.target.startswith("ragsense"):
                continue
            if module.package != owner and not module.package.startswith(owner + "."):
                offenders.append(f"{module.path.relative_to(SRC)}:{imported.line} imports {imported.target}")
    assert offenders == [], "private imports across packages:\n" + "\n".join(sorted(set(offenders)))


@pytest.mark.parametrize("name", public_modules())
def test_every_public_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list | tuple), f"{name} has no __all__"
    assert all(isinstance(item, str) for item in exported)
    duplicates = sorted({item for item in exported if list(exported).count(item) > 1})
    assert duplicates == [], f"{name}.__all__ lists {duplicates} twice"
    missing = [item for item in exported if not hasattr(module, item)]  # lazy names load here
    assert missing == [], f"{name}.__all__ lists names it does not have: {missing}"


def test_every_unit_is_on_a_floor() -> None:
    placed = [unit for _, units in FLOORS for unit in units]
    assert len(placed) == len(set(placed)), "a unit on two floors"
    assert {m.unit for m in source_modules()} == set(placed), "place each new unit on a floor above"


def test_imports_only_go_down_a_floor() -> None:
    floor = {unit: level for level, (_, units) in enumerate(FLOORS) for unit in units}
    modules = {m.name: m for m in source_modules()}
    upward = []
    for module, targets in module_graph().items():
        for target in targets:
            if floor[unit_of(target)] > floor[unit_of(module)]:
                path = modules[module].path.relative_to(SRC)
                upward.append(
                    f"{path} ({FLOORS[floor[unit_of(module)]][0]}) imports {target} "
                    f"({FLOORS[floor[unit_of(target)]][0]})"
                )
    assert upward == [], "imports going up a floor:\n" + "\n".join(sorted(upward))


def test_no_import_cycles_between_packages() -> None:
    assert cycles(unit_graph()) == []


def test_no_import_cycles_between_modules() -> None:
    assert [sorted(c) for c in cycles(module_graph())] == []


MAX_MODULE_LINES = 500


def test_no_module_past_the_size_limit() -> None:
    long = {
        str(m.path.relative_to(SRC)): n
        for m in source_modules()
        if (n := len(m.path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these rooms by concern (at most {MAX_MODULE_LINES} lines each)"


def house_in_numbers() -> dict[str, int]:
    """What docs/architecture.md's "house in numbers" line states, computed from the source."""
    floor = {unit: level for level, (_, units) in enumerate(FLOORS) for unit in units}
    upward = sum(
        floor[unit_of(target)] > floor[unit_of(module)]
        for module, targets in module_graph().items()
        for target in targets
    )
    modules = source_modules()
    return {
        "modules": len(modules),
        "units": len({m.unit for m in modules}),
        "floors": len(FLOORS),
        "import cycles": len(cycles(module_graph())) + len(cycles(unit_graph())),
        "upward imports": upward,
    }


def test_architecture_states_the_house_as_built() -> None:
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    line = next((ln for ln in text.splitlines() if ln.startswith("**The house in numbers**")), None)
    assert line is not None, "docs/architecture.md lost its 'The house in numbers' line"
    stated = {
        name: int(n)
        for n, name in re.findall(r"(\d+) (modules|units|floors|import cycles|upward imports)", line)
    }
    assert stated == house_in_numbers(), "update the line in docs/architecture.md to the house as built"
