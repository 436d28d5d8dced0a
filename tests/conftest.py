"""Shared fixtures. Model tests load each bundled model once per session.

The fixtures leave torch's thread count alone: the test script (``scripts/test.sh``) sets it through
``OMP_NUM_THREADS`` (default 2, the machine's two cores) before pytest starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(
    os.environ.get("RAGSENSE_DATA_DIR", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.fixture(autouse=True, scope="session")
def _private_run_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    """CLI runs record themselves in the run store: keep the suite's runs out of the user's store."""
    os.environ["RAGSENSE_STORE"] = str(tmp_path_factory.mktemp("run-store") / "runs.sqlite")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "wikieval").exists():
        pytest.skip(f"shared datasets not found at {SHARED_DATA} (set RAGSENSE_DATA_DIR)")
    return SHARED_DATA.resolve()


@pytest.fixture(scope="session")
def smollm2():  # type: ignore[no-untyped-def]
    from ragsense.models import shared_pool

    return shared_pool().get("smollm2-135m")


@pytest.fixture(scope="session")
def gemma3():  # type: ignore[no-untyped-def]
    from ragsense.models import shared_pool

    return shared_pool().get("gemma3-270m")
