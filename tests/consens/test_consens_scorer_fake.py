"""Logic of the scorer on the deterministic fake model (fast). The bundled-model tests are separate."""

import asyncio

import pytest

from ragsense import evaluate, grounding
from ragsense.consens import Aggregation, ConSens, GroundingScorer, PromptTemplate
from ragsense.errors import InputError
from ragsense.models import load_model
from ragsense.models._fake import FakeModel

Q = "Who designed the bridge?"
DOCS = [
    "The bridge was designed by engineer Maria Keller in 1931.",
    "Tulips bloom in spring.",
    "Rain fell all week.",
]


def test_grounded_answer_scores_higher_than_ungrounded() -> None:
    good = grounding(Q, DOCS, "Engineer Maria Keller designed it in 1931.", model="fake")
    bad = grounding(Q, DOCS, "Gustave Eiffel designed it in 1889.", model="fake")
    assert good.consens > 0.5 > bad.consens
    # "designed" is a question word and "it"/"in" are closed-class: only the new content is scored.
    assert [w.word for w in good.words] == ["Engineer", "Maria", "Keller", "1931"]


def test_question_and_closed_class_words_are_not_scored() -> None:
    res = grounding(Q, DOCS, "The bridge was designed by Maria Keller.", model="fake")
    assert [w.word for w in res.words] == ["Maria", "Keller"]
    assert res.fallback is None


def test_answer_made_only_of_question_words_falls_back_to_all_words() -> None:
    res = grounding("Who designed the bridge?", DOCS, "The bridge.", model="fake")
    assert res.fallback == "all_words"
    assert [w.word for w in res.words] == ["The", "bridge"]
    assert any("no content word" in n for n in res.notes)


def test_attribution_finds_the_document_the_answer_rests_on() -> None:
    res = grounding(Q, DOCS[::-1], "Engineer Maria Keller, 1931.", model="fake", attribution=True)
    assert res.attribution is not None and len(res.attribution) == 3
    assert res.top_document == 2
    assert res.attribution[2].drop > 0
    # ``learned`` only where asked for (issue 49; tests/consens/test_learned.py).
    expected = {a.value for a in Aggregation} - {"learned"}
    assert set(res.attribution[0].consens_without_by_aggregation) == expected


def test_no_context_pass_is_computed_once_per_question_answer() -> None:
    model = FakeModel()
    scorer = GroundingScorer(model)
    rows = [(Q, [d], "Maria Keller.") for d in DOCS]
    asyncio.run(scorer.score(rows))
    assert model.calls == [4]  # 1 empty + 3 contexts, not 6
    asyncio.run(scorer.score([(Q, ["Another doc."], "Maria Keller.")]))
    assert model.calls[-1] == 1  # the empty pass comes from the cache


def test_bad_rows_are_marked_and_good_rows_kept() -> None:
    rows = evaluate(
        [
            {"question": Q, "contexts": DOCS, "answer": "Maria Keller."},
            {"question": Q, "contexts": DOCS, "answer": "   "},
            {"question": Q, "contexts": [], "answer": "x"},
            {"question": Q, "contexts": DOCS, "answer": 42},
            {"user_input": Q, "retrieved_contexts": DOCS, "response": "Maria Keller."},
            {"question": Q, "contexts": DOCS, "answer": "?!"},
        ],
        [ConSens(model="fake")],
        progress=False,
    ).rows
    assert [bool(r["errors"]) for r in rows] == [False, True, True, True, False, True]
    assert rows[0]["consens"] == rows[4]["consens"]  # RAGAS column names read the same
    assert [r["errors"][0]["field"] for r in rows[1:4]] == ["answer", "contexts", "answer"]
    assert rows[5]["_row"] == 5 and rows[5]["errors"][0]["field"] == "answer"
    # A row one metric cannot score carries no score of it.
    assert all(r.get("consens") is None for r in rows[1:4])


def test_grounding_is_the_row_evaluate_writes() -> None:
    """``ragsense.grounding`` goes through ``evaluate``: the same fields, and input errors raised."""
    [row] = evaluate(
        [{"question": Q, "contexts": DOCS, "answer": "Maria Keller."}],
        ["attribution"],
        model="fake",
        progress=False,
    ).rows
    result = grounding(Q, DOCS, "Maria Keller.", model="fake", attribution=True)
    assert {k: v for k, v in row.items() if k in result.to_dict()} == result.to_dict()
    with pytest.raises(InputError, match="answer") as info:
        grounding(Q, DOCS, "   ", model="fake")
    assert info.value.field == "answer"
    with pytest.raises(InputError) as info:
        grounding(Q, [], "x", model="fake")
    assert info.value.field == "contexts"


def test_long_context_is_truncated_and_flagged_not_crashed() -> None:
    model = load_model("fake", context_window=60)
    long_doc = " ".join(f"filler{i}" for i in range(300)) + " Maria Keller designed the bridge."
    res = grounding(Q, [long_doc], "Maria Keller.", model=model)
    assert res.truncated and res.context_tokens_dropped > 200
    assert any("truncated" in n for n in res.notes)


def test_answer_longer_than_window_is_an_input_error() -> None:
    model = load_model("fake", context_window=20)
    with pytest.raises(InputError, match="over the model window"):
        grounding(Q, DOCS, " ".join(["word"] * 50), model=model)


def test_custom_template_must_have_fields() -> None:
    with pytest.raises(ValueError):
        PromptTemplate(template="no fields here")
    res = grounding(
        Q, DOCS, "Maria Keller.", model="fake", template=PromptTemplate("C: {context}\nQ: {question}\nA:")
    )
    assert res.consens > 0
