"""Fixtures of the guard tests (helpers in ``_helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._helpers import GuardConfig, RunningGuard, running


@pytest.fixture(scope="module")
def open_guard() -> Iterator[RunningGuard]:
    """A fake-model guard without keys on 127.0.0.1."""
    with running(GuardConfig(model="fake")) as guard:
        yield guard
