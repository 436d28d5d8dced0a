"""Refusals: answers that decline to answer from the context ("The documents do not say ...").

A refusal is not an ungrounded answer: it states nothing the context could fail to support. A
likelihood score cannot see that (the context rarely makes "do not say" more likely), so refusals are
recognised by their wording, with fixed rules and no model, before any score is read.

The rules look for the two parts every refusal has: a reference to the source or to the speaker's
knowledge ("the documents", "the context", "I") and a statement that it holds no answer ("do not
say", "no information", "cannot answer"). A negation about the world ("Aspirin does not reduce the
risk") has no reference to the source and is not a refusal. An answer is a refusal when **every**
sentence of it is a refusal sentence or a short courtesy ("Sorry."): an answer that states a fact and
then says the rest is missing is scored as an answer.
"""

from __future__ import annotations

import re

from ragsense.text._statements import split_sentences

# The source an answer can say is silent. Determiners are optional so "according to context" and
# "in the passages provided" both count.
_SOURCE = (
    r"(?:the\s+|these\s+|this\s+|those\s+|your\s+|given\s+|provided\s+|available\s+|retrieved\s+|"
    r"above\s+|supplied\s+)*"
    r"(?:context|contexts|document|documents|docs|passage|passages|text|texts|source|sources|"
    r"article|articles|excerpt|excerpts|information|info|material|materials|records?|snippets?|"
    r"paragraphs?|abstracts?|knowledge\s+base|search\s+results?)"
)
_NEG = r"(?:do\s+not|does\s+not|did\s+not|don't|doesn't|didn't|don’t|doesn’t|didn’t|never|fails?\s+to)"
_TELL = (
    r"(?:say|says|state|states|mention|mentions|specify|specifies|contain|contains|provide|provides|"
    r"include|includes|give|gives|tell|tells|indicate|indicates|address|addresses|answer|answers|"
    r"cover|covers|discuss|discusses|describe|describes|list|lists|identify|identifies|"
    r"reveal|reveals|name|names|report|reports|offer|offers|disclose|discloses|have|has|hold|holds|"
    r"explain|explains|clarify|clarifies|note|notes|support|supports|make\s+clear|show|shows)"
)
_MISSING = (
    r"(?:not\s+(?:be\s+)?(?:mentioned|stated|specified|provided|given|included|contained|found|available|"
    r"addressed|covered|discussed|described|listed|present|known|disclosed|reported|answered|clear|"
    r"determinable|possible\s+to\s+(?:say|tell|determine|answer|know))|"
    r"silent|unclear|insufficient|inconclusive|missing|absent|lacking|unavailable)"
)
_SPEAKER_CANNOT = (
    r"\b(?:i|we)\s*(?:'m|’m|am|are|'re|’re)?\s*(?:do\s+not|don't|don’t|cannot|can't|can’t|can\s+not|"
    r"could\s+not|couldn't|couldn’t|am\s+unable\s+to|are\s+unable\s+to|unable\s+to|am\s+not\s+able\s+to|"
    r"was\s+unable\s+to|were\s+unable\s+to|have\s+no\s+way\s+to|did\s+not|didn't|didn’t)\s+"
    r"(?:know|find|answer|tell|determine|say|see|locate|identify|confirm|verify|provide|give|"
    r"infer|establish|work\s+out|figure\s+out)\b"
)

