"""assert_grounded and assert_scores on the fake model: pass, fail, the failure message, thresholds,
bad input and bad parameters, and that scoring goes through ragsense.evaluate (attribution only on
failure)."""

from __future__ import annotations

import doctest
import importlib
import pickle
import subprocess
import sys
from typing import Any

import pytest

import ragsense.evaluation
from ragsense import evaluate
from ragsense.consens import DEFAULT_AGGREGATION, GROUNDED_AT, Aggregation, Bands, default_bands, explain_row
from ragsense.errors import InputError, ModelNotFoundError, ParameterError
from ragsense.models import DEFAULT_MODEL
from ragsense.testing import (
    GroundingAssertionError,
    ScoreAssertionError,
    _assertions,
    _plugin,
    assert_grounded,
    assert_scores,
)

QUESTION = "Who designed the Zorvian Museum?"
CONTEXTS = [
    "The Zorvian Museum in Kelton was completed in 1847.",
    "It was designed by the architect Mara Delqvist.",
]
GROUNDED = "The museum was designed by Mara Delqvist."
# Every word but one ("Oslo") stated in the second document: a score between the bands' edges.
PARTIAL = "The museum was designed by Mara Delqvist in Oslo."
# Seven words the contexts do not have (contrast 0 on the fake model) and one they have.
UNGROUNDED = "Frank Gehry drew it with purple crayons during rainy summers, not Delqvist."


def _weakest_words(message: str) -> list[tuple[str, float, bool]]:
    """(word, contrast, marked as stated) per line of the message's weakest words."""
    lines = message.splitlines()
    start = next(i for i, line in enumerate(lines) if "weakest words" in line) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        word, contrast, *rest = line.split()
        assert rest in ([], ["stated", "in", "the", "context"]), line
        out.append((word, float(contrast), bool(rest)))
    return out


