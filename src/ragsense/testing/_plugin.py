"""The ragsense pytest plugin, registered as ``ragsense`` through the ``pytest11`` entry point.

It adds the option ``--ragsense-model NAME`` and the ini option ``ragsense_model`` (default
``smollm2-135m``): the model that :func:`ragsense.testing.assert_grounded` and the fixtures use; and
``--ragsense-bands FILE`` / ini ``ragsense_bands`` (a bands file from ``ragsense calibrate``; a
relative ini path is read from the ini file's folder): the verdict bands that ``assert_grounded`` and
the ConSens metric of ``ragsense_evaluate`` use instead of the defaults. The fixtures are
``ragsense_model`` (that name), ``ragsense_bands`` (those :class:`~ragsense.consens.Bands`, or None)
and ``ragsense_evaluate`` (``ragsense.evaluate`` with that model, those bands and no progress bar).
The ``ragsense`` marker is registered for selecting such tests (``-m ragsense``). Loading the plugin
imports no model code; models load on first use, once per session. Disable it with
``-p no:ragsense``. In a test::

    from ragsense.testing import assert_grounded, assert_scores

    def test_answer_is_grounded():
        assert_grounded("When was it completed?", ["It was completed in 1847."], "In 1847.")

    def test_batch(ragsense_evaluate):
        run = ragsense_evaluate("rows.jsonl", ["consens"])
        assert_scores(run)  # no row ungrounded; max_share={"ungrounded": 0.05} allows 5%
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ragsense.consens import Bands
    from ragsense.evaluation import Evaluation

# ragsense.models.DEFAULT_MODEL, written out so that loading the plugin imports no model code
# (tests/testing checks that the two agree).
DEFAULT_MODEL = "smollm2-135m"

_PREVIOUS_MODEL = pytest.StashKey[str | None]()
_PREVIOUS_BANDS = pytest.StashKey["Bands | None"]()
_BANDS = pytest.StashKey["Bands | None"]()
# The metric names whose verdicts bands set (ragsense.evaluate's ``bands=`` applies to these).
_BANDED = ("consens", "attribution")


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
    group.addoption(
        "--ragsense-bands",
        dest="ragsense_bands",
        default=None,
        metavar="FILE",
        help=(
            "verdict bands file (from `ragsense calibrate`) for assert_grounded and the ConSens metric "
            "of ragsense_evaluate; default: the ini option ragsense_bands, else ConSens's default bands"
        ),
    )
    parser.addini(
        "ragsense_bands",
        help="verdict bands file for ragsense.testing assertions and fixtures (relative to the ini file)",
        default="",
    )


def configured_model(config: pytest.Config) -> str:
    """The session's model: ``--ragsense-model``, else the ini ``ragsense_model``, else the default."""
    given = config.getoption("ragsense_model", default=None)
    if given:
        return str(given)
    return str(config.getini("ragsense_model") or DEFAULT_MODEL)


def configured_bands_path(config: pytest.Config) -> Path | None:
    """The session's bands file: ``--ragsense-bands`` (from the folder pytest was started in), else
    the ini ``ragsense_bands`` (from the ini file's folder), else None."""
    given = config.getoption("ragsense_bands", default=None)
    if given:
        return config.invocation_params.dir / str(given)
    ini = str(config.getini("ragsense_bands") or "")
    if not ini:
        return None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / ini


def _load_bands(config: pytest.Config) -> Bands | None:
    path = configured_bands_path(config)
    if path is None:
        return None  # nothing imported: the plugin stays free of scoring code
    from ragsense.consens import Bands
    from ragsense.errors import ParameterError

    try:
        return Bands.load(path)
    except ParameterError as exc:  # a bad file stops the session before any test, naming the file
        raise pytest.UsageError(f"--ragsense-bands / ragsense_bands: {exc}") from None


def pytest_configure(config: pytest.Config) -> None:
    from ragsense.testing._assertions import _set_session_bands, _set_session_model

    config.addinivalue_line(
        "markers", "ragsense: tests that score answers with a ragsense model (select them with -m ragsense)"
    )
    bands = _load_bands(config)
    config.stash[_BANDS] = bands
    config.stash[_PREVIOUS_MODEL] = _set_session_model(configured_model(config))
    config.stash[_PREVIOUS_BANDS] = _set_session_bands(bands)


def pytest_unconfigure(config: pytest.Config) -> None:
    from ragsense.testing._assertions import _set_session_bands, _set_session_model

    if _PREVIOUS_MODEL in config.stash:  # a nested session (pytester) gives the outer one its model back
        _set_session_model(config.stash[_PREVIOUS_MODEL])
        del config.stash[_PREVIOUS_MODEL]
    if _PREVIOUS_BANDS in config.stash:
        _set_session_bands(config.stash[_PREVIOUS_BANDS])
        del config.stash[_PREVIOUS_BANDS]


@pytest.fixture(scope="session")
def ragsense_model(pytestconfig: pytest.Config) -> str:
    """The model name of this session (``--ragsense-model``, ini ``ragsense_model``)."""
    return configured_model(pytestconfig)


@pytest.fixture(scope="session")
def ragsense_bands(pytestconfig: pytest.Config) -> Bands | None:
    """The session's verdict bands (``--ragsense-bands``, ini ``ragsense_bands``), or None for the
    defaults."""
    return pytestconfig.stash.get(_BANDS, None)


def _names_banded_metric(metrics: Any) -> bool:
    """Whether ``metrics`` (as ``evaluate`` takes them) names ConSens or attribution: the metrics
    that the session's bands go to. Metric objects keep the bands they were built with."""
    if metrics is None:
        return True  # evaluate's default is ConSens
    names = metrics.split(",") if isinstance(metrics, str) else [m for m in metrics if isinstance(m, str)]
    return any(n.strip() in _BANDED for n in names)


@pytest.fixture(scope="session")
def ragsense_evaluate(ragsense_model: str, ragsense_bands: Bands | None) -> Callable[..., Evaluation]:
    """``ragsense.evaluate`` with the session's model, its bands (for ConSens and attribution given
    by name) and ``progress=False`` (each can be overridden).

    ``run = ragsense_evaluate(data, ["consens", "vera"])`` returns the
    :class:`~ragsense.Evaluation`; ``model`` goes to the metrics given by name.
    """
    from ragsense.evaluation import evaluate

    def run(data: Any, metrics: Any = None, **options: Any) -> Evaluation:
        options.setdefault("model", ragsense_model)
        options.setdefault("progress", False)
        if ragsense_bands is not None and _names_banded_metric(metrics):
            options.setdefault("bands", ragsense_bands)
        return evaluate(data, metrics, **options)

    return run
