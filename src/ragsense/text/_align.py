"""Attributing sub-word tokens to words, and summing their log-probabilities per word."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from ragsense.text._words import Word


def align_tokens_to_words(words: Sequence[Word], token_offsets: Sequence[tuple[int, int]]) -> list[list[int]]:
    """For each word, the indices (ascending) of the tokens that make it up.

    ``words`` and ``token_offsets`` are character spans into the same string (HF fast tokenizers
    report offsets in Python ``str`` characters, so no byte conversion is needed). Rule: a token
    belongs to the first word its span overlaps, which is the word containing the token's first
    non-whitespace character whenever that character is a word character. Hence:

    * a leading space inside the span (``" the"``) is ignored;
    * a token that starts in word A and runs into word B (a merge such as ``"s,"`` or ``"U.S"``)
      belongs to A only;
    * a token that starts with punctuation and runs into a word belongs to that word: Llama 3 style
      tokenizers merge one leading punctuation character into a word (``"(bio"``), and leaving such
      a token out would leave the word with no token at all;
    * a token overlapping no word (spaces, punctuation, special tokens with empty spans) belongs to
      no word.

    Every token index appears in at most one word's list. Byte-level BPE splits a multi-byte
    character into several tokens reporting the same character span; each of them lands in the
    word holding that character.

    >>> from ragsense.text import split_words
    >>> words = split_words("Hi, naïve world")  # Hi  naïve  world
    >>> align_tokens_to_words(words, [(0, 2), (2, 3), (3, 6), (6, 9), (9, 15)])
    [[0], [2, 3], [4]]

    Raises :class:`ValueError` if the words are not sorted and disjoint, or an offset is negative
    or reversed.
    """
    for i, word in enumerate(words):
        if not 0 <= word.start < word.end:
            raise ValueError(
                f"word {i} ({word.text!r}) has an empty or negative span ({word.start}, {word.end})"
            )
        if i and words[i - 1].end > word.start:
            raise ValueError(
                f"words {i - 1} and {i} overlap or are out of order; pass split_words(...) output"
            )
    ends = [word.end for word in words]
    alignment: list[list[int]] = [[] for _ in words]
    for token_index, (start, end) in enumerate(token_offsets):
        if not 0 <= start <= end:
            raise ValueError(f"token {token_index} has an invalid character span ({start}, {end})")
        if start == end:
            continue  # special tokens (BOS, EOS) carry no characters
        # First word ending after the token's start: the only candidate for the first overlap.
        k = bisect.bisect_right(ends, start)
        if k < len(words) and words[k].start < end:
            alignment[k].append(token_index)
    return alignment


def word_logprob_sums(
    token_logprobs: Sequence[float],
    alignment: Sequence[Sequence[int]],
    words: Sequence[Word] | None = None,
) -> list[float]:
    """Each word's log-probability: the sum of its tokens' log-probabilities.

    ``alignment`` is the output of :func:`align_tokens_to_words` (or the rows of it for the kept
    words); pass ``words`` (the same rows) to have error messages name the word.

    Raises :class:`ValueError` if a word got no token, or a token index is out of range. A word gets
    no token only when something is off: a tokenizer merged it into a token that started in the
    previous word (a vocabulary entry spanning a word boundary, like ``"U.S"`` for the words "U" and
    "S"), the offsets describe a different string than the words (for instance offsets relative to
    prompt + answer, words relative to the answer alone), or the tokenizer reports empty spans.
    Scoring such a word as probability 1 would bias ConSens silently, hence the error.

    >>> word_logprob_sums([-0.5, -1.0, -0.25, -2.0], [[0], [2, 3]])
    [-0.5, -2.25]
    """
    if words is not None and len(words) != len(alignment):
        raise ValueError(f"{len(words)} words but {len(alignment)} alignment rows")
    sums: list[float] = []
    for i, token_indices in enumerate(alignment):
        name = f"word {i}" + (f" ({words[i].text!r})" if words is not None else "")
        if not token_indices:
            raise ValueError(
                f"{name} got no token: the token offsets do not cover it (wrong string, or a token "
                "merged across a word boundary)"
            )
        for t in token_indices:
            if not 0 <= t < len(token_logprobs):
                raise ValueError(
                    f"{name}: token index {t} is out of range for {len(token_logprobs)} log-probs"
                )
        sums.append(math.fsum(token_logprobs[t] for t in token_indices))
    return sums
