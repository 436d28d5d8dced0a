"""Reading an echoed completion: log-probabilities of a prompt's tokens, re-aligned with its text.

:func:`parse_echo` turns ``choices[0]`` of a ``POST /completions`` answer sent with ``echo: true``,
``logprobs: 0`` and ``max_tokens: 0`` into a :class:`ContinuationScore`. Servers disagree on the
details, so the response is read defensively:

* A BOS token may be listed (vLLM: ``"<s>"``, logprob ``null``) or hidden (``ragsense serve``: the
  first text token then has a real logprob). Both give the same ``prompt_tokens`` as the local backend.
* vLLM computes ``text_offset`` as cumulative lengths of separately decoded tokens, which drift
  from the real text after a BOS or a character split across tokens (``"\\ufffd"``). The tokens are
  then re-aligned with the text; ``ragsense serve`` also sends exact ends (``text_end_offset``).
* vLLM's separate ``prompt_logprobs`` field is not used: ``echo`` carries the same numbers.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from typing import Any

from ragsense.errors import ModelCallError
from ragsense.models._interface import ContinuationScore

_RUN = re.compile("(\ufffd+)")


def _get(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ModelCallError(f"malformed server response: {where}.{key} is missing")
    value = obj[key]
    if not isinstance(value, kind):
        raise ModelCallError(f"malformed server response: {where}.{key} has type {type(value).__name__}")
    return value


def _from_starts(starts: list[int], limit: int) -> list[tuple[int, int]]:
    """Spans from start offsets alone: a token ends where the next later-starting token starts."""
    later = sorted(set(starts))
    ends = [later[k] if k < len(later) else limit for k in (bisect.bisect_right(later, s) for s in starts)]
    return [(s, max(s, min(e, limit))) for s, e in zip(starts, ends, strict=True)]


def _monotone(starts: list[int]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(starts))


def _consistent(text: str, tokens: list[str], starts: list[int]) -> bool:
    checked = 0
    for t, s in zip(tokens, starts, strict=True):
        if s >= len(text) or not t or "\ufffd" in t:
            continue
        if not text.startswith(t, s):
            return False
        checked += 1
    return checked > 0 and _monotone(starts)


def _match_group(text: str, c: int, group: list[str], nxt: str | None) -> list[tuple[int, int]] | None:
    """Place tokens holding parts of split characters (``"\\ufffd"``); a split char is shared."""
    pieces: list[tuple[bool, str, list[int]]] = []  # (is_run, text, owning tokens)
    for j, t in enumerate(group):
        for part in _RUN.split(t):
            if not part:
                continue
            run = part[0] == "\ufffd"
            if run and pieces and pieces[-1][0]:
                pieces[-1][2].append(j)  # the same character, continued by the next token
            else:
                pieces.append((run, part, [j]))
    pattern = "".join("([^\x00-\x7f]+?)" if run else f"({re.escape(s)})" for run, s, _ in pieces)
    if nxt and _RUN.split(nxt)[0]:
        pattern += f"(?= *{re.escape(_RUN.split(nxt)[0])})"
    m = re.compile(pattern).match(text, c)
    if m is None:
        return None
    spans = []
    for j in range(len(group)):
        mine = [k + 1 for k, piece in enumerate(pieces) if j in piece[2]]
        spans.append((m.start(mine[0]), m.end(mine[-1])) if mine else (c, c))
    return spans


def _align(text: str, tokens: list[str]) -> list[tuple[int, int]] | None:
    """Place decoded token strings on ``text`` left to right, or None when they do not fit."""
    spans: list[tuple[int, int]] = []
    c, i, n = 0, 0, len(tokens)
    while i < n:
        t = tokens[i]
        if c >= len(text):  # tokens generated after the echoed text
            spans.append((len(text), len(text)))
            i += 1
            continue
        if text.startswith(t, c):
            spans.append((c, c + len(t)))
            c, i = c + len(t), i + 1
            continue
        if "\ufffd" in t:
            j = i
            while j + 1 < n and tokens[j].endswith("\ufffd") and tokens[j + 1].startswith("\ufffd"):
                j += 1
            placed = _match_group(text, c, tokens[i : j + 1], tokens[j + 1] if j + 1 < n else None)
            if placed is None:
                return None
            spans.extend(placed)
            c, i = max(c, placed[-1][1]), j + 1
            continue
        k = c
        while k < len(text) and text[k] == " ":
            k += 1
        if t and k > c and text.startswith(t, k):  # a decoder dropped the token's leading space
            spans.append((c, k + len(t)))
            c, i = k + len(t), i + 1
        elif i == 0:  # a BOS (or other special token) that is not part of the text
            spans.append((0, 0))
            i += 1
        else:
            return None
    return spans if c >= len(text) else None


def _spans(
    text: str, tokens: list[str], starts: list[int] | None, ends: list[int] | None
) -> list[tuple[int, int]]:
    if starts is not None and ends is not None:
        if any(not 0 <= s <= e for s, e in zip(starts, ends, strict=True)):
            raise ModelCallError("malformed server response: text_offset / text_end_offset out of order")
        return list(zip(starts, ends, strict=True))
    if starts is not None and _consistent(text, tokens, starts):  # an empty token (a BOS) has no width
        return [
            (s, s) if not t else span
            for t, s, span in zip(tokens, starts, _from_starts(starts, len(text)), strict=True)
        ]
    aligned = _align(text, tokens)
    if aligned is not None:
        return aligned
    if starts and starts[0] == 0 and starts[-1] < len(text) and _monotone(starts):
        return _from_starts(starts, len(text))  # opaque token strings, real offsets (e.g. byte-level BPE)
    raise ModelCallError(
        "cannot map the server's tokens onto the text: text_offset does not match the prompt and the "
        "token strings do not spell it out"
    )


def parse_echo(prompt: str, continuation: str, choice: Any) -> ContinuationScore:
    """Turn ``choices[0]`` of an echoed completion into a :class:`ContinuationScore`.

    >>> choice = {"text": "Hi there", "logprobs": {"tokens": ["Hi", " there"],
    ...           "token_logprobs": [None, -1.5], "text_offset": [0, 2]}}
    >>> parse_echo("Hi", " there", choice).logprobs
    (-1.5,)
    """
    text, boundary = prompt + continuation, len(prompt)
    echoed = choice.get("text") if isinstance(choice, dict) else None
    if isinstance(echoed, str) and not echoed.startswith(text):
        raise ModelCallError("the server did not echo the prompt: does it support echo=true with logprobs?")
    lp = _get(choice, "logprobs", dict, "choices[0]")
    where = "choices[0].logprobs"
    tokens: list[Any] = _get(lp, "tokens", list, where)
    values: list[Any] = _get(lp, "token_logprobs", list, where)
    starts = lp.get("text_offset")
    ends = lp.get("text_end_offset")  # ragsense serve's exact token ends
    for name, seq, kinds in (
        ("tokens", tokens, (str,)),
        ("token_logprobs", values, (int, float, type(None))),
        ("text_offset", starts or [], (int,)),
        ("text_end_offset", ends or [], (int,)),
    ):
        if any(not isinstance(x, kinds) or isinstance(x, bool) for x in seq):
            raise ModelCallError(f"malformed server response: {where}.{name} has an entry of the wrong type")
        if seq and len(seq) != len(tokens):
            raise ModelCallError(f"malformed server response: {where}.{name} and tokens differ in length")
    if not tokens:
        raise ModelCallError("the server returned no prompt tokens: does it support echo=true with logprobs?")
    spans = _spans(text, tokens, starts or None, ends or None)
    # Tokens starting after the text were generated (servers that need max_tokens >= 1): ignored.
    limit = next((i for i, (s, _) in enumerate(spans) if s >= len(text)), len(spans))
    first = next((i for i in range(limit) if spans[i][1] > boundary), None)
    if first is None:
        raise ModelCallError("the server's echoed tokens end before the continuation starts")
    picked = range(first, limit)
    logprobs = []
    for i in picked:
        v = values[i]
        if v is None:
            msg = (
                f"the server returned no log-probability for continuation token {i}; is the prompt "
                "empty / does the model add a BOS?"
            )
            raise ValueError(msg) if i == 0 else ModelCallError(msg)
        if not math.isfinite(v):
            raise ModelCallError(f"the server returned a non-finite log-probability ({v}) for token {i}")
        logprobs.append(float(v))
    hidden_bos = values[0] is not None  # the first listed token was conditioned on an unlisted BOS
    return ContinuationScore(
        tokens=tuple(tokens[i] for i in picked),
        offsets=tuple((max(spans[i][0] - boundary, 0), spans[i][1] - boundary) for i in picked),
        logprobs=tuple(logprobs),
        prompt_tokens=first + int(hidden_bos),
        straddles_boundary=spans[first][0] < boundary,
    )