@pytest.fixture
def evaluate_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The metric objects of every ragsense.evaluate call made while the test runs."""
    calls: list[list[Any]] = []
    real = ragsense.evaluation.evaluate

    def spy(data: Any, metrics: Any = None, **options: Any) -> Any:
        calls.append(list(metrics))
        return real(data, metrics, **options)

    monkeypatch.setattr(ragsense.evaluation, "evaluate", spy)
    return calls


def test_grounded_answer_passes_and_returns_its_row(evaluate_calls: list[list[Any]]) -> None:
    row = assert_grounded(QUESTION, CONTEXTS, GROUNDED, model="fake")
    assert row["verdict"] == "grounded" and row["consens"] >= GROUNDED_AT
    assert row["answer"] == GROUNDED and row["model"] == "fake" and row["errors"] == []
    # One evaluate call with plain ConSens: no attribution run on success.
    [[metric]] = evaluate_calls
    assert metric.name == "consens" and not metric.attribution
    assert "attribution" not in row


def test_contexts_may_be_one_string() -> None:
    row = assert_grounded(QUESTION, " ".join(CONTEXTS), GROUNDED, model="fake")
    assert row["contexts"] == [" ".join(CONTEXTS)]


def test_default_threshold_is_the_grounded_band_of_the_default_aggregation() -> None:
    assert default_bands(DEFAULT_AGGREGATION).grounded_at == GROUNDED_AT
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, model="fake")
    assert info.value.threshold == GROUNDED_AT
    assert info.value.row["verdict"] != "grounded"


def test_failure_message_has_score_threshold_verdict_and_weakest_words(
    evaluate_calls: list[list[Any]],
) -> None:
    with pytest.raises(AssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS[:1], UNGROUNDED, model="fake")
    error = info.value
    assert isinstance(error, GroundingAssertionError)
    message = str(error)
    first = message.splitlines()[0]
    assert f"consens {error.consens:+.3f}" in first and f"min_consens {GROUNDED_AT:+.3f}" in first
    assert f"verdict {error.row['verdict']!r}" in first and "model fake" in first
    assert f", {DEFAULT_AGGREGATION.value}, " in first
    assert f"answer:   {UNGROUNDED}" in message
    weakest = _weakest_words(message)
    # The five lowest contrasts, lowest first; Delqvist (in the context) is not among them.
    contrasts = sorted(w["nll_empty"] - w["nll_context"] for w in error.row["words"])
    assert len(error.row["words"]) > 5 and len(weakest) == 5
    assert [c for _, c, _ in weakest] == pytest.approx([round(c, 2) for c in contrasts[:5]], abs=0.006)
    assert "Delqvist" not in {w for w, _, _ in weakest} and not any(s for _, _, s in weakest)
    # One context: no documents section and no second (attribution) run.
    assert "documents" not in message
    assert len(evaluate_calls) == 1


def test_failure_with_several_contexts_lists_the_documents(evaluate_calls: list[list[Any]]) -> None:
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, model="fake")
    message = str(info.value)
    assert "documents the answer rests on" in message
    assert "[0] drop" in message and "[1] drop" in message and CONTEXTS[1] in message
    # Attribution is a second evaluate call, made only because the assertion failed.
    assert [m.attribution for [m] in evaluate_calls] == [False, True]
    row = info.value.row
    assert [d["index"] for d in row["attribution"]] == [0, 1]
    assert row["top_document"] in (0, 1)


def test_documents_are_ranked_by_drop() -> None:
    # "Mara Delqvist" is in the second document only: leaving it out lowers the score; leaving out the
    # first changes nothing.
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, PARTIAL, model="fake")
    lines = str(info.value).splitlines()
    docs = [line.split()[0] for line in lines if line.startswith("    [")]
    assert docs == ["[1]", "[0]"]
    # The word the context does not state comes first; the stated ones follow, marked, though their
    # contrast is higher.
    weakest = _weakest_words(str(info.value))
    assert [(w, s) for w, _, s in weakest] == [("Oslo", False), ("Delqvist", True), ("Mara", True)]
    assert weakest[0][1] < weakest[1][1] <= weakest[2][1]
    drops = {d["index"]: d["drop"] for d in info.value.row["attribution"]}
    assert drops[1] > 0 and drops[0] == pytest.approx(0.0, abs=1e-9)
    assert info.value.row["top_document"] == 1
    # Last, the row's verdict in the words JUnit rows and the guard use (ragsense.consens.explain_row).
    assert lines[-1] == f"  reason: {explain_row(info.value.row, default_bands())}"


def test_explain_false_gives_one_line_and_no_attribution_run(evaluate_calls: list[list[Any]]) -> None:
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, model="fake", explain=False)
    assert len(str(info.value).splitlines()) == 1
    assert len(evaluate_calls) == 1


def test_min_consens_and_aggregation_set_the_threshold() -> None:
    # An ungrounded answer passes the lowest bar; an answer stated word for word passes the highest
    # (the support score is exactly 1 when the context states every word), one with an unstated word
    # fails it, and passes a bar at its own score.
    low = assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, min_consens=-1.0, model="fake")
    assert low["verdict"] == "ungrounded"
    assert assert_grounded(QUESTION, CONTEXTS, GROUNDED, min_consens=1.0, model="fake")["consens"] == 1.0
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, PARTIAL, min_consens=1.0, model="fake", explain=False)
    assert info.value.threshold == 1.0 and info.value.consens < 1.0
    partial = assert_grounded(QUESTION, CONTEXTS, PARTIAL, min_consens=info.value.consens, model="fake")
    assert partial["consens"] == info.value.consens and partial["verdict"] == "unsure"
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, aggregation="geometric", model="fake")
    assert info.value.threshold == default_bands(Aggregation.GEOMETRIC).grounded_at
    assert info.value.row["aggregation"] == "geometric"
    assert "geometric" in str(info.value).splitlines()[0]


@pytest.mark.parametrize(
    ("question", "contexts", "answer", "field"),
    [
        (QUESTION, CONTEXTS, "", "answer"),
        (QUESTION, CONTEXTS, "   ", "answer"),
        (QUESTION, [], GROUNDED, "contexts"),
        ("", CONTEXTS, GROUNDED, "question"),
    ],
)
def test_an_unscorable_row_is_an_error_naming_the_field(
    question: str, contexts: list[str], answer: str, field: str
) -> None:
    with pytest.raises(InputError) as info:
        assert_grounded(question, contexts, answer, model="fake")
    assert not isinstance(info.value, AssertionError)  # an error in the test, never a pass or a fail
    assert info.value.field == field and repr(field) in str(info.value)


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({"min_consens": 1.5}, "min_consens"),
        ({"min_consens": float("nan")}, "min_consens"),
        ({"min_consens": True}, "min_consens"),
        ({"aggregation": "median"}, "aggregation"),
    ],
)
def test_bad_parameters_are_errors(options: dict[str, Any], parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        assert_grounded(QUESTION, CONTEXTS, GROUNDED, model="fake", **options)
    assert info.value.parameter == parameter


def test_an_unknown_model_is_an_error() -> None:
    with pytest.raises(ModelNotFoundError):
        assert_grounded(QUESTION, CONTEXTS, GROUNDED, model="no-such-model")


def test_model_none_uses_the_session_model_else_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _plugin.DEFAULT_MODEL == DEFAULT_MODEL
    monkeypatch.setattr(_assertions, "_session_model", None)
    assert _assertions._current_model() == DEFAULT_MODEL
    monkeypatch.setattr(_assertions, "_session_model", "fake")
    assert assert_grounded(QUESTION, CONTEXTS, GROUNDED)["model"] == "fake"


def test_the_error_pickles() -> None:
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS[:1], UNGROUNDED, model="fake")
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.row == info.value.row and copy.threshold == GROUNDED_AT


# -------------------------------------------------------------------------------------- assert_scores

ROWS = [
    {"question": QUESTION, "contexts": CONTEXTS, "answer": GROUNDED},
    {"question": QUESTION, "contexts": CONTEXTS, "answer": UNGROUNDED},
]


def test_assert_scores_checks_means_over_an_evaluation_or_rows() -> None:
    run = evaluate(ROWS, ["consens"], model="fake", progress=False)
    mean = (run.rows[0]["consens"] + run.rows[1]["consens"]) / 2
    # max_share={}: the mean alone (the weak row's verdict depends on the default bands).
    assert assert_scores(run, max_share={}, consens=mean - 0.01) == {"consens": pytest.approx(mean)}
    assert assert_scores(run.rows, max_share={}, consens=-1.0) == {"consens": pytest.approx(mean)}
    assert assert_scores(run.rows[0], consens=0.5) == {"consens": run.rows[0]["consens"], "ungrounded": 0.0}
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(run, max_share={}, consens=mean + 0.01)
    assert isinstance(info.value, AssertionError)
    assert f"consens: mean {mean:+.3f} < {mean + 0.01:+.3f} (2 rows)" in str(info.value)
    assert info.value.means == {"consens": pytest.approx(mean)}
    # The rows under the minimum are listed with their verdicts.
    low = [r for r in run.rows if r["consens"] < mean + 0.01]
    assert f"row {low[0]['_row']}: verdict {low[0]['verdict']}, consens {low[0]['consens']:+.3f}" in str(
        info.value
    )


def test_assert_scores_counts_booleans_as_shares_and_lists_every_failure() -> None:
    rows = [{"correct": True, "similarity": 0.9}, {"correct": False, "similarity": 0.7}]
    assert assert_scores(rows, correct=0.5, similarity=0.8) == {
        "correct": 0.5,
        "similarity": pytest.approx(0.8),
    }
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(rows, correct=0.75, similarity=0.85)
    message = str(info.value)
    assert message.startswith("2 of 2 checks failed (2 rows):")
    assert "correct: mean +0.500" in message and "similarity: mean +0.800" in message


def test_assert_scores_fails_when_a_row_was_not_scored() -> None:
    run = evaluate(
        [*ROWS, {"question": QUESTION, "contexts": CONTEXTS, "answer": ""}],
        ["consens"],
        model="fake",
        progress=False,
    )
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(run, max_share={}, consens=-1.0)
    assert "consens: 1 of 3 rows not scored (row 2: consens: answer:" in str(info.value)
    # The share check too: a row with no verdict is not a row without an ungrounded verdict.
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(run, max_share={"ungrounded": 1.0})
    assert "verdict: 1 of 3 rows not scored (row 2: consens: answer:" in str(info.value)


@pytest.mark.parametrize(
    ("result", "thresholds", "parameter"),
    [
        ([{"consens": 0.5}], {}, "min_means"),
        ([], {"consens": 0.1}, "result"),
        ([{"consens": 0.5}], {"vera": 0.1}, "vera"),
        ([{"consens": 0.5}], {"consens": "high"}, "consens"),
        ("rows.jsonl", {"consens": 0.1}, "result"),
        ([{"consens": 0.5, "verdict": "grounded"}], {"max_share": {"ungroundd": 0.1}}, "max_share"),
        (
            [{"consens": 0.5, "verdict": "grounded"}],
            {"max_share": {"ungrounded": 1.5}},
            "max_share['ungrounded']",
        ),
        ([{"consens": 0.5}], {"max_share": {"ungrounded": 0.1}}, "max_share"),
        ([{"consens": 0.5}], {"bands": "no-such-bands.json"}, "bands"),
        ([{"similarity": 0.5}], {"bands": Bands("q25", 0.1, 0.0), "similarity": 0.1}, "bands"),
    ],
)
def test_assert_scores_bad_parameters(result: Any, thresholds: dict[str, Any], parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        assert_scores(result, **thresholds)
    assert info.value.parameter == parameter


# The run that misled users: a mean of +0.19 over five rows, three of them ungrounded (verdicts from the
# default bands, checked below).
THREE_OF_FIVE: list[dict[str, Any]] = [
    {
        "id": f"r{i}",
        "consens": c,
        "verdict": default_bands().verdict(c),
        "aggregation": DEFAULT_AGGREGATION.value,
        "errors": [],
    }
    for i, c in enumerate([0.95, 0.9, -0.25, -0.3, -0.35])
]
MEAN_FLOOR = 0.1  # a floor the mean of THREE_OF_FIVE clears


def test_three_of_five_ungrounded_fails_the_default_share_check_but_passes_a_mean() -> None:
    assert [r["verdict"] for r in THREE_OF_FIVE] == ["grounded"] * 2 + ["ungrounded"] * 3
    assert assert_scores(THREE_OF_FIVE, max_share={}, consens=MEAN_FLOOR) == {"consens": pytest.approx(0.19)}
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(THREE_OF_FIVE)
    lines = str(info.value).splitlines()
    assert lines[:2] == [
        "1 of 1 checks failed (5 rows):",
        "  share ungrounded 60% [23%, 88%] (3 of 5) > 0% (95% Wilson interval)",
    ]
    assert lines[2:] == [
        f"    row r{i}: verdict ungrounded, consens {c:+.3f}" for i, c in [(2, -0.25), (3, -0.3), (4, -0.35)]
    ]
    assert info.value.shares == {"ungrounded": 0.6} and info.value.max_share == {"ungrounded": 0.0}
    # With a mean check as well, both are judged and the mean's pass does not hide the share's failure.
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(THREE_OF_FIVE, consens=MEAN_FLOOR)
    assert str(info.value).startswith("1 of 2 checks failed (5 rows):")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (
        str(copy) == str(info.value) and copy.shares == info.value.shares and copy.means == info.value.means
    )
    # A looser ceiling passes and returns the share.
    assert assert_scores(THREE_OF_FIVE, max_share={"ungrounded": 0.6}) == {"ungrounded": 0.6}


def test_share_messages_cap_the_listed_rows_and_count_errors() -> None:
    many = [dict(THREE_OF_FIVE[2], id=f"u{i}") for i in range(_assertions.LISTED_ROWS + 3)]
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(many)
    message = str(info.value)
    assert message.count("    row u") == _assertions.LISTED_ROWS and message.endswith("    ... and 3 more")
    failed = [
        *THREE_OF_FIVE[:2],
        dict(THREE_OF_FIVE[2], errors=[{"metric": "vera", "field": None, "message": "judge down"}]),
    ]
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(failed, max_share={"errors": 0.0})
    assert "share errors 33% [6%, 79%] (1 of 3) > 0%" in str(info.value) and "vera: judge down" in str(
        info.value
    )


def test_rows_without_verdicts_are_checked_on_means_only() -> None:
    rows = [{"similarity": 0.9}, {"similarity": 0.7}]
    assert assert_scores(rows, similarity=0.5) == {"similarity": pytest.approx(0.8)}


def test_assert_scores_bands_read_the_verdicts_again(tmp_path: Any) -> None:
    # Bands under every score: all five rows grounded; given as an object or as a bands file.
    lenient = Bands(DEFAULT_AGGREGATION.value, grounded_at=-1.0, ungrounded_below=-1.0, origin="test")
    assert assert_scores(THREE_OF_FIVE, bands=lenient) == {"ungrounded": 0.0}
    path = tmp_path / "bands.json"
    lenient.save(path)
    assert assert_scores(THREE_OF_FIVE, bands=str(path)) == {"ungrounded": 0.0}
    assert all(r["verdict"] != "grounded" for r in THREE_OF_FIVE[2:])  # the caller's rows are untouched
    # Strict bands: every row ungrounded, except a refusal, which the bands do not decide.
    strict = Bands(DEFAULT_AGGREGATION.value, grounded_at=1.0, ungrounded_below=1.0)
    refusal = dict(THREE_OF_FIVE[0], id="no", verdict="refusal")
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores([*THREE_OF_FIVE, refusal], bands=strict)
    assert "(5 of 6)" in str(info.value) and "row no:" not in str(info.value)
    other = next(a for a in Aggregation if a != DEFAULT_AGGREGATION)
    with pytest.raises(ParameterError, match="fitted on"):
        assert_scores(THREE_OF_FIVE, bands=Bands(other.value, 0.1, 0.0))


def test_assert_grounded_takes_bands() -> None:
    strict = Bands(DEFAULT_AGGREGATION.value, grounded_at=1.0, ungrounded_below=0.999)
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS[:1], GROUNDED, model="fake", bands=strict, explain=False)
    assert info.value.threshold == 1.0 and info.value.row["verdict"] == "ungrounded"
    # Bands fitted on another aggregation set the score when no aggregation is given.
    other = next(a for a in Aggregation if a != DEFAULT_AGGREGATION)
    row = assert_grounded(QUESTION, CONTEXTS, GROUNDED, model="fake", bands=Bands(other.value, -1.0, -1.0))
    assert row["aggregation"] == other.value and row["verdict"] == "grounded"
    with pytest.raises(ParameterError, match="fitted on"):
        assert_grounded(QUESTION, CONTEXTS, GROUNDED, model="fake", bands=strict, aggregation=other)


def test_loading_the_plugin_imports_no_model_code() -> None:
    code = (
        "import sys, ragsense.testing._plugin; from ragsense.models import shared_pool; "
        "print(sorted(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules), "
        "len(shared_pool()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] 0"


@pytest.mark.parametrize("module", ["ragsense.testing", "ragsense.testing._assertions"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0


def test_a_refusal_passes_assert_grounded_and_stays_out_of_assert_scores_means() -> None:
    """The one refusal rule in the pytest helpers, as in the guard: a refusal passes whatever its score
    (the fake model scores it -0.46, under any threshold), and a mean leaves it out unless asked."""
    row = assert_grounded(
        "Who designs proteins?",
        ["David Baker designs proteins."],
        "The documents do not say who designs them.",
        model="fake",
    )
    assert row["verdict"] == "refusal" and row["consens"] < 0
    refusal = dict(THREE_OF_FIVE[0], id="no", consens=-0.61, verdict="refusal")
    assert assert_scores([*THREE_OF_FIVE, refusal], max_share={}, consens=0.1) == {
        "consens": pytest.approx(0.19)
    }  # over the five answers: the refusal's -0.61 would pull the mean to +0.06
    with pytest.raises(ScoreAssertionError, match="mean"):
        assert_scores([*THREE_OF_FIVE, refusal], max_share={}, gate_refusals=True, consens=0.1)