_PATTERNS = [
    # "The documents do not say ...", "the context doesn't mention ...", "the passage fails to state"
    rf"\b{_SOURCE}\s+(?:\w+\s+){{0,3}}?{_NEG}\s+(?:\w+\s+){{0,2}}?{_TELL}\b",
    # "... is not mentioned in the context", "is not stated in the documents", "not specified in the text"
    rf"\b{_MISSING}\s+(?:\w+\s+){{0,3}}?(?:in|by|from|within|anywhere\s+in)\s+{_SOURCE}\b",
    # "The context is silent on", "the documents are unclear about"
    rf"\b{_SOURCE}\s+(?:is|are|was|were|remains?)\s+(?:\w+\s+){{0,1}}?{_MISSING}\b",
    # "There is no information about ...", "no mention of", "no answer is given", "nothing in the text"
    r"\b(?:there\s+(?:is|are|was|were)\s+)?(?:no|not\s+enough|insufficient|nothing\s+in)\s+"
    r"(?:relevant\s+|specific\s+|such\s+|further\s+|clear\s+|direct\s+|explicit\s+)*"
    r"(?:information|info|mention|answer|details?|context|documents?|passages?|text|sources?)\b",
    # "Nothing in the passage says ...", "None of the documents answer this"
    rf"\bnothing\s+in\s+{_SOURCE}\b",
    rf"\b(?:none|neither)\s+of\s+{_SOURCE}\s+(?:\w+\s+){{0,2}}?{_TELL}\b",
    # "I don't know", "I cannot answer", "we are unable to determine"
    _SPEAKER_CANNOT,
    # "It cannot be determined from the context", "impossible to say": passive or impersonal only, so
    # "He could not find work" (a fact about the world) is not a refusal.
    r"\b(?:cannot|can't|can’t|can\s+not|could\s+not|couldn't|couldn’t)\s+be\s+"
    r"(?:answered|determined|told|said|known|inferred|found|established|confirmed|verified)\b",
    r"\b(?:impossible|not\s+possible)\s+to\s+(?:answer|determine|tell|say|know|infer|establish|confirm|verify)\b",
    # "Unknown.", "Not stated.", "Not mentioned.", "Unanswerable.", "N/A", "No answer."
    r"^\s*(?:unknown|unanswerable|not\s+(?:stated|mentioned|specified|given|provided|available|known|"
    r"found|answerable|enough\s+information)|n/?a|none\s+given|no\s+answer|no\s+idea|"
    r"insufficient\s+(?:information|context|data|evidence))\s*[.!]?\s*$",
    # "The answer is not in the context", "this is not covered by the documents"
    rf"\b(?:answer|this|that|it|information)\s+(?:is|was)\s+not\s+(?:\w+\s+){{0,2}}?(?:in|within|part\s+of|"
    rf"covered\s+by|found\s+in|given\s+in|provided\s+in)\s+{_SOURCE}\b",
    # "Based on the context, it is unclear ...", "The question cannot be answered"
    r"\b(?:question|query)\s+(?:cannot|can't|can’t|can\s+not|could\s+not|is\s+not\s+able\s+to)\s+be\s+"
    r"(?:answered|determined|resolved)\b",
    r"\bit\s+(?:is|remains)\s+(?:unclear|unknown|not\s+clear|not\s+known|not\s+stated|not\s+specified)\b",
    # "Beyond the scope of the documents", "outside the provided context"
    rf"\b(?:beyond|outside(?:\s+of)?)\s+(?:the\s+scope\s+of\s+)?{_SOURCE}\b",
]
_REFUSAL = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)

# Sentences that carry no claim and may stand beside a refusal: "Sorry.", "Unfortunately,".
_COURTESY = re.compile(
    r"^\s*(?:sorry|i'?m\s+sorry|i’m\s+sorry|apologies|unfortunately|regrettably|thank\s+you|thanks|"
    r"i\s+apologi[sz]e|please\s+(?:provide|share|give)\b.*|could\s+you\s+(?:provide|share|clarify)\b.*|"
    r"can\s+you\s+(?:provide|share|clarify)\b.*|you\s+may\s+(?:want|need)\s+to\b.*|"
    r"(?:you\s+)?(?:might|could)\s+(?:try|check|consult)\b.*|i\s+(?:would\s+)?(?:suggest|recommend)\b.*)"
    r"\s*[.!,]?\s*$",
    re.IGNORECASE,
)


def is_refusal(answer: str) -> bool:
    """Whether ``answer`` declines to answer from its context: every sentence is a refusal or a courtesy.

    >>> is_refusal("The documents do not say what colours the lighthouse is painted.")
    True
    >>> is_refusal("I'm sorry, but I can't find that in the provided context.")
    True
    >>> is_refusal("Not mentioned.")
    True
    >>> is_refusal("Aspirin does not reduce the risk of stroke in this cohort.")
    False
    >>> is_refusal("The lighthouse is white. The documents do not say when it was built.")
    False
    """
    sentences = [s.text for s in split_sentences(answer)] or [answer]
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        return False
    found = False
    for sentence in sentences:
        if _REFUSAL.search(sentence):
            found = True
        elif not _COURTESY.match(sentence):
            return False
    return found
