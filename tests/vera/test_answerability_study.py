"""The answerability study (papers/vera/answerability.py): its parts are disjoint as its protocol says,
and its combination and threshold rules do what the protocol says, on rows made up here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from papers.vera import answerability as study

from ragsense.experiments import REFUSAL_WORD, SQUAD_INSTRUCTION, is_correct, is_squad_refusal, squad_items


def test_the_squad_helpers_are_public() -> None:
    assert REFUSAL_WORD in SQUAD_INSTRUCTION
    assert is_squad_refusal("Unanswerable.") and not is_squad_refusal("Paris")
    assert callable(is_correct)


def test_the_parts_are_disjoint_by_article_and_from_the_vera_squad_paragraphs(shared_data: Path) -> None:
    path = shared_data / "squad_v2" / "dev-v2.0.json"
    assert path.exists(), f"{path}: the shared data holds WikiEval but not SQuAD 2.0 dev"
    dev, report = study.draw("dev", 40), study.draw("report", 40)
    assert len(dev) == len(report) == 40
    assert sum(it.is_impossible for it in dev) == sum(it.is_impossible for it in report) == 20
    assert not {it.title for it in dev} & {it.title for it in report}
    held = {(it.title, it.context) for it in squad_items(str(path), 100, 0)}
    assert not {(it.title, it.context) for it in dev + report} & held
    # A larger draw extends a smaller one (so a cut run is a prefix of the protocol's draw).
    assert [it.id for it in study.draw("dev", 20)] == [it.id for it in dev[:20]]


def test_coverage_counts_the_question_content_words() -> None:
    covered = study.coverage("Who designed the Orvel bridge?", "Mara Quint designed the bridge.")
    assert covered == pytest.approx(2 / 3)
    assert study.coverage("Who is it?", "anything") == 1.0


def _row(impossible: bool, refused_with: bool, correct_with: bool, correct_unedited: bool) -> dict[str, Any]:
    return {
        "is_impossible": impossible,
        "refused_with": refused_with,
        "correct_with": correct_with,
        "correct_unedited": correct_unedited,
        "declines": False,
        "n_kept": 2,
    }


def test_the_combinations() -> None:
    rows = [
        _row(False, True, False, True),  # answerable, step 4 refused a correct answer
        _row(True, False, False, False),  # unanswerable, answered
        _row(False, False, True, True),  # answerable, answered correctly
    ]
    gate = np.array([False, True, False])
    refused, correct = study.outcomes(rows, gate, "none")
    assert refused.tolist() == [True, False, False] and correct.tolist() == [False, False, True]
    refused, correct = study.outcomes(rows, gate, "or")
    assert refused.tolist() == [True, True, False] and correct.tolist() == [False, True, True]
    # "gate": step 4 no longer refuses; the regenerated answer is kept whole.
    refused, correct = study.outcomes(rows, gate, "gate")
    assert refused.tolist() == [False, True, False] and correct.tolist() == [True, True, True]


def test_the_threshold_keeps_the_answerable_cap() -> None:
    rows = [_row(i % 2 == 1, False, True, True) for i in range(40)]
    # Unanswerable rows score 1..20, answerable 0.5..19.5: any threshold that refuses many
    # unanswerable questions also refuses answerable ones.
    scores = np.array([(i // 2) + (1.0 if i % 2 else 0.5) for i in range(40)])
    found = study._threshold(rows, scores, "gate")
    assert found is not None
    t, unanswerable = found
    refused, _ = study.outcomes(rows, scores >= t, "gate")
    y = np.array([r["is_impossible"] for r in rows])
    assert refused[~y].mean() <= study.ANSWERABLE_CAP
    assert unanswerable == pytest.approx(refused[y].mean())
    # A pipeline already refusing a quarter of the answerable questions has no feasible threshold.
    refusing = [_row(i % 2 == 1, i % 8 == 0, True, True) for i in range(40)]
    assert study._threshold(refusing, scores, "or") is None
