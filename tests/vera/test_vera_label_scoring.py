"""Label scoring by tokens (sum, mean, first token), the decision by sides (P(stated) + P(inferable)),
calibration under each rule, the chat-template prompt format, and what the adherence step records."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsense.data import RagRow
from ragsense.errors import CapabilityError, ParameterError
from ragsense.models import ChatMessage, ChoiceRequest, ContinuationScore, ScoreRequest, load_model
from ragsense.models._fake import FakeModel
from ragsense.vera import (
    RESPONSE_ADHERENCE,
    AdherenceInput,
    LabelJudge,
    VeraEnhancement,
    VeraEvaluation,
    VeraEvaluator,
    VeraSettings,
    Verdict,
    decide_label,
    label_probabilities,
    label_scores,
)

ADHERENCE_ITEM = AdherenceInput(context="The Orvel bridge opened in 1891.", statement="It opened in 1891.")

# Token log-probabilities per label: " stated" is one token, " inferable" and " unsupported" two each.
TABLE = {
    " stated": [-2.0],
    " inferable": [-1.2, -0.1],
    " unsupported": [-0.6, -1.5],
}
PRIOR_TABLE = {" stated": [-0.5], " inferable": [-2.0, -0.1], " unsupported": [-2.0, -0.2]}


class Tokenising(FakeModel):
    """Labels split into two tokens after their first three letters; log-probabilities from a table
    (the content-free prompt, every field "N/A", gets ``PRIOR_TABLE``)."""

    def __init__(self) -> None:
        super().__init__("tokenising")
        self.requests: list[ChoiceRequest] = []

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        out = []
        for r in requests:
            c = r.continuation
            cut = [(0, 4), (4, len(c))] if len(c) > 8 else [(0, len(c))]
            tokens = tuple(c[a:b] for a, b in cut)
            out.append(ContinuationScore(tokens, tuple(cut), tuple(-1.0 for _ in cut), prompt_tokens=3))
        return out

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        self.requests.extend(requests)
        out = []
        for r in requests:
            table = PRIOR_TABLE if "Statement: N/A" in r.prompt else TABLE
            totals = []
            for choice in r.choices:
                label = next((k for k in table if k.strip().startswith(choice.strip())), None)
                if label is None:  # another prompt's labels
                    totals.append(-1.0)
                    continue
                n = 1 if len(choice.strip()) < len(label.strip()) else len(table[label])
                totals.append(math.fsum(table[label][:n]))
            out.append(tuple(totals))
        return out


def test_label_scores_and_probabilities() -> None:
    tokens = [[-2.0], [-1.2, -0.1], [-0.6, -1.5]]
    assert label_scores(tokens, "sum") == pytest.approx([-2.0, -1.3, -2.1])
    assert label_scores(tokens, "mean") == pytest.approx([-2.0, -0.65, -1.05])
    assert label_scores(tokens, "first_token") == pytest.approx([-2.0, -1.2, -0.6])
    with pytest.raises(ParameterError, match="label_scoring"):
        label_scores(tokens, "max")
    probs = label_probabilities(["a", "b"], {"a": [-1.0], "b": [-1.0]}, "sum")
    assert probs == {"a": 0.5, "b": 0.5}


def test_decision_goes_by_sides_not_by_the_argmax() -> None:
    labels, positive = RESPONSE_ADHERENCE.labels, RESPONSE_ADHERENCE.positive_labels
    # "unsupported" is the single most likely label, but the two grounded labels together outweigh it.
    split = {"stated": 0.3, "inferable": 0.28, "unsupported": 0.42}
    assert decide_label(labels, positive, split) == "stated"
    assert (
        decide_label(labels, positive, {"stated": 0.2, "inferable": 0.2, "unsupported": 0.6}) == "unsupported"
    )
    # With one label per side it is the argmax, ties to the first (positive) label as before.
    assert (
        decide_label(("relevant", "irrelevant"), ("relevant",), {"relevant": 0.5, "irrelevant": 0.5})
        == "relevant"
    )
    assert (
        decide_label(("relevant", "irrelevant"), ("relevant",), {"relevant": 0.4, "irrelevant": 0.6})
        == "irrelevant"
    )


@pytest.mark.parametrize(
    ("scoring", "label"),
    # sum: stated -2.0, inferable -1.3, unsupported -2.1; mean: -2.0, -0.65, -1.05; first token: -2.0,
    # -1.2, -0.6, where P(stated) + P(inferable) = 0.44 < 0.5.
    [("sum", "inferable"), ("mean", "inferable"), ("first_token", "unsupported")],
)
def test_label_judge_recovers_token_logprobs_and_applies_the_rule(scoring: str, label: str) -> None:
    model = Tokenising()
    [v] = asyncio.run(LabelJudge(model, label_scoring=scoring).judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    assert v.token_logprobs is not None
    for name, choice in zip(RESPONSE_ADHERENCE.labels, RESPONSE_ADHERENCE.choices, strict=True):
        assert v.token_logprobs[name] == pytest.approx(TABLE[choice])
    assert v.label == label
    assert v.probabilities == pytest.approx(
        label_probabilities(RESPONSE_ADHERENCE.labels, v.token_logprobs, scoring)
    )
    # One prompt pass: every token-prefix of every label is a choice of the same request.
    [request] = model.requests
    assert set(request.choices) == {" stated", " inf", " inferable", " uns", " unsupported"}
    assert request.shared_prefix == RESPONSE_ADHERENCE.shared_length(ADHERENCE_ITEM)


def test_calibration_uses_the_same_rule_for_the_prior() -> None:
    judge = LabelJudge(Tokenising(), label_scoring="mean", calibrate=True)
    [v] = asyncio.run(judge.judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    prior = {k.strip(): t for k, t in PRIOR_TABLE.items()}
    assert judge.known_prior(RESPONSE_ADHERENCE) == {k: pytest.approx(t) for k, t in prior.items()}
    assert v.token_logprobs is not None
    expected = label_probabilities(RESPONSE_ADHERENCE.labels, v.token_logprobs, "mean", prior)
    assert v.probabilities == pytest.approx(expected)
    assert judge.description == "labels:tokenising:mean:calibrated"


def test_cache_key_includes_the_scoring_rule(tmp_path: Path) -> None:
    model = Tokenising()
    first = LabelJudge(model, cache_dir=tmp_path)
    asyncio.run(first.judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    again = LabelJudge(model, cache_dir=tmp_path)
    [cached] = asyncio.run(again.judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    assert again.hits == 1 and cached.token_logprobs is not None  # token log-probs survive the cache
    other = LabelJudge(model, cache_dir=tmp_path, label_scoring="first_token")
    asyncio.run(other.judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    assert other.misses == 1


def test_parameter_errors() -> None:
    with pytest.raises(ParameterError, match="label_scoring"):
        LabelJudge(FakeModel(), label_scoring="max")
    with pytest.raises(ParameterError, match="prompt_format"):
        LabelJudge(FakeModel(), prompt_format="html")
    with pytest.raises(CapabilityError, match="chat template"):
        LabelJudge(FakeModel(), prompt_format="chat")  # the fake has no tokenizer


class _Template:
    """A tokenizer stub with a ChatML-like template."""

    chat_template = "chatml"

    def apply_chat_template(
        self, turns: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool
    ) -> str:
        assert not tokenize and add_generation_prompt
        body = "".join(f"<|im_start|>{t['role']}\n{t['content']}<|im_end|>\n" for t in turns)
        return body + "<|im_start|>assistant\n"


class Chatty(Tokenising):
    tokenizer = _Template()


def test_chat_prompt_format_scores_bare_labels_as_the_reply() -> None:
    model = Chatty()
    judge = LabelJudge(model, prompt_format="chat")
    text, shared = judge.render(RESPONSE_ADHERENCE, ADHERENCE_ITEM)
    assert text.endswith("Statement: It opened in 1891.<|im_end|>\n<|im_start|>assistant\n")
    assert text[:shared].endswith("<|im_start|>user\nContext: The Orvel bridge opened in 1891.\n")
    messages = RESPONSE_ADHERENCE.render_chat_labels(ADHERENCE_ITEM)
    assert messages[0].role == "system" and "Reply with the label only." in messages[0].content
    assert messages[2] == ChatMessage("assistant", "stated")  # an example answered by its bare label
    [v] = asyncio.run(judge.judge(RESPONSE_ADHERENCE, [ADHERENCE_ITEM]))
    assert v.ok and model.requests[0].choices[0] == "stated"  # no leading space in the reply
    assert judge.description == "labels:tokenising:chat"


# -- the adherence step -----------------------------------------------------------------------------

ROW = RagRow(
    id="r1",
    question="When did the Orvel bridge open?",
    contexts=["The Orvel bridge opened in 1891. It was designed by Mara Quint."],
    answer="The Orvel bridge opened in 1891. Zebras juggle flaming torches.",
)


class SplitVote:
    """A judge whose adherence probabilities split the grounded vote: 0.3 + 0.3 against 0.4."""

    description = "split-vote"
    can_split = False

    async def judge(self, prompt: Any, items: Sequence[Any]) -> list[Verdict]:
        out = []
        for item in items:
            if prompt.name != RESPONSE_ADHERENCE.name:
                out.append(Verdict(prompt.labels[0], confidence=1.0))
                continue
            grounded = "1891" in item.statement
            probs = (
                {"stated": 0.3, "inferable": 0.3, "unsupported": 0.4}
                if grounded
                else {"stated": 0.1, "inferable": 0.1, "unsupported": 0.8}
            )
            label = decide_label(RESPONSE_ADHERENCE.labels, RESPONSE_ADHERENCE.positive_labels, probs)
            out.append(Verdict(label, confidence=probs[label], probabilities=probs))
        return out

    async def split(self, items: Sequence[Any]) -> list[Any]:
        raise AssertionError("not used")


def test_judge_signal_keeps_a_statement_whose_grounded_labels_outweigh_unsupported() -> None:
    [ev] = VeraEvaluator(SplitVote(), VeraSettings(adherence_signal="judge", signals="judge")).evaluate_sync(
        [ROW]
    )
    assert isinstance(ev, VeraEvaluation)
    first, second = ev.adherence.decisions
    assert first.keep and first.label == "stated" and first.grounded_probability == pytest.approx(0.6)
    assert not second.keep and second.label == "unsupported"
    assert ev.response_adherence == 0.5


def test_enhance_removes_unsupported_statements_and_says_so() -> None:
    [en] = VeraEvaluator(SplitVote(), VeraSettings(adherence_signal="judge", signals="judge")).enhance_sync(
        [ROW]
    )
    assert isinstance(en, VeraEnhancement) and en.adherence is not None
    assert en.answer == "The Orvel bridge opened in 1891."
    assert "statement 1 removed: unsupported and no correction" in en.adherence.notes


def test_adherence_decisions_record_consens_under_every_aggregation_and_the_token_logprobs() -> None:
    fake = load_model("fake")
    vera = VeraEvaluator(
        LabelJudge(Tokenising()),
        VeraSettings(adherence_signal="combined", consens_model=fake, signals="judge"),
    )
    [ev] = vera.evaluate_sync([ROW])
    assert isinstance(ev, VeraEvaluation)
    for d in ev.adherence.decisions:
        assert d.token_logprobs is not None and set(d.token_logprobs) == set(RESPONSE_ADHERENCE.labels)
        assert d.consens_by_aggregation is not None and {"arithmetic", "geometric"} <= set(
            d.consens_by_aggregation
        )
        assert d.consens is not None and d.consens in d.consens_by_aggregation.values()
        assert d.consens_word_nll and all(len(pair) == 2 for pair in d.consens_word_nll)
    [judge_only] = VeraEvaluator(
        LabelJudge(Tokenising()), VeraSettings(adherence_signal="judge", signals="judge")
    ).evaluate_sync([ROW])
    assert isinstance(judge_only, VeraEvaluation)
    assert all(d.consens_by_aggregation is None for d in judge_only.adherence.decisions)


def test_experiment_cli_offers_the_same_label_options() -> None:
    import argparse

    from ragsense.cli import _experiment
    from ragsense.vera import DEFAULT_LABEL_SCORING, LABEL_SCORINGS, PROMPT_FORMATS

    parser = argparse.ArgumentParser()
    _experiment.add_parser(parser.add_subparsers())
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    actions = {a.dest: a for a in sub.choices["experiment"]._actions}
    assert tuple(actions["label_scoring"].choices or ()) == LABEL_SCORINGS
    assert actions["label_scoring"].default == DEFAULT_LABEL_SCORING
    assert tuple(actions["prompt_format"].choices or ()) == PROMPT_FORMATS
