"""The ragsense pytest plugin, registered as ``ragsense`` through the ``pytest11`` entry point.

It adds the option ``--ragsense-model NAME`` and the ini option ``ragsense_model`` (default
``smollm2-135m``): the model that :func:`ragsense.testing.assert_grounded` and the fixtures use. The
fixtures are ``ragsense_model`` (that name) and ``ragsense_evaluate`` (``ragsense.evaluate`` with that
model and no progress bar). The ``ragsense`` marker is registered for selecting such tests
(``-m ragsense``). Loading the plugin imports no model code; models load on first use, once per
session. Disable it with ``-p no:ragsense``. In a test::

    from ragsense.testing import assert_grounded, assert_scores

    def test_answer_is_grounded():
        assert_grounded("When was it completed?", ["It was completed in 1847."], "In 1847.")

    def test_batch(ragsense_evaluate):
        run = ragsense_evaluate("rows.jsonl", ["consens"])
        assert_scores(run, consens=0.02)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ragsense.evaluation import Evaluation

# ragsense.models.DEFAULT_MODEL, written out so that loading the plugin imports no model code
# (tests/testing checks that the two agree).
DEFAULT_MODEL = "smollm2-135m"

_PREVIOUS_MODEL = pytest.StashKey[str | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragsense", "ragsense grounding assertions")
    group.addoption(
        "--ragsense-model",
        dest="ragsense_model",
        default=None,
        metavar="NAME",
        help=(
            "model for ragsense.testing.assert_grounded and the ragsense_* fixtures (smollm2-135m, "
            "gemma3-270m, fake, openai:NAME, ...); default: the ini option ragsense_model"
        ),
    )
    parser.addini(
        "ragsense_model",
        help=f"model for ragsense.testing assertions and fixtures (default {DEFAULT_MODEL})",
        default=DEFAULT_MODEL,
    )


def configured_model(config: pytest.Config) -> str:
    """The session's model: ``--ragsense-model``, else the ini ``ragsense_model``, else the default."""
    given = config.getoption("ragsense_model", default=None)
    if given:
        return str(given)
    return str(config.getini("ragsense_model") or DEFAULT_MODEL)


def pytest_configure(config: pytest.Config) -> None:
    from ragsense.testing._assertions import _set_session_model

    config.addinivalue_line(
        "markers", "ragsense: tests that score answers with a ragsense model (select them with -m ragsense)"
    )
    config.stash[_PREVIOUS_MODEL] = _set_session_model(configured_model(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    from ragsense.testing._assertions import _set_session_model

    if _PREVIOUS_MODEL in config.stash:  # a nested session (pytester) gives the outer one its model back
        _set_session_model(config.stash[_PREVIOUS_MODEL])
        del config.stash[_PREVIOUS_MODEL]


@pytest.fixture(scope="session")
def ragsense_model(pytestconfig: pytest.Config) -> str:
    """The model name of this session (``--ragsense-model``, ini ``ragsense_model``)."""
    return configured_model(pytestconfig)


@pytest.fixture(scope="session")
def ragsense_evaluate(ragsense_model: str) -> Callable[..., Evaluation]:
    """``ragsense.evaluate`` with the session's model and ``progress=False`` (both can be overridden).

    ``run = ragsense_evaluate(data, ["consens", "vera"])`` returns the
    :class:`~ragsense.Evaluation`; ``model`` goes to the metrics given by name.
    """
    from ragsense.evaluation import evaluate

    def run(data: Any, metrics: Any = None, **options: Any) -> Evaluation:
        options.setdefault("model", ragsense_model)
        options.setdefault("progress", False)
        return evaluate(data, metrics, **options)

    return run
