"""Token-to-word alignment and per-word log-probability sums."""

from __future__ import annotations

import doctest
import os
from typing import Any

import pytest

import ragsense.text._align as align_module
from ragsense.text import Word, align_tokens_to_words, content_words, split_words, word_logprob_sums


def spans_of(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Offsets of consecutive ``pieces`` that concatenate to ``text``."""
    assert "".join(pieces) == text
    offsets, pos = [], 0
    for piece in pieces:
        offsets.append((pos, pos + len(piece)))
        pos += len(piece)
    return offsets


def test_leading_space_and_punctuation() -> None:
    text = "Hi, the end."
    words = split_words(text)
    offsets = spans_of(text, ["Hi", ",", " the", " end", "."])
    assert align_tokens_to_words(words, offsets) == [[0], [2], [3]]


def test_subword_tokens_and_special_tokens() -> None:
    text = "pneumonia cases"
    words = split_words(text)
    # BOS and EOS carry empty spans and belong to no word.
    offsets = [(0, 0), *spans_of(text, ["pne", "um", "onia", " cases"]), (15, 15)]
    assert align_tokens_to_words(words, offsets) == [[1, 2, 3], [4]]


def test_token_running_into_next_word_belongs_to_first_only() -> None:
    text = "dogs, cats"
    words = split_words(text)
    # A merge "s," starts in "dogs"; a merge "U.S"-like token spanning "s, c" also.
    assert align_tokens_to_words(words, spans_of(text, ["dog", "s,", " cats"])) == [[0, 1], [2]]
    assert align_tokens_to_words(words, spans_of(text, ["dog", "s, c", "ats"])) == [[0, 1], [2]]


def test_token_starting_with_punctuation_goes_to_the_word_it_runs_into() -> None:
    # Llama 3's pre-tokenizer merges one leading punctuation character into a word: "(bio", " “the".
    text = "a (biologist) “the”"
    words = split_words(text)
    offsets = spans_of(text, ["a", " (bi", "ologist", ")", " “the", "”"])
    assert align_tokens_to_words(words, offsets) == [[0], [1, 2], [4]]


def test_byte_pieces_sharing_offsets_are_each_counted_once() -> None:
    # Byte-level BPE: "東" is 3 bytes split over tokens with overlapping char spans.
    text = "Zürich 東京"
    words = split_words(text)
    offsets = [(0, 1), (1, 2), (2, 6), (6, 8), (7, 8), (7, 8), (8, 9), (8, 9)]
    alignment = align_tokens_to_words(words, offsets)
    assert alignment == [[0, 1, 2], [3, 4, 5, 6, 7]]


def test_tokens_in_any_order() -> None:
    words = split_words("ab cd")
    assert align_tokens_to_words(words, [(3, 5), (0, 2)]) == [[1], [0]]


def test_no_words_or_no_tokens() -> None:
    assert align_tokens_to_words([], [(0, 3)]) == []
    assert align_tokens_to_words(split_words("ab cd"), []) == [[], []]


def test_offsets_outside_text_belong_to_no_word() -> None:
    words = split_words("ab")
    assert align_tokens_to_words(words, [(0, 2), (2, 9), (50, 60)]) == [[0]]


@pytest.mark.parametrize("offsets", [[(3, 2)], [(-1, 2)]])
def test_invalid_offsets(offsets: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError, match="invalid character span"):
        align_tokens_to_words(split_words("abc"), offsets)


@pytest.mark.parametrize(
    "words",
    [
        [Word("cd", 3, 5), Word("ab", 0, 2)],
        [Word("abc", 0, 3), Word("cd", 2, 4)],
        [Word("", 1, 1)],
    ],
)
def test_invalid_words(words: list[Word]) -> None:
    with pytest.raises(ValueError, match="word"):
        align_tokens_to_words(words, [(0, 1)])


def test_word_logprob_sums() -> None:
    text = "Hi, naïve world"
    words = split_words(text)
    alignment = align_tokens_to_words(words, spans_of(text, ["Hi", ",", " na", "ïve", " world"]))
    sums = word_logprob_sums([-1.0, -9.0, -0.5, -0.25, -2.0], alignment, words)
    assert sums == [-1.0, -0.75, -2.0]  # the comma's -9.0 is in no word


def test_word_logprob_sums_raises_for_word_without_token() -> None:
    # "U.S" as one vocabulary entry: it starts in "U", so "S" gets nothing.
    text = "U.S. law"
    words = split_words(text)
    assert [w.text for w in words] == ["U", "S", "law"]
    alignment = align_tokens_to_words(words, spans_of(text, ["U.S", ".", " law"]))
    assert alignment == [[0], [], [2]]
    with pytest.raises(ValueError, match=r"word 1 \('S'\) got no token"):
        word_logprob_sums([-1.0, -2.0, -3.0], alignment, words)
    # Only the rows that are scored matter.
    assert word_logprob_sums([-1.0, -2.0, -3.0], [alignment[0], alignment[2]]) == [-1.0, -3.0]


def test_word_logprob_sums_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="out of range"):
        word_logprob_sums([-1.0], [[0, 1]])
    with pytest.raises(ValueError, match="2 words but 1 alignment rows"):
        word_logprob_sums([-1.0], [[0]], [Word("a", 0, 1), Word("b", 2, 3)])


def test_doctests() -> None:
    result = doctest.testmod(align_module)
    assert result.attempted > 0
    assert result.failed == 0


# --- The real SmolLM2 tokenizer (tokenizer only, no model) -----------------------------------------


@pytest.fixture(scope="module")
def smol_tokenizer() -> Any:
    """The bundled SmolLM2's own tokenizer (the converted copy in the cache; converted on first use), so
    these tests run on every machine that has the test extras, CI included."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    transformers = pytest.importorskip("transformers")
    from ragsense.models._bundled import converted_path

    return transformers.AutoTokenizer.from_pretrained(str(converted_path("smollm2-135m")))


TRICKY = [
    "1,234.5 mg",
    "COVID-19 long-term",
    "Baker's don't O’Neill",
    "Zürich naïve 東京 café",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    " pneumonoultramicroscopicsilicovolcanoconiosis, again.",
    "Hello 🤗 world — “quoted” 𝔘nicode (biologist) e-mail...",
    " David Baker is a biochemist and computational biologist.",
    "Straße\n\nnai\u0308ve  3.5%",
]


@pytest.mark.parametrize("text", TRICKY)
def test_smollm2_alignment_covers_each_word_exactly(smol_tokenizer: Any, text: str) -> None:
    encoding = smol_tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
    offsets = [tuple(o) for o in encoding["offset_mapping"]]
    words = split_words(text)
    assert words
    alignment = align_tokens_to_words(words, offsets)

    seen: list[int] = [t for row in alignment for t in row]
    assert len(seen) == len(set(seen)), "a token was attributed to two words"
    for word, row in zip(words, alignment, strict=True):
        assert row, f"{word.text!r} got no token"
        # The characters the word's tokens cover, leading whitespace aside, are exactly the word's.
        covered = {
            pos for t in row for pos in range(*offsets[t]) if not (text[pos].isspace() and pos < word.start)
        }
        assert covered == set(range(word.start, word.end)), (word, [offsets[t] for t in row])
    # Every unattributed token holds only spaces and non-word characters (or nothing).
    word_chars = {pos for w in words for pos in range(w.start, w.end)}
    for t in set(range(len(offsets))) - set(seen):
        assert not word_chars.intersection(range(*offsets[t])), (t, offsets[t])


def test_smollm2_long_word_is_many_tokens(smol_tokenizer: Any) -> None:
    text = "pneumonoultramicroscopicsilicovolcanoconiosis"
    offsets = smol_tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    alignment = align_tokens_to_words(split_words(text), offsets)
    assert len(alignment) == 1
    assert len(alignment[0]) == len(offsets) > 5


def test_smollm2_multibyte_characters_split_into_several_tokens(smol_tokenizer: Any) -> None:
    # Guards the premise of the byte-piece test above: the real tokenizer does this.
    text = "東京"
    offsets = [tuple(o) for o in smol_tokenizer(text, return_offsets_mapping=True)["offset_mapping"]]
    assert len(offsets) > len(text)
    assert align_tokens_to_words(split_words(text), offsets) == [list(range(len(offsets)))]


def test_smollm2_table_1_pipeline(smol_tokenizer: Any) -> None:
    question = "What is David Baker known for?"
    answer = " David Baker is a biochemist and computational biologist."
    selection = content_words(answer, question)
    offsets = smol_tokenizer(answer, return_offsets_mapping=True)["offset_mapping"]
    alignment = align_tokens_to_words(selection.words, offsets)
    rows = [alignment[i] for i in selection.kept_indices]
    logprobs = [-float(i + 1) for i in range(len(offsets))]
    sums = word_logprob_sums(logprobs, rows, selection.kept)
    assert len(sums) == 3
    for word, row, total in zip(selection.kept, rows, sums, strict=True):
        assert "".join(answer[slice(*offsets[t])] for t in row).strip() == word.text
        assert total == sum(logprobs[t] for t in row)
