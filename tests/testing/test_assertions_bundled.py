"""assert_grounded on the bundled SmolLM2-135M: a grounded answer passes, ungrounded ones fail and the
message points at the invented words.

The examples use a made-up museum, so that the model cannot know the answer without the context: on
"The Eiffel Tower was completed in 1889." it does, and its likelihood contrast is small (q25 score about
+0.02; the support score counts the words the context states and gives +1.00)."""

from __future__ import annotations

from typing import Any

import pytest

from ragsense.testing import GroundingAssertionError, assert_grounded

pytestmark = pytest.mark.model

QUESTION = "Who designed the Zorvian Museum?"
CONTEXT = (
    "The Zorvian Museum in Kelton was completed in 1847. It was designed by the architect Mara Delqvist."
)


def test_grounded_passes_and_ungrounded_fails(smollm2: Any) -> None:
    row = assert_grounded(
        QUESTION, [CONTEXT], "The Zorvian Museum was designed by Mara Delqvist.", model="smollm2-135m"
    )
    assert row["verdict"] == "grounded" and row["consens"] > 0.5  # about +1.00

    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(
            QUESTION,
            [CONTEXT],
            "The Zorvian Museum was designed by Frank Gehry in 1995.",
            model="smollm2-135m",
        )
    assert info.value.row["verdict"] == "ungrounded" and info.value.consens < -0.5  # about -0.86
    message = str(info.value)
    assert "model smollm2-135m" in message and "documents" not in message
    weakest = message.split("more likely):\n", 1)[1].split()
    assert weakest[0] == "Frank"  # contrast about -4.1: the context made "Frank" less likely

    # Two documents: the failure also ranks them by how much the score drops without each.
    with pytest.raises(GroundingAssertionError) as info:
        assert_grounded(
            "What is the capital of Australia?",
            [
                "Canberra is the capital city of Australia.",
                "The Great Barrier Reef lies off the coast of Queensland.",
            ],
            "The capital of Australia is Sydney, home of the famous opera house.",
            model="smollm2-135m",
        )
    assert info.value.row["verdict"] == "ungrounded"  # about -0.80
    message = str(info.value)
    assert message.split("more likely):\n", 1)[1].split()[0] == "Sydney"  # about -4.2
    assert "[0] drop" in message and "[1] drop" in message
