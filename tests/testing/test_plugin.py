"""The pytest plugin through pytest itself (pytester): a user's test file run with ``--ragsense-model
fake`` or the ini option, ``--ragsense-bands`` / ``ragsense_bands``, the failure output, the fixtures,
the marker, and unrelated suites."""

from __future__ import annotations

import pytest

from ragsense import evaluate
from ragsense.consens import DEFAULT_AGGREGATION, Bands, default_bands
from ragsense.testing import _assertions, assert_grounded

pytest_plugins = ["pytester"]

QUESTION = "Who designed the Zorvian Museum?"
CONTEXTS = [
    "The Zorvian Museum in Kelton was completed in 1847.",
    "It was designed by the architect Mara Delqvist.",
]
USER_TESTS = """
from ragsense.testing import assert_grounded, assert_scores

QUESTION = "Who designed the Zorvian Museum?"
CONTEXTS = ["The Zorvian Museum in Kelton was completed in 1847.",
            "It was designed by the architect Mara Delqvist."]


def test_model_fixture(ragsense_model):
    assert ragsense_model == "fake"


def test_grounded():
    row = assert_grounded(QUESTION, CONTEXTS, "It was designed by Mara Delqvist.")
    assert row["model"] == "fake"


def test_not_grounded():
    assert_grounded(QUESTION, CONTEXTS, "Frank Gehry drew it with purple crayons.")


def test_evaluate_fixture(ragsense_evaluate):
    run = ragsense_evaluate([{"question": QUESTION, "contexts": CONTEXTS,
                              "answer": "It was designed by Mara Delqvist."}], ["consens"])
    assert run.rows[0]["model"] == "fake"
    assert assert_scores(run) == {"ungrounded": 0.0}
"""


@pytest.fixture(autouse=True)
def _fake_model_loaded() -> None:
    # pytester's in-process runs drop the modules they imported afterwards: import and load the fake
    # model's code here first, so that the inner runs share it with this session.
    assert_grounded("Q?", ["Cats purr."], "Cats purr.", model="fake")


def test_option_fixtures_and_failure_output(pytester: pytest.Pytester) -> None:
    before = _assertions._session_model
    # The invented answer's score on the fake model: no word stated, so below the ungrounded edge.
    row = {"question": QUESTION, "contexts": CONTEXTS, "answer": "Frank Gehry drew it with purple crayons."}
    invented = evaluate([row], ["consens"], model="fake", progress=False).rows[0]["consens"]
    assert invented < default_bands().ungrounded_below
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("--ragsense-model", "fake", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_not_grounded*",
            "E * ragsense.testing.GroundingAssertionError: answer is not grounded: "
            f"consens {invented:+.3f} < min_consens {default_bands().grounded_at:+.3f} "
            f"(verdict 'ungrounded', {DEFAULT_AGGREGATION.value}, model fake)",
            "E *weakest words (contrast nll_empty - nll_context*",
            "E *Frank *+0.00",
            "E *documents the answer rests on*",
            "E *[[]0[]] drop*",
        ]
    )
    # The inner session gave this one its model back.
    assert _assertions._session_model == before


