"""Words of an answer, the ones ConSens scores, and their alignment to model tokens.

Pure Python: no model is loaded here. Typical use inside a metric::

    selection = content_words(answer, question)
    alignment = align_tokens_to_words(selection.words, score.offsets)  # offsets relative to answer
    kept_rows = [alignment[i] for i in selection.kept_indices]
    per_word = word_logprob_sums(score.logprobs, kept_rows, selection.kept)

Sentences of a context and atomic statements of an answer, for per-statement judging (VERA), come from
``split_sentences`` and ``split_statements``: fixed rules, offsets into the original text.
"""

from ragsense.text._align import align_tokens_to_words, word_logprob_sums
from ragsense.text._bindable import BindableSpan, bindable_spans, name_type
from ragsense.text._binding import (
    DEFAULT_MAX_VARIANTS,
    NO_NEGATION,
    BindingVariant,
    binding_variants,
    checkable_ranks,
)
from ragsense.text._closed_class import CLOSED_CLASS_WORDS, is_closed_class
from ragsense.text._content import ContentSelection, DropReason, Fallback, content_words
from ragsense.text._refusal import is_refusal
from ragsense.text._statements import Span, split_sentences, split_statements
from ragsense.text._support import ContextVocabulary, SentenceIndex, stated_in_context, unsupported_share
from ragsense.text._words import Word, normalize_word, split_words, word_texts

__all__ = [
    "CLOSED_CLASS_WORDS",
    "DEFAULT_MAX_VARIANTS",
    "NO_NEGATION",
    "BindableSpan",
    "BindingVariant",
    "ContentSelection",
    "ContextVocabulary",
    "DropReason",
    "Fallback",
    "SentenceIndex",
    "Span",
    "Word",
    "align_tokens_to_words",
    "bindable_spans",
    "binding_variants",
    "checkable_ranks",
    "content_words",
    "is_closed_class",
    "is_refusal",
    "name_type",
    "normalize_word",
    "split_sentences",
    "split_statements",
    "split_words",
    "stated_in_context",
    "unsupported_share",
    "word_logprob_sums",
    "word_texts",
]
