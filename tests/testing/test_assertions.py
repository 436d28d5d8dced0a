"""assert_grounded and assert_scores on the fake model: pass, fail, the failure message, thresholds,
bad input and bad parameters, and that scoring goes through ragsense.evaluate (attribution only on
failure)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Any

import pytest

import ragsense.evaluation
from ragsense import evaluate
from ragsense.consens import DEFAULT_AGGREGATION, GROUNDED_AT, Aggregation, default_bands
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
# Seven words the contexts do not have (contrast 0 on the fake model) and one they have.
UNGROUNDED = "Frank Gehry drew it with purple crayons during rainy summers, not Delqvist."


def _weakest_words(message: str) -> list[tuple[str, float]]:
    lines = message.splitlines()
    start = next(i for i, line in enumerate(lines) if "weakest words" in line) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        word, contrast = line.split()
        out.append((word, float(contrast)))
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
    assert f"verdict {error.row['verdict']!r}" in first and "q25" in first and "model fake" in first
    assert f"answer:   {UNGROUNDED}" in message
    weakest = _weakest_words(message)
    # The five lowest contrasts, lowest first; Delqvist (in the context) is not among them.
    contrasts = sorted(w["nll_empty"] - w["nll_context"] for w in error.row["words"])
    assert len(error.row["words"]) > 5 and len(weakest) == 5
    assert [c for _, c in weakest] == pytest.approx([round(c, 2) for c in contrasts[:5]], abs=0.006)
    assert "Delqvist" not in {w for w, _ in weakest}
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
    # The fake model finds "Delqvist" in the second document only: leaving it out lowers the score.
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, GROUNDED, min_consens=1.0, model="fake")
    lines = str(info.value).splitlines()
    docs = [line.split()[0] for line in lines if line.startswith("    [")]
    assert docs == ["[1]", "[0]"]
    assert info.value.row["top_document"] == 1


def test_explain_false_gives_one_line_and_no_attribution_run(evaluate_calls: list[list[Any]]) -> None:
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, model="fake", explain=False)
    assert len(str(info.value).splitlines()) == 1
    assert len(evaluate_calls) == 1


def test_min_consens_and_aggregation_set_the_threshold() -> None:
    # A weak answer passes a low bar; a grounded one fails an impossible bar.
    weak = assert_grounded(QUESTION, CONTEXTS, UNGROUNDED, min_consens=-1.0, model="fake")
    assert weak["verdict"] != "grounded"
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(QUESTION, CONTEXTS, GROUNDED, min_consens=1.0, model="fake", explain=False)
    assert info.value.threshold == 1.0
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
    assert assert_scores(run, consens=mean - 0.01) == {"consens": pytest.approx(mean)}
    assert assert_scores(run.rows, consens=-1.0) == {"consens": pytest.approx(mean)}
    assert assert_scores(run.rows[0], consens=0.5) == {"consens": run.rows[0]["consens"]}
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(run, consens=mean + 0.01)
    assert isinstance(info.value, AssertionError)
    assert f"consens: mean {mean:+.3f} < {mean + 0.01:+.3f} (2 rows)" in str(info.value)
    assert info.value.means == {"consens": pytest.approx(mean)}


def test_assert_scores_counts_booleans_as_shares_and_lists_every_failure() -> None:
    rows = [{"correct": True, "similarity": 0.9}, {"correct": False, "similarity": 0.7}]
    assert assert_scores(rows, correct=0.5, similarity=0.8) == {
        "correct": 0.5,
        "similarity": pytest.approx(0.8),
    }
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(rows, correct=0.75, similarity=0.85)
    message = str(info.value)
    assert message.startswith("2 of 2 score checks failed (2 rows):")
    assert "correct: mean +0.500" in message and "similarity: mean +0.800" in message


def test_assert_scores_fails_when_a_row_was_not_scored() -> None:
    run = evaluate(
        [*ROWS, {"question": QUESTION, "contexts": CONTEXTS, "answer": ""}],
        ["consens"],
        model="fake",
        progress=False,
    )
    with pytest.raises(ScoreAssertionError) as info:
        assert_scores(run, consens=-1.0)
    assert "consens: 1 of 3 rows not scored (row 2: consens: answer:" in str(info.value)


@pytest.mark.parametrize(
    ("result", "thresholds", "parameter"),
    [
        ([{"consens": 0.5}], {}, "min_means"),
        ([], {"consens": 0.1}, "result"),
        ([{"consens": 0.5}], {"vera": 0.1}, "vera"),
        ([{"consens": 0.5}], {"consens": "high"}, "consens"),
        ("rows.jsonl", {"consens": 0.1}, "result"),
    ],
)
def test_assert_scores_bad_parameters(result: Any, thresholds: dict[str, Any], parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        assert_scores(result, **thresholds)
    assert info.value.parameter == parameter


def test_loading_the_plugin_imports_no_model_code() -> None:
    code = (
        "import sys, ragsense.testing._plugin; from ragsense.models import shared_pool; "
        "print(sorted(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules), "
        "len(shared_pool()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] 0"
