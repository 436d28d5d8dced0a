"""Test assertions for RAG apps, and a pytest plugin (``--ragsense-model``, ``ragsense_*`` fixtures).

Gate an app in its own test suite: :func:`assert_grounded` fails the test when an answer is not
grounded in its contexts and says which words and documents are at fault; :func:`assert_scores`
checks the mean of any metric's score over a run. docs/testing.md has the plugin's options.

>>> from ragsense.testing import assert_grounded
>>> row = assert_grounded("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.",
...                       "It stands in Paris, France.", model="fake")
>>> row["verdict"], row["consens"] >= 0.02
('grounded', True)
"""

from ragsense.testing._assertions import (
    GroundingAssertionError,
    ScoreAssertionError,
    assert_grounded,
    assert_scores,
)

__all__ = ["GroundingAssertionError", "ScoreAssertionError", "assert_grounded", "assert_scores"]
