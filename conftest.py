"""The doctests of ``src/ragsense`` (``pytest --doctest-modules src/ragsense``): an integration module whose
framework is not installed cannot be imported (it raises BackendUnavailableError naming its extra), so
its doctests are not collected; tests/integrations skip with the reason."""

import importlib.util

from ragsense.integrations import FRAMEWORKS

collect_ignore = [
    f"src/ragsense/integrations/{name}.py"
    for name, module in FRAMEWORKS.items()
    if importlib.util.find_spec(module.split(".")[0]) is None
]
