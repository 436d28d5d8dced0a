"""Test assertions for RAG apps, and a pytest plugin (``--ragsense-model``, ``ragsense_*`` fixtures).

Gate an app in its own test suite: :func:`assert_grounded` fails the test when an answer is not
grounded in its contexts and says which words and documents are at fault; :func:`assert_scores`
fails a run with too many rows of a verdict (by default: any ``ungrounded`` row), listing them, and
can also check the mean of any metric's score. Both take ``bands=`` (verdict bands from
``ragsense calibrate``). docs/testing.md has the plugin's options.

>>> from ragsense.testing import assert_grounded, assert_scores
>>> row = assert_grounded("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.",
...                       "It stands in Paris, France.", model="fake")
>>> row["verdict"]
'grounded'
>>> assert_scores([row])
{'ungrounded': 0.0}
"""

from ragsense.testing._assertions import (
    DEFAULT_MAX_SHARE,
    GroundingAssertionError,
    ScoreAssertionError,
    assert_grounded,
    assert_scores,
)

__all__ = [
    "DEFAULT_MAX_SHARE",
    "GroundingAssertionError",
    "ScoreAssertionError",
    "assert_grounded",
    "assert_scores",
]
