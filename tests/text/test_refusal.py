"""Refusal detection by wording: many phrasings of "the context does not say", and the statements
about the world that look like them but are answers."""

from __future__ import annotations

import pytest

from ragsense.text import is_refusal

REFUSALS = [
    "The documents do not say what colours the lighthouse is painted.",
    "I don't know.",
    "I do not know based on the provided context.",
    "The context does not mention his birthplace.",
    "The provided passages don't specify the year.",
    "This information is not mentioned in the documents.",
    "Not stated.",
    "Unknown",
    "There is no information about the founder in the context.",
    "Sorry, I cannot answer that from the given text.",
    "The answer is not in the provided documents.",
    "It cannot be determined from the context.",
    "The passage is silent on this point.",
    "I'm unable to find the answer in the retrieved documents.",
    "Based on the documents provided, I can't tell.",
    "No answer is given in the sources.",
    "The text doesn't say.",
    "N/A",
    "Insufficient information.",
    "The question cannot be answered with the available information.",
    "Unfortunately, the article does not provide the population figure.",
    "Nothing in the passage indicates when the bridge opened.",
    "The context provided does not contain information on the author's age.",
    "There is not enough information to answer.",
    "That is beyond the scope of the documents.",
    "I could not find any mention of the treaty in the text.",
    "The retrieved records never mention a second marriage.",
    "It is unclear from the documents who won.",
    "The sources are unclear about the date. Please provide more context.",
    "None of the documents answer this question.",
    "I’m sorry, but the context doesn’t include that detail.",
    "We cannot determine the dosage from the excerpts given.",
    "The given information does not state the price.",
    "Not mentioned in the context.",
    "The documents are silent about who painted it. You may want to check another source.",
]

ANSWERS = [
    "Aspirin does not reduce the risk of stroke in this cohort.",
    "David Baker is a biochemist.",
    "The lighthouse is white. The documents do not say when it was built.",
    "The treaty was not signed until 1648.",
    "There is no cure for the common cold.",
    "No, the study did not find a significant effect.",
    "The results do not support the hypothesis that coffee causes cancer.",
    "Unknown Pleasures is the debut album by Joy Division.",
    "The data show a 20% increase in yield.",
    "The film grossed $181 million but the budget was not disclosed.",
    "He could not find work after the war.",
    "I know that the capital of France is Paris.",
    "The evidence suggests a modest benefit.",
    "Information technology grew rapidly in the 1990s.",
    "The patient did not respond to treatment.",
    "It is not possible to travel faster than light.",
    "There is no evidence that vaccines cause autism.",
    "The source of the Nile is Lake Victoria.",
    "Sorry is a song by Justin Bieber.",
    "The context window of the model is 8,192 tokens.",
]


@pytest.mark.parametrize("answer", REFUSALS)
def test_refusals_in_many_phrasings_are_recognised(answer: str) -> None:
    assert is_refusal(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_answers_that_look_like_refusals_are_not(answer: str) -> None:
    assert not is_refusal(answer)


def test_empty_and_punctuation_are_not_refusals() -> None:
    assert not is_refusal("")
    assert not is_refusal("...")
