"""Decoding for the transformers backend: greedy (plain or scored) and seeded sampling.

* :func:`greedy_loop` is the one hand-written greedy decoder: one pass over the prompt, then one
  position per step on the KV cache, the LM head (through the kernel) on the last position only.
* :func:`generate_greedy_one` (``generate`` and ``chat`` at temperature 0) picks the arg-max of the
  logits and stops as ``generate`` stops (the model's EOS ids from its generation config, the stop
  strings through transformers' own ``StopStringCriteria``), so its tokens, ``finish_reason`` and
  ``n_tokens`` are those ``generate`` gave for one prompt.
* :func:`generate_scored_one` (``generate_scored``) also scores the prompt from the same pass and keeps
  each generated token's log-probability; it stops at the tokenizer's EOS or when a stop string appears
  in the decoded output.
* :func:`hf_generate` wraps Hugging Face ``generate`` (batched, left padding) for seeded sampling only.
Structured output (``config.json_schema``) is dispatched by the backend to
:mod:`ragsense.models._structured`, which calls greedy generation and choice scoring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragsense.errors import CapabilityError, ParameterError
from ragsense.models._interface import ContinuationScore, Generation, GenerationConfig, ScoredGeneration

if TYPE_CHECKING:
    from ragsense.models._kernel import LogprobKernel


def check_scored_config(config: GenerationConfig) -> None:
    if config.temperature > 0:
        raise ParameterError("scored generation is greedy; use temperature 0", parameter="temperature")
    if config.json_schema is not None:
        raise CapabilityError(
            "scored generation decodes free text and cannot honour GenerationConfig.json_schema; "
            "use generate() or chat() for structured output"
        )


def greedy_loop(
    kernel: LogprobKernel,
    ids: list[int],
    max_new_tokens: int,
    *,
    scored: bool,
    stop: Callable[[list[int]], bool],
) -> tuple[list[int], list[float], Any]:
    """Greedy decoding after ``ids``: ``(generated ids, their log-probs, the prompt's states)``.

    ``scored``: pick the arg-max of the log-softmax row and keep its log-probability (else the arg-max
    of the logits, no log-probs). ``stop(generated)`` is asked after each token. Call under
    ``torch.inference_mode()``.
    """
    torch = kernel.torch
    generated: list[int] = []
    out_lp: list[float] = []
    prompt_states, cache = kernel.forward(torch.tensor([ids], dtype=torch.long))
    last = prompt_states[0, -1:]
    for _ in range(max_new_tokens):
        if scored:
            logprobs = kernel.next_token_logprobs(last)
            nxt = int(torch.argmax(logprobs))
            out_lp.append(float(logprobs[nxt]))
        else:
            nxt = int(torch.argmax(kernel.logits(last)[0]))
        generated.append(nxt)
        if stop(generated):
            break
        states, cache = kernel.forward(torch.tensor([[nxt]], dtype=torch.long), cache)
        last = states[0, -1:]
    return generated, out_lp, prompt_states


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The ids ``generate`` stops at: the generation config's ``eos_token_id`` (an id or a list)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None) if config is not None else None
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}


def finished_generation(tok: Any, gen_ids: list[int], config: GenerationConfig) -> Generation:
    """The text of generated ids (pad ids already left out), cut at the first stop string, with
    ``generate``'s finish reason: ``length`` when the token cap was reached, else ``stop``."""
    text = tok.decode(gen_ids, skip_special_tokens=True)
    finish = "length" if len(gen_ids) >= config.max_new_tokens else "stop"
    for stop in config.stop:
        cut = text.find(stop)
        if cut >= 0:
            text, finish = text[:cut], "stop"
    return Generation(text=text, finish_reason=finish, n_tokens=len(gen_ids))


def generate_greedy_one(
    kernel: LogprobKernel,
    tok: Any,
    prompt: str,
    config: GenerationConfig,
    *,
    add_special_tokens: bool,
    eos: set[int],
    pad_id: int,
) -> Generation:
    """Greedy generation of one prompt with ``generate``'s stopping rules (see the module docstring)."""
    torch = kernel.torch
    ids: list[int] = list(tok(prompt, add_special_tokens=add_special_tokens)["input_ids"])
    criteria: Any = None
    if config.stop:
        from transformers import StopStringCriteria

        criteria = StopStringCriteria(tokenizer=tok, stop_strings=list(config.stop))

    def should_stop(generated: list[int]) -> bool:
        if generated[-1] in eos:
            return True
        if criteria is None:
            return False
        sequence = torch.tensor([ids + generated], dtype=torch.long)
        return bool(criteria(sequence, None)[0])

    with torch.inference_mode():
        generated, _, _ = greedy_loop(kernel, ids, config.max_new_tokens, scored=False, stop=should_stop)
    return finished_generation(tok, [t for t in generated if t != pad_id], config)


def generate_scored_one(
    kernel: LogprobKernel, tok: Any, prompt: str, config: GenerationConfig, context_window: int
) -> ScoredGeneration:
    """Greedy decoding of one prompt, reusing the prompt pass for the prompt's log-probs.

    The prompt is tokenized with special tokens added; the LM head runs over the prompt once (its
    log-probs are wanted) and then on one position per step.
    """
    torch = kernel.torch
    enc = tok(prompt, add_special_tokens=True, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
    if len(ids) + config.max_new_tokens > context_window:
        raise ValueError(
            f"prompt is {len(ids)} tokens; with {config.max_new_tokens} new tokens it is over the "
            f"context window of {context_window}; truncate the context first"
        )
    eos = tok.eos_token_id
    finish = "length"

    def should_stop(generated: list[int]) -> bool:
        nonlocal finish
        if generated[-1] == eos or (
            config.stop and any(s in tok.decode(generated, skip_special_tokens=True) for s in config.stop)
        ):
            finish = "stop"
            return True
        return False

    with torch.inference_mode():
        generated, out_lp, states = greedy_loop(
            kernel, ids, config.max_new_tokens, scored=True, stop=should_stop
        )
        targets = torch.tensor(ids[1:], dtype=torch.long)
        prompt_lp = kernel.target_logprobs(states[0, :-1], targets).cpu().tolist()
    text = tok.decode(generated, skip_special_tokens=True)
    for stop in config.stop:
        cut = text.find(stop)
        if cut >= 0:
            text = text[:cut]
    special = set(tok.all_special_ids)
    # Position 0 has no left context: it is scored only when it is a special (BOS) token, i.e. never.
    first = 1
    while first < len(ids) and ids[first] in special and offsets[first][0] == offsets[first][1]:
        first += 1
    prompt_score = ContinuationScore(
        tokens=tuple(tok.convert_ids_to_tokens(ids[first:])),
        offsets=tuple(offsets[first:]),
        logprobs=tuple(prompt_lp[first - 1 :]),
        prompt_tokens=first,
    )
    return ScoredGeneration(
        text=text,
        finish_reason=finish,
        prompt=prompt_score,
        output_tokens=tuple(tok.convert_ids_to_tokens(generated)),
        output_logprobs=tuple(out_lp),
    )


def hf_generate(
    model: Any,
    tok: Any,
    device: Any,
    pad_id: int,
    batches: Callable[[list[int]], list[list[int]]],
    prompts: Sequence[str],
    config: GenerationConfig,
    *,
    add_special_tokens: bool,
) -> list[Generation]:
    """Hugging Face ``generate`` (seeded sampling), batched by ``batches`` with left padding by
    ``pad_id`` (the tokenizer's own padding side and pad token are left as they were)."""
    from ragsense.models._kernel import import_torch

    torch = import_torch()
    results: list[Generation | None] = [None] * len(prompts)
    encoded = [list(tok(p, add_special_tokens=add_special_tokens)["input_ids"]) for p in prompts]
    for batch in batches([len(seq) + config.max_new_tokens for seq in encoded]):
        # Left padding built here, so the tokenizer's padding side and pad token are never touched.
        seqs = [encoded[i] for i in batch]
        width = max(len(seq) for seq in seqs)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, seq in enumerate(seqs):
            if seq:
                input_ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                attention_mask[row, width - len(seq) :] = 1
        enc = {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}
        kwargs: dict[str, Any] = {"max_new_tokens": config.max_new_tokens, "pad_token_id": pad_id}
        if config.stop:
            # Stop decoding as soon as a stop string appears instead of running to max_new_tokens;
            # the text is still cut at the stop string below, so results are the same, only sooner.
            kwargs.update(stop_strings=list(config.stop), tokenizer=tok)
        if config.temperature > 0:
            torch.manual_seed(config.seed)
            kwargs.update(do_sample=True, temperature=config.temperature)
        else:  # greedy goes through generate_greedy_one; kept for direct callers
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = model.generate(**enc, **kwargs)
        new = out[:, enc["input_ids"].shape[1] :]
        for row, i in enumerate(batch):
            results[i] = finished_generation(tok, [t for t in new[row].tolist() if t != pad_id], config)
    return [r for r in results if r is not None]
