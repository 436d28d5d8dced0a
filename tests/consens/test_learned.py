"""The learned verdict (issue 36): its shipped JSON loads, is validated, and the score path reproduces
the scores committed beside the features it was fitted on; the features see a recombination."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ragsense import evaluate
from ragsense.consens import (
    DEFAULT_BANDS,
    LEARNED_FEATURES,
    Aggregation,
    ConSens,
    LearnedVerdict,
    WordDetail,
    learned_features,
    learned_score,
    learned_verdict,
)
from ragsense.errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "src" / "ragsense" / "consens" / "learned_verdict.json"
FEATURES_FILE = ROOT / "docs" / "results" / "consens" / "verdict" / "features-smollm2-135m.jsonl.gz"
# Scores are recomputed from the JSON with math.fsum and math.tanh: bit-identical on the machine that
# wrote them; another libm may differ in the last bits, so the committed values are compared within this.
TOLERANCE = 1e-12


def _shipped() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SHIPPED.read_text(encoding="utf-8"))
    return data


def test_the_shipped_json_loads_and_names_its_fit() -> None:
    model = learned_verdict()
    assert model == LearnedVerdict.from_dict(_shipped())
    assert model.reader == "smollm2-135m"
    assert model.fit["preregistered"] == "ac1ffb3"
    bands = DEFAULT_BANDS[Aggregation.LEARNED]
    assert (bands.grounded_at, bands.ungrounded_below) == (
        model.fit["bands"]["grounded_at"],
        model.fit["bands"]["ungrounded_below"],
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("format", "ragsense.learned_verdict/0", "format"),
        ("features", list(reversed(LEARNED_FEATURES)), "features"),
        ("coef", [0.0] * (len(LEARNED_FEATURES) - 1), "coef"),
        ("mean", ["x"] * len(LEARNED_FEATURES), "not a finite number"),
        ("scale", [0.0] * len(LEARNED_FEATURES), "scale"),
        ("intercept", None, "intercept"),
    ],
)
def test_a_damaged_file_is_refused_naming_the_field(path: str, value: Any, message: str) -> None:
    data = copy.deepcopy(_shipped())
    data[path] = value
    with pytest.raises(ParameterError, match=message):
        LearnedVerdict.from_dict(data)


def test_the_json_reproduces_the_committed_scores() -> None:
    with gzip.open(FEATURES_FILE, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) > 1000
    model = learned_verdict()
    worst = max(abs(model.score(r["features"]) - r["learned_shipped"]) for r in rows)
    assert worst <= TOLERANCE


def _word(text: str, start: int, contrast: float, stated: bool) -> WordDetail:
    return WordDetail(text, start, start + len(text), None, None, 2.0, 2.0 + contrast, stated)


CONTEXT = (
    "Polonium was discovered by Marie Curie in 1898. Decades later, the element was named by a committee "
    "in Geneva in 1949."
)


def test_the_co_occurrence_features_see_a_recombination() -> None:
    # Every word of both answers is stated and equally likely: only where they are stated differs.
    right = "Marie Curie discovered polonium in 1898."
    swapped = "Marie Curie discovered polonium in 1949."
    words = [("Marie", 0), ("Curie", 6), ("discovered", 12), ("polonium", 23)]
    a = [_word(w, s, 1.0, True) for w, s in words] + [_word("1898", 35, 1.0, True)]
    b = [_word(w, s, 1.0, True) for w, s in words] + [_word("1949", 35, 1.0, True)]
    fa = dict(zip(LEARNED_FEATURES, learned_features(a, right, [CONTEXT]), strict=True))
    fb = dict(zip(LEARNED_FEATURES, learned_features(b, swapped, [CONTEXT]), strict=True))
    assert fa["stated_share"] == fb["stated_share"] == 1.0
    assert fa["pairs_mean"] == 1.0 and fb["pairs_mean"] < 1.0
    assert fa["key_pairs_mean"] == 1.0 and fb["key_pairs_mean"] < fa["key_pairs_mean"]
    assert fb["window_mean"] <= fa["window_mean"]
    # The contrast features are the same for both answers.
    assert fa["mean_contrast"] == fb["mean_contrast"] and fa["support_r"] == fb["support_r"]


def test_every_feature_is_finite_on_edge_cases() -> None:
    one = [_word("Zorblat", 0, -40.0, False)]
    for answer, contexts in (("Zorblat", ["x"]), ("Zorblat", [""]), ("Zorblat", ["Zorblat. Zorblat."])):
        assert all(math.isfinite(x) for x in learned_features(one, answer, contexts))
    with pytest.raises(ValueError, match="no words"):
        learned_features([], "", ["x"])


def test_the_metric_scores_rows_with_the_json_through_evaluate() -> None:
    rows = [
        {"question": "Who discovered polonium?", "contexts": [CONTEXT], "answer": "Marie Curie, in 1898."},
        {
            "question": "Who discovered polonium?",
            "contexts": [CONTEXT, "Geneva is in Switzerland."],
            "answer": "A committee in Geneva, in 1949.",
        },
    ]
    run = evaluate(rows, [ConSens(model="fake", aggregation="learned", attribution=True)], progress=False)
    for row in run.rows:
        assert row["errors"] == [] and row["aggregation"] == "learned"
        words = [WordDetail(**w) for w in row["words"]]
        kept = [row["contexts"][i] for i in row["kept_documents"]]
        score, r = learned_score(words, row["answer"], kept)
        assert row["consens"] == score == row["consens_by_aggregation"]["learned"] and row["consens_raw"] == r
        assert row["verdict"] == DEFAULT_BANDS[Aggregation.LEARNED].verdict(score)
    assert all("learned" in a["consens_without_by_aggregation"] for a in run.rows[1]["attribution"])
    # The fake model is not the reader the weights were fitted on, and the rows say so.
    assert all("the learned verdict was fitted on smollm2-135m's evidence" in r["notes"] for r in run.rows)


def test_the_learned_score_is_computed_only_when_asked_and_changes_nothing_else() -> None:
    """Issue 49: ``learned`` reads every context sentence, so only ``aggregation="learned"`` or
    ``learned=True`` computes it; asked for beside another aggregation it adds its key and leaves every
    other field as it was, bit for bit (the fields come from the same word NLLs)."""
    rows = [
        {"question": "Who discovered polonium?", "contexts": [CONTEXT], "answer": "Marie Curie, in 1898."},
        {
            "question": "Who discovered polonium?",
            "contexts": [CONTEXT, "Geneva is in Switzerland."],
            "answer": "A committee in Geneva, in 1949.",
        },
    ]
    plain, asked = (
        evaluate(rows, [ConSens(model="fake", attribution=True, learned=flag)], progress=False).rows
        for flag in (False, True)
    )
    for p, a in zip(plain, asked, strict=True):
        assert "learned" not in p["consens_by_aggregation"] and "learned" in a["consens_by_aggregation"]
        words = [WordDetail(**w) for w in a["words"]]
        kept = [a["contexts"][i] for i in a["kept_documents"]]
        assert a["consens_by_aggregation"]["learned"] == learned_score(words, a["answer"], kept)[0]
        a["consens_by_aggregation"].pop("learned")
        for d in a["attribution"] or []:
            d["consens_without_by_aggregation"].pop("learned")
        assert all("learned" not in d["consens_without_by_aggregation"] for d in p["attribution"] or [])
        assert p == a
    # The option is in the run's settings only when set, so a run stored before it resumes as it was.
    assert "learned" not in ConSens(model="fake").settings()
    assert ConSens(model="fake", learned=True).settings()["learned"] is True
