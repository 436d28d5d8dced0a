"""The capable reader ``qwen2.5-coder-0.5b`` end to end: loaded from its checked weight packages,
scoring through the commands a user runs. Slow (the first load converts 491 MB of GGUF, about 2 min
on two cores; later loads take 10-40 s) and skipped where ``ragsense[capable]`` is not installed."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from ragsense.cli import main
from ragsense.models import BUNDLED_MODELS

NAME = "qwen2.5-coder-0.5b"
_PARTS = BUNDLED_MODELS[NAME].parts
assert _PARTS is not None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.skipif(
        any(importlib.util.find_spec(p.module) is None for p in _PARTS.parts),
        reason="the capable extra is not installed: pip install 'ragsense[capable]'",
    ),
]

CONTEXT = (
    "Penicillin was discovered in 1928 by Alexander Fleming at St Mary's Hospital in London. "
    "It was first used to treat a patient in 1941."
)


def test_evaluate_sample_runs_with_the_capable_reader(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--sample", "--model", NAME, "--no-store", "--table", "always"]) == 0
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines()[2:] if line.strip()]
    assert len(rows) == 10, out
    assert "10 rows: 10 ok, 0 with errors" in err
    # The sample's two refusals are refusals whatever the reader.
    assert sum(line.split().count("refusal") == 2 for line in rows) == 2


def test_grounding_file_scores_rows_and_keeps_the_batch_going(tmp_path: Path) -> None:
    good = {"question": "Who discovered penicillin?", "contexts": [CONTEXT]}
    lines = [
        json.dumps({**good, "answer": "Alexander Fleming discovered penicillin in 1928."}),
        json.dumps({**good, "answer": "Louis Pasteur discovered penicillin in 1931 in Paris."}),
        json.dumps({**good, "answer": ""}),
        json.dumps({**good, "answer": "Alexander Fleming discovered penicillin in 1928."}),
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    code = main(["grounding", str(src), "--model", NAME, "-o", str(out), "--table", "never", "--no-store"])
    assert code == 3  # finished, one row errored
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[2]["errors"] and rows[2]["errors"][0]["field"] == "answer"
    right, invented, _, again = rows
    assert all(math.isfinite(r["consens"]) and -1.0 <= r["consens"] <= 1.0 for r in (right, invented))
    assert right["consens"] > invented["consens"]
    assert again["consens"] == right["consens"]  # same input, same model: same score
    invented_words = {w["word"]: w for w in invented["words"]}
    assert {"Louis", "Pasteur", "1931"} <= set(invented_words)


def test_the_capable_reader_serves_every_method() -> None:
    """The VERA judge, the correctness base model and ConSens take the name; the chat template is
    Qwen's own (``<|im_start|>`` turns), so generation prompts are built the model's way."""
    import ragsense
    from ragsense.models import ChatMessage, shared_pool

    model = shared_pool().get(NAME)
    assert model.info.name == NAME
    render = model.render_chat  # type: ignore[attr-defined]
    prompt = render([ChatMessage("user", "Say hi.")])
    assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\n")
    result = ragsense.grounding("Who discovered penicillin?", [CONTEXT], "Alexander Fleming.", model=NAME)
    assert result.verdict in {"grounded", "unsure", "ungrounded"} and math.isfinite(result.consens)
