"""ConSens through a real OpenAI-compatible HTTP server on 127.0.0.1 equals ConSens computed locally."""

import pytest

from ragsense import grounding
from ragsense.models import load_model
from ragsense.serve import start_in_thread

pytestmark = pytest.mark.model

Q = "What is David Baker known for?"
DOCS = [
    "The Nile is a river in Africa.",
    "David Baker is an American biochemist who has pioneered methods to design proteins.",
]
ANSWER = "David Baker is a biochemist and protein designer, born in 1962."


def test_server_backend_matches_local_scores(smollm2) -> None:  # type: ignore[no-untyped-def]
    server, base_url = start_in_thread(smollm2, model_name="smollm2-135m")
    try:
        remote = load_model("openai:smollm2-135m", base_url=base_url, max_retries=0)
        assert remote.info.context_window == smollm2.info.context_window
        local = grounding(Q, DOCS, ANSWER, model=smollm2, attribution=True)
        served = grounding(Q, DOCS, ANSWER, model=remote, attribution=True)
    finally:
        server.close()
    assert served.consens == pytest.approx(local.consens, abs=1e-4)
    assert [w.word for w in served.words] == [w.word for w in local.words]
    for a, b in zip(served.words, local.words, strict=True):
        assert a.nll_context == pytest.approx(b.nll_context, abs=1e-4)
        assert a.nll_empty == pytest.approx(b.nll_empty, abs=1e-4)
    assert served.top_document == local.top_document == 1