def test_ini_option_and_command_line_precedence(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nragsense_model = fake\n")
    pytester.makepyfile(
        test_ini="""
        from ragsense.testing import assert_grounded

        def test_model(ragsense_model, request):
            assert ragsense_model == request.config.getoption("ragsense_model") or ragsense_model == "fake"
            assert assert_grounded("Q?", ["Cats purr."], "Cats purr.")["model"] == ragsense_model
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    # The command line wins over the ini file: an unknown model name fails the scoring test.
    result = pytester.runpytest("--ragsense-model", "no-such-model", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ModelNotFoundError*no-such-model*"])


# A long answer with one word the context does not state ("cellars"): grounded under the default
# bands, with a score below 1 (checked below).
BANDS_CONTEXT = (
    "The Zorvian Museum in Kelton was designed by the architect Mara Delqvist, who also drew its halls, "
    "towers, gardens, fountains, galleries, stairs, windows, domes, arches, courtyards, terraces, "
    "bridges, gates, porches and chapels."
)
BANDS_ANSWER = (
    "The architect Mara Delqvist designed it and drew its halls, towers, gardens, fountains, galleries, "
    "stairs, windows, domes, arches, courtyards, terraces, bridges, gates, porches, chapels and cellars."
)
BANDS_TESTS = f"""
from ragsense.testing import assert_grounded, assert_scores

QUESTION = {QUESTION!r}
CONTEXTS = [{BANDS_CONTEXT!r}]
GROUNDED = {BANDS_ANSWER!r}


def test_bands_fixture(ragsense_bands):
    assert ragsense_bands.origin == "strict-test"


def test_assert_grounded_uses_the_bands():
    assert_grounded(QUESTION, CONTEXTS, GROUNDED)


def test_evaluate_fixture_uses_the_bands(ragsense_evaluate):
    run = ragsense_evaluate([{{"question": QUESTION, "contexts": CONTEXTS, "answer": GROUNDED}}], "consens")
    assert run.rows[0]["verdict"] == "ungrounded"
    assert run.metrics[0].settings["bands"]["origin"] == "strict-test"
    assert_scores(run)
"""


def test_bands_option_and_ini_reach_assertions_and_fixtures(pytester: pytest.Pytester) -> None:
    before = _assertions._session_bands
    # Under the default bands the answer is grounded, though one of its words is not stated.
    row = assert_grounded(QUESTION, [BANDS_CONTEXT], BANDS_ANSWER, model="fake", bands=default_bands())
    assert row["verdict"] == "grounded" and row["consens"] < 1.0
    # Bands only an answer the context states word for word reaches: that answer is "ungrounded".
    strict = Bands(DEFAULT_AGGREGATION.value, grounded_at=1.0, ungrounded_below=1.0, origin="strict-test")
    strict.save(pytester.path / "strict.json")
    pytester.makepyfile(test_bands=BANDS_TESTS)
    result = pytester.runpytest(
        "--ragsense-model", "fake", "--ragsense-bands", "strict.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*GroundingAssertionError: answer is not grounded: consens * < min_consens +1.000 "
            "(verdict 'ungrounded'*",
            "*ScoreAssertionError: 1 of 1 checks failed (1 row):",
            "*share ungrounded 100% [[]21%, 100%[]] (1 of 1) > 0% (95% Wilson interval)",
            "*row 0: verdict ungrounded, consens *",
        ]
    )
    assert _assertions._session_bands == before  # the inner session gave this one its bands back
    # The ini option, read from the ini file's folder, does the same.
    pytester.mkdir("conf")
    strict.save(pytester.path / "conf" / "bands.json")
    pytester.makeini("[pytest]\nragsense_model = fake\nragsense_bands = conf/bands.json\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1, failed=2)
    # Without bands: the defaults, and the fixture is None.
    pytester.makeini("[pytest]\nragsense_model = fake\n")
    pytester.makepyfile(test_bands="def test_none(ragsense_bands):\n    assert ragsense_bands is None\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_bad_bands_file_stops_the_session(pytester: pytest.Pytester) -> None:
    (pytester.path / "bad.json").write_text('{"format": "something else"}')
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--ragsense-bands", "bad.json", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ragsense-bands / ragsense_bands: *bad.json*not a ragsense bands file*"])
    result = pytester.runpytest("--ragsense-bands", "missing.json", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot read bands file*missing.json*"])


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.ragsense
        def test_marked():
            pass

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "-m", "ragsense", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=1)
    pytester.runpytest("--markers").stdout.fnmatch_lines(["@pytest.mark.ragsense: *"])


def test_an_unrelated_suite_is_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "ragsense" not in result.stdout.str().split("collected", 1)[1]
    # And the plugin can be switched off by name.
    result = pytester.runpytest("-p", "no:ragsense", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
