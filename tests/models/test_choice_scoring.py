"""SupportsChoiceScoring: score_choices against score(), determinism, the shared-prefix cache, errors."""

from __future__ import annotations

import asyncio

import pytest

from ragsense.models import ChoiceRequest, ScoreRequest, SupportsChoiceScoring, load_model

# The shared prefix ends with a single newline: SmolLM2 tokenizes it as the prompt's leading tokens
# (a prefix ending in "\n\n" would not be: the tokenizer writes a lone "\n\n" as one token).
PREFIX = (
    "You label whether a passage answers a question.\n"
    "Question: Where is Paris?\nPassage: Paris is the capital of France.\nLabel: relevant\n"
)
LABELS = (" relevant", " not relevant", " inferable")


def _request(question: str, passage: str, shared: bool = True) -> ChoiceRequest:
    prompt = f"{PREFIX}Question: {question}\nPassage: {passage}\nLabel:"
    return ChoiceRequest(prompt, LABELS, shared_prefix=len(PREFIX) if shared else 0)


def _reference(model, req: ChoiceRequest) -> list[float]:  # type: ignore[no-untyped-def]
    scores = model.score_sync([ScoreRequest(req.prompt, c) for c in req.choices])
    return [sum(s.logprobs) for s in scores]


@pytest.mark.model
def test_choice_totals_match_score(smollm2) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(smollm2, SupportsChoiceScoring)
    requests = [
        _request("Who wrote Hamlet?", "Hamlet is a tragedy by William Shakespeare."),
        _request("Who wrote Hamlet?", "Bananas are yellow.", shared=False),
        ChoiceRequest("The answer is rel", ("evant", " relevant", "ax")),
        ChoiceRequest("Is the sky blue? Answer:", (" yes", " no", " it depends on the weather today")),
    ]
    # Both paths are exercised: choices on the prompt's KV state, and boundary merges through score().
    boundary = smollm2._choices.plan(requests[2])
    assert [i for i, _ in boundary.slow] == [0, 2] and [i for i, _ in boundary.fast] == [1]
    assert not smollm2._choices.plan(requests[0]).slow
    got = asyncio.run(smollm2.score_choices(requests))
    assert len(got) == len(requests)
    for req, totals in zip(requests, got, strict=True):
        assert isinstance(totals, tuple) and all(isinstance(t, float) for t in totals)
        assert list(totals) == pytest.approx(_reference(smollm2, req), abs=1e-4)


@pytest.mark.model
def test_choice_passes_split_by_the_kv_budget_agree(smollm2, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import ragsense.models._hf_choices as backend

    req = ChoiceRequest("Is the sky blue? Answer:", (" not at all", " yes, mostly", " no", " rarely so"))
    whole = smollm2.score_choices_sync([req])
    # One choice per batched pass: the prompt's KV state is copied for every pass but the last.
    monkeypatch.setattr(backend, "CHOICE_KV_TOKENS", 1)
    split = smollm2.score_choices_sync([req])
    assert list(split[0]) == pytest.approx(list(whole[0]), abs=1e-4)
    assert list(split[0]) == pytest.approx(_reference(smollm2, req), abs=1e-4)


@pytest.mark.model
def test_results_are_bit_identical_cold_warm_and_batched(smollm2) -> None:  # type: ignore[no-untyped-def]
    smollm2.clear_prompt_cache()
    req = _request("Who painted the Mona Lisa?", "Leonardo da Vinci painted the Mona Lisa.")
    plan = smollm2._choices.plan(req)
    assert plan.prefix > 0
    before = smollm2.prompt_cache_stats()
    cold = smollm2.score_choices_sync([req])
    # The shared prefix is kept in the model's one prompt cache, bounded by its token budget.
    kept = smollm2.prompt_cache_stats()
    assert (kept.entries, kept.tokens) == (1, plan.prefix) and kept.misses == before.misses + 1
    warm = smollm2.score_choices_sync([req])
    assert smollm2.prompt_cache_stats().hits == kept.hits + 1
    others = [
        _request("How tall is Everest?", "Mount Everest is 8,849 metres tall."),
        ChoiceRequest("Is the sky blue? Answer:", (" yes", " no")),
    ]
    batched = smollm2.score_choices_sync([others[0], req, others[1], req])
    assert cold == warm == [batched[1]] == [batched[3]]
    # A cold cache filled by another request of the same call changes nothing either, nor no cache.
    smollm2.clear_prompt_cache()
    assert smollm2.score_choices_sync([others[0], req])[1] == cold[0]
    assert smollm2.with_settings(prompt_cache_tokens=0).score_choices_sync([req]) == cold


@pytest.mark.model
def test_shared_prefix_that_is_not_a_token_prefix_is_ignored(smollm2) -> None:  # type: ignore[no-untyped-def]
    smollm2.clear_prompt_cache()
    prompt = "The capital of France is a city called Paris. Is this relevant? Answer:"
    # Cut inside "capital": "cap" tokenized alone is not a prefix of the prompt's tokens.
    cut = ChoiceRequest(prompt, LABELS, shared_prefix=prompt.index("ital"))
    assert smollm2._choices.plan(cut).prefix == 0
    plain = ChoiceRequest(prompt, LABELS)
    [with_cut, without] = smollm2.score_choices_sync([cut, plain])
    assert list(with_cut) == pytest.approx(list(without), abs=1e-4)
    assert smollm2.prompt_cache_stats().entries == 0
    # A shared prefix covering the whole prompt is a valid prefix with nothing after it.
    whole = ChoiceRequest(prompt, LABELS, shared_prefix=len(prompt) + 10)
    assert list(smollm2.score_choices_sync([whole])[0]) == pytest.approx(list(without), abs=1e-4)


@pytest.mark.model
def test_choice_errors(smollm2) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="no choices"):
        smollm2.score_choices_sync([ChoiceRequest("Label:", ())])
    with pytest.raises(ValueError, match="empty choice"):
        smollm2.score_choices_sync([ChoiceRequest("Label:", (" yes", ""))])
    too_long = "word " * (smollm2.info.context_window + 10)
    with pytest.raises(ValueError, match="context window"):
        smollm2.score_choices_sync([ChoiceRequest(too_long, (" yes",))])


def test_fake_model_choices_sum_its_scores() -> None:
    fake = load_model("fake")
    assert isinstance(fake, SupportsChoiceScoring)
    reqs = [
        ChoiceRequest("Paris is in France. Answer:", (" Paris", " Lyon is big", " France")),
        ChoiceRequest("Nothing here.", (" relevant",), shared_prefix=4),
    ]
    got = asyncio.run(fake.score_choices(reqs))
    for req, totals in zip(reqs, got, strict=True):
        scores = asyncio.run(fake.score([ScoreRequest(req.prompt, c) for c in req.choices]))
        assert totals == tuple(sum(s.logprobs) for s in scores)
    with pytest.raises(ValueError):
        asyncio.run(fake.score_choices([ChoiceRequest("x", ("",))]))
    with pytest.raises(ValueError):
        asyncio.run(fake.score_choices([ChoiceRequest("x", ())]))
