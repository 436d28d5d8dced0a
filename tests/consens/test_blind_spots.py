"""The known blind spots docs/metrics.md states, held to what they say: if one of these starts failing,
ragsense got better there, and the documentation must say so."""

from __future__ import annotations

import pytest

import ragsense

CONTEXT = [
    "The Eiffel Tower was built on the Champ de Mars in Paris as the entrance arch to the 1889 World's "
    "Fair. Construction began in January 1887 and was completed in March 1889, in just over two years."
]
QUESTION = "When did construction of the Eiffel Tower begin and end?"


@pytest.mark.model
def test_stated_facts_recombined_wrongly_score_as_grounded() -> None:
    """The two dates swapped between the two events: every word is stated in the context, so the
    default score (the binding check is opt-in) counts each as supported (docs/metrics.md, "Known blind
    spots")."""
    swapped = ragsense.grounding(
        QUESTION, CONTEXT, "Construction began in March 1889 and was completed in January 1887."
    )
    right = ragsense.grounding(
        QUESTION, CONTEXT, "Construction began in January 1887 and was completed in March 1889."
    )
    assert right.verdict == "grounded"
    assert swapped.verdict == "grounded" and swapped.consens == pytest.approx(1.0)


@pytest.mark.model
def test_a_date_moved_whole_stays_blind_with_the_binding_check() -> None:
    """The opt-in binding check changes one span at a time: with month and year moved together every
    single rebinding is wrong too, so none wins and the swap still scores grounded (docs/metrics.md)."""
    swapped = ragsense.grounding(
        QUESTION, CONTEXT, "Construction began in March 1889 and was completed in January 1887.", binding=True
    )
    assert swapped.binding == [] and swapped.binding_variants > 0
    assert swapped.verdict == "grounded"
