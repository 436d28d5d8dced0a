"""The perturber against naive re-implementations, on the bundled SmolLM2 (real weights)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ragsense.correctness import PerturbationSettings, Perturber
from ragsense.errors import CapabilityError, InputError
from ragsense.models import load_model

CONTEXT = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, "
    "a region in France. They were descended from Norse raiders and pirates from Denmark, Iceland "
    "and Norway who, under their leader Rollo, agreed to swear fealty to King Charles III."
)


def _logits(model: Any, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        states, _ = model.forward_hidden(torch.tensor([ids]))
        return model.lm_head(states[0])


def _nll(model: Any, ids: list[int]) -> list[float]:
    logprobs = torch.log_softmax(_logits(model, ids), dim=-1)
    return [float("nan")] + [-float(logprobs[p - 1, ids[p]]) for p in range(1, len(ids))]


def _left_fill(model: Any, ids: list[int], p: int) -> int:
    logits = _logits(model, ids)[p - 1].clone()
    logits[[*model.tokenizer.all_special_ids, ids[p]]] = float("-inf")
    return int(torch.argmax(logits))


def _token_ids(model: Any, text: str) -> list[int]:
    return list(model.tokenizer(text)["input_ids"])


def test_exact_iterative_matches_a_full_rescore_after_every_step(smollm2: Any) -> None:
    k = 4
    ids = _token_ids(smollm2, CONTEXT)
    assert smollm2.tokenizer.bos_token_id not in ids[:1]  # SmolLM2 adds no BOS: position 0 is never picked
    done: set[int] = set()
    expected = []
    for _ in range(k):
        nll = _nll(smollm2, ids)
        p = max((q for q in range(1, len(ids)) if q not in done), key=lambda q: (nll[q], -q))
        ids[p] = _left_fill(smollm2, ids, p)
        done.add(p)
        expected.append((p, smollm2.tokenizer.convert_ids_to_tokens(ids[p])))
    settings = PerturbationSettings(k=k, fill="left", rescore_window=None)
    got = Perturber(smollm2, settings).perturb(CONTEXT)
    assert [(r.position, r.replacement) for r in got.replacements] == sorted(expected)
    assert got.text == smollm2.tokenizer.decode(ids, clean_up_tokenization_spaces=False)


def test_single_shot_picks_the_k_least_likely_tokens_of_one_pass(smollm2: Any) -> None:
    ids = _token_ids(smollm2, CONTEXT)
    nll = _nll(smollm2, ids)
    top = sorted(sorted(range(1, len(ids)), key=lambda q: (-nll[q], q))[:5])
    got = Perturber(smollm2, PerturbationSettings(k=5, how="single_shot", fill="left")).perturb(CONTEXT)
    assert [r.position for r in got.replacements] == top
    assert [r.replacement for r in got.replacements] == [
        smollm2.tokenizer.convert_ids_to_tokens(_left_fill(smollm2, ids, p)) for p in top
    ]
    assert all(r.nll == pytest.approx(nll[r.position], abs=1e-4) for r in got.replacements)


def test_infill_keeps_the_candidate_that_best_explains_the_right_hand_side(smollm2: Any) -> None:
    settings = PerturbationSettings(
        k=3, how="single_shot", fill="infill", infill_candidates=4, infill_right_tokens=3
    )
    got = Perturber(smollm2, settings).perturb(CONTEXT)
    ids = _token_ids(smollm2, CONTEXT)
    for r in got.replacements:
        p = r.position
        logprobs = torch.log_softmax(_logits(smollm2, ids)[p - 1], dim=-1)
        logprobs[[*smollm2.tokenizer.all_special_ids, ids[p]]] = float("-inf")
        candidates = torch.topk(logprobs, 4).indices.tolist()
        scores = []
        for c in candidates:
            trial = [*ids[:p], c, *ids[p + 1 :]]
            right = torch.log_softmax(_logits(smollm2, trial[: p + 4]), dim=-1)
            scores.append(
                float(logprobs[c]) + sum(float(right[q - 1, trial[q]]) for q in range(p + 1, p + 4))
            )
        best = candidates[max(range(4), key=lambda i: scores[i])]
        assert r.replacement == smollm2.tokenizer.convert_ids_to_tokens(best)
    # The fill changes what replaces a token, never where: both read the same ranking.
    left = Perturber(smollm2, PerturbationSettings(k=3, how="single_shot", fill="left")).perturb(CONTEXT)
    assert [r.position for r in left.replacements] == [r.position for r in got.replacements]


def test_windowed_iterative_is_deterministic_and_perturbs_k_distinct_tokens(smollm2: Any) -> None:
    settings = PerturbationSettings(k=6, rescore_window=8)
    first = Perturber(smollm2, settings).perturb(CONTEXT)
    again = Perturber(smollm2, settings).perturb(CONTEXT)
    assert first == again
    positions = [r.position for r in first.replacements]
    assert len(set(positions)) == 6
    assert all(r.original != r.replacement for r in first.replacements)
    assert first.text != CONTEXT


def test_random_picks_follow_the_seed(smollm2: Any) -> None:
    a = Perturber(smollm2, PerturbationSettings(k=5, where="random", seed=1)).perturb(CONTEXT)
    b = Perturber(smollm2, PerturbationSettings(k=5, where="random", seed=1)).perturb(CONTEXT)
    c = Perturber(smollm2, PerturbationSettings(k=5, where="random", seed=2)).perturb(CONTEXT)
    assert a == b
    assert [r.position for r in a.replacements] != [r.position for r in c.replacements]
    assert all(r.nll is None for r in a.replacements)


def test_short_and_empty_contexts_are_input_errors(smollm2: Any) -> None:
    with pytest.raises(InputError, match=r"field 'contexts'.*fewer than the 15 perturbations"):
        Perturber(smollm2, PerturbationSettings()).perturb("Paris is in France.")
    with pytest.raises(InputError, match="empty"):
        Perturber(smollm2).perturb("  ")


def test_long_contexts_are_perturbed_in_their_first_tokens_only(smollm2: Any) -> None:
    got = Perturber(smollm2, PerturbationSettings(k=3, max_context_tokens=20)).perturb(CONTEXT)
    assert got.truncated and got.n_tokens == 20
    assert all(r.position < 20 for r in got.replacements)
    assert got.text.endswith(CONTEXT[-80:])


def test_a_different_family_can_perturb(gemma3: Any) -> None:
    # Gemma's tokenizer adds a BOS token; positions count from the first context token.
    got = Perturber(gemma3, PerturbationSettings(k=3, how="single_shot")).perturb(CONTEXT)
    assert len(got.replacements) == 3 and got.text != CONTEXT
    assert all(0 <= r.position < got.n_tokens for r in got.replacements)


def test_a_server_model_cannot_perturb() -> None:
    with pytest.raises(CapabilityError, match="local transformers model"):
        Perturber(load_model("fake"))


def _counting(model: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace ``model.forward_hidden`` by a wrapper that records each call's token count."""
    calls: list[int] = []
    forward = model.forward_hidden

    def counted(ids: torch.Tensor, *rest: Any, **kw: Any) -> Any:
        calls.append(int(ids.numel()))
        return forward(ids, *rest, **kw)

    monkeypatch.setattr(model, "forward_hidden", counted)
    return calls


def test_without_catch_up_each_step_runs_only_its_window(
    smollm2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = PerturbationSettings(k=8, rescore_window=4, catch_up=False)
    calls = _counting(smollm2, monkeypatch)
    first = Perturber(smollm2, settings).perturb(CONTEXT)
    assert len(calls) == 9 and max(calls[1:]) <= 5  # the full pass, then K windows of at most 1 + 4
    assert first == Perturber(smollm2, settings).perturb(CONTEXT)
    assert len({r.position for r in first.replacements}) == 8
    assert all(r.original != r.replacement for r in first.replacements)
    # Its own cache key; the default's key is what it was before the setting existed.
    assert settings.key != PerturbationSettings(k=8, rescore_window=4).key
    assert "catch_up" not in PerturbationSettings().key
