"""English closed-class (function) words, which ConSens leaves out of the perplexity.

Function words are about equally predictable with and without the context, so scoring them only
dilutes the contrast the metric measures (ConSens paper, section 2). The list errs on the side of
keeping a word when it can carry information an answer may be grounded on:

* negation stays OUT of the list ("not", "no", "never", "none", "nothing", "neither", "nor",
  "without", and negated auxiliaries such as "don't", "isn't", "cannot"): "X is not Y" and "X is Y"
  differ exactly in that word, so it is where a grounded and an ungrounded answer part ways;
* numerals stay OUT ("one", "two", "first", "1,000"): quantities are facts to be grounded;
* lexical verbs, adjectives and adverbs that merely look functional ("also", "very", "only",
  "just", "known") stay OUT: the paper names pronouns, determiners and conjunctions, and content
  words that are easy to predict are still evidence of use of the context.
"""

from __future__ import annotations

from ragsense.text._words import normalize_word

# Personal pronouns, subject and object forms.
_PERSONAL = {"i", "me", "you", "he", "him", "she", "her", "it", "we", "us", "they", "them", "thee", "thou"}

# Possessive determiners and pronouns, including the possessives of indefinite pronouns.
_POSSESSIVE = {
    "my", "mine", "your", "yours", "his", "hers", "its", "our", "ours", "their", "theirs", "thy",
    "one's", "someone's", "somebody's", "anyone's", "anybody's", "everyone's", "everybody's",
    "other's", "another's",
}  # fmt: skip

# Reflexive pronouns.
_REFLEXIVE = {
    "myself", "yourself", "yourselves", "himself", "herself", "itself", "ourselves",
    "themselves", "themself", "oneself",
}  # fmt: skip

# Demonstratives (determiners and pronouns) and the pro-adverbs "here"/"there" (existential "there").
_DEMONSTRATIVE = {"this", "that", "these", "those", "here", "there"}

# Interrogative and relative pronouns, determiners and adverbs ("when" and "where" are also
# subordinating conjunctions; listing them here once is enough).
_WH = {
    "who", "whom", "whose", "which", "what", "when", "where", "why", "how",
    "whoever", "whomever", "whichever", "whatever", "whenever", "wherever", "however",
    "whereby", "wherein", "whereof", "whence",
}  # fmt: skip

# Indefinite pronouns and pro-adverbs, minus the negative ones (see module docstring).
_INDEFINITE = {
    "someone", "somebody", "something", "somewhere",
    "anyone", "anybody", "anything", "anywhere",
    "everyone", "everybody", "everything", "everywhere",
    "others",
}  # fmt: skip

# Articles and other pure determiners.
_ARTICLES = {"a", "an", "the"}

# Quantifier determiners. "no", "none" and "neither" are negation and stay out; numerals stay out.
_QUANTIFIERS = {
    "some", "any", "each", "every", "all", "both", "either", "few", "fewer", "many", "much",
    "more", "most", "less", "least", "several", "such", "enough", "other", "another",
}  # fmt: skip

# Coordinating conjunctions ("for" and "so" are listed with prepositions and conjunctions below;
# "nor" is negation and stays out).
_COORDINATING = {"and", "but", "or", "yet", "so", "plus"}

# Subordinating conjunctions (the ones that are not also prepositions or wh-words).
_SUBORDINATING = {
    "although", "though", "because", "if", "unless", "whether", "while", "whilst", "whereas",
    "once", "than", "lest", "whereupon", "albeit",
}  # fmt: skip

# Prepositions, single-word, including the multi-purpose ones ("to" is also the infinitive marker,
# "as", "after", "before", "since", "until" also conjunctions). "without", "except" and "excluding"
# stay out: like negation, they flip what the rest of the answer asserts.
_PREPOSITIONS = {
    "aboard", "about", "above", "across", "after", "against", "along", "alongside", "amid",
    "amidst", "among", "amongst", "around", "as", "at", "atop", "before", "behind", "below",
    "beneath", "beside", "besides", "between", "beyond", "by", "circa", "concerning", "despite",
    "down", "during", "for", "from", "in", "inside", "into", "like", "near", "of", "off",
    "on", "onto", "out", "outside", "over", "past", "per", "regarding", "round", "since", "through",
    "throughout", "thru", "till", "to", "toward", "towards", "under", "underneath", "unlike",
    "until", "unto", "up", "upon", "versus", "via", "vs", "with", "within", "notwithstanding",
    "including",
}  # fmt: skip

# Primary auxiliaries ("be", "have", "do") in their auxiliary inflections. Their use as main verbs
# ("has a dog") is still highly predictable. "doing" and "done" are left out: "do" has no auxiliary
# use in those forms, so they are always the main verb ("doing research").
_AUXILIARIES = {
    "be", "is", "are", "was", "were", "been", "being", "am",
    "have", "has", "had", "having",
    "do", "does", "did",
}  # fmt: skip

# Modal verbs (affirmative forms only; "can't", "won't" ... negate and stay out).
_MODALS = {"will", "would", "shall", "should", "can", "could", "may", "might", "must", "ought"}

# Contractions of a pronoun (or wh-word, "there", "here", "that") with an auxiliary or modal, and of
# a modal with "have". Negated contractions ("don't", "isn't", "won't") are not here: they negate.
_CONTRACTIONS = {
    "i'm", "i've", "i'd", "i'll",
    "you're", "you've", "you'd", "you'll",
    "he's", "he'd", "he'll", "she's", "she'd", "she'll",
    "it's", "it'd", "it'll",
    "we're", "we've", "we'd", "we'll",
    "they're", "they've", "they'd", "they'll",
    "that's", "that'd", "that'll", "this's",
    "there's", "there're", "there'd", "there'll", "there've", "here's",
    "who's", "who're", "who'd", "who'll", "who've",
    "what's", "what're", "what'd", "what'll", "what've",
    "where's", "where'd", "when's", "why's", "how's", "how'd",
    "something's", "everything's",
    "let's", "y'all",
    "could've", "would've", "should've", "might've", "must've", "may've", "will've",
}  # fmt: skip

CLOSED_CLASS_WORDS: frozenset[str] = frozenset().union(
    _PERSONAL,
    _POSSESSIVE,
    _REFLEXIVE,
    _DEMONSTRATIVE,
    _WH,
    _INDEFINITE,
    _ARTICLES,
    _QUANTIFIERS,
    _COORDINATING,
    _SUBORDINATING,
    _PREPOSITIONS,
    _AUXILIARIES,
    _MODALS,
    _CONTRACTIONS,
)
"""Lowercase English closed-class words (apostrophes as ``'``). See the module docstring for what is
deliberately left out: negation, numerals, and content words that look functional."""


def is_closed_class(word: str) -> bool:
    """Whether ``word`` is an English closed-class word (case-insensitive, ``’`` read as ``'``).

    One exception to case-insensitivity: a word of two or more letters written all in capitals is
    read as an acronym and is never closed-class ("US", "WHO", "IT" are names, not "us", "who", "it").

    >>> [is_closed_class(w) for w in ["The", "They’re", "not", "biologist", "US"]]
    [True, True, False, False, False]
    """
    if len(word) > 1 and word.isupper():
        return False
    return normalize_word(word) in CLOSED_CLASS_WORDS
