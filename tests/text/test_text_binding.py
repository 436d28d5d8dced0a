"""The binding check's text side: which spans can be rebound and the variants that rebind them, per
kind (digits, number words, ordinals, dates, names, amounts, negation), with no model."""

from __future__ import annotations

import random

import pytest

from ragsense.text import bindable_spans, binding_variants, checkable_ranks, name_type


def _texts(answer: str, context: str, limit: int = 50) -> list[str]:
    return [v.text for v in binding_variants(answer, [context], limit=limit)]


@pytest.mark.parametrize(
    ("kind", "context", "answer", "expected"),
    [
        (
            "digits",
            "The company has 340 employees in Europe and 85 in Asia.",
            "The company has 340 employees in Europe.",
            "The company has 85 employees in Europe.",
        ),
        (
            "number words",
            "The board has nine members, two of whom are elected by employees.",
            "The board has nine members.",
            "The board has two members.",
        ),
        (
            "ordinals",
            "Sick pay is paid from the fourth consecutive day. The second office is in Lisbon.",
            "Sick pay is paid from the second consecutive day.",
            "Sick pay is paid from the fourth consecutive day.",
        ),
        (
            "years",
            "Work on the bridge began in 1931 and it was completed in 1937.",
            "The bridge was completed in 1931.",
            "The bridge was completed in 1937.",
        ),
        (
            "months",
            "The fiscal year starts in April and ends in March.",
            "The fiscal year starts in March.",
            "The fiscal year starts in April.",
        ),
        (
            "weekdays",
            "The team meets every Tuesday at ten. Reports are due every Friday.",
            "The team meets every Friday at ten.",
            "The team meets every Tuesday at ten.",
        ),
        (
            "names",
            "Harbour Bank is audited by Kestrel Partners. Its legal adviser is Linden Group.",
            "Harbour Bank is audited by Linden Group.",
            "Harbour Bank is audited by Kestrel Partners.",
        ),
        (
            "amounts",
            "The company raised $12 million in its first round and $40 million in its second round.",
            "The company raised $40 million in its first round.",
            "The company raised $12 million in its first round.",
        ),
        (
            "negation (added)",
            "The museum is closed on Mondays.",
            "The museum is closed on Mondays.",
            "The museum is not closed on Mondays.",
        ),
        (
            "negation (removed)",
            "Employees are not allowed to work more than ten hours a day.",
            "Employees are not allowed to work more than ten hours a day.",
            "Employees are allowed to work more than ten hours a day.",
        ),
    ],
)
def test_each_kind_gets_its_rebinding(kind: str, context: str, answer: str, expected: str) -> None:
    assert expected in _texts(answer, context), kind


def test_swaps_come_first_and_keep_roles_apart() -> None:
    context = "Northwind was founded by Maria Lopez and Tom Becker in 2009. Its rival was founded in 2011."
    variants = binding_variants("Maria Lopez and Tom Becker founded Northwind in 2009.", [context])
    assert variants[0].kind == "swap"
    assert variants[0].text == "Tom Becker and Maria Lopez founded Northwind in 2009."


def test_digits_stay_digits_and_words_stay_words() -> None:
    context = "There are four moons and 2 rings."
    assert "The planet has two moons." in _texts("The planet has four moons.", context)
    assert "The planet has 4 rings." in _texts("The planet has 2 rings.", context)
    assert "She was fourth." in _texts("She was second.", "She came 4th, then second.")


def test_a_sentence_start_keeps_its_capital() -> None:
    assert "Tuesday is the day." in _texts("Friday is the day.", "Tuesday is busy, Friday is quiet.")


def test_unstated_spans_are_left_to_lexical_support() -> None:
    # "Paris" is not in the context: the support score already counts it; nothing to rebind.
    assert binding_variants("They built it in Paris.", ["They built it in Rome or Milan."]) == []


def test_same_entity_is_not_a_substitute() -> None:
    context = "Wolfgang Amadeus Mozart was born in Salzburg. Mozart moved to Vienna."
    texts = _texts("Wolfgang Amadeus Mozart was born in Salzburg.", context)
    assert "Mozart was born in Salzburg." not in texts
    assert "Wolfgang Amadeus Mozart was born in Vienna." in texts


def test_sentence_initial_capitals_are_not_names() -> None:
    spans = bindable_spans("The report was late. Yesterday it came.", ["The report came yesterday."])
    assert spans == []


def test_spans_report_kind_value_and_unit() -> None:
    [span] = bindable_spans("It costs 5 million dollars.")
    assert (span.kind, span.value, span.unit) == ("number", "5", "million")
    assert [(s.kind, s.value) for s in bindable_spans("It is 1,000 or 2.50.")] == [
        ("number", "1000"),
        ("number", "2.5"),
    ]


def test_the_stretch_covers_the_changed_sentences_only() -> None:
    answer = "The firm is old. It opened in 2004. It is large."
    [v] = [x for x in binding_variants(answer, ["It opened in 1998, not 2004."]) if x.kind == "substitute"]
    assert answer[v.start : v.cut] == " It opened in 2004."
    assert v.text[v.start : v.variant_cut] == " It opened in 1998."
    assert v.text[: v.start] == answer[: v.start] and v.text[v.variant_cut :] == answer[v.cut :]


def test_limit_bounds_the_variants_and_keeps_their_order() -> None:
    context = "Ann met Bob in 1990, Carl in 1991, Dora in 1992, Ed in 1993 and Fay in 1994."
    answer = "Ann met Bob in 1990 and Carl in 1991."
    many = binding_variants(answer, [context], limit=100)
    assert len(many) > 8
    assert binding_variants(answer, [context], limit=8) == many[:8]
    assert binding_variants(answer, [context], limit=0) == []


def test_random_texts_never_break_the_variant_builder() -> None:
    rng = random.Random(7)
    alphabet = ["Ann", "met", "in", "1990", "two", "second", "May", "not", "is", ".", ",", "$5", "Bob", "the"]
    for _ in range(300):
        answer = " ".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        context = " ".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        for v in binding_variants(answer, [context], limit=16):
            assert v.text != answer
            assert 0 <= v.start <= v.cut <= len(answer)
            assert v.text[: v.start] == answer[: v.start]
            assert v.text[v.variant_cut :] == answer[v.cut :]


# ---- amendment 2: which rebindings have something to check (ragsense.text.checkable_ranks)


def _checked(answer: str, context: str) -> list[tuple[str, str, str]]:
    variants = binding_variants(answer, [context], limit=50)
    return [
        (variants[r].kind, variants[r].original, variants[r].replacement)
        for r in checkable_ranks(answer, [context], variants)
    ]


def test_a_bare_answer_has_no_relation_to_check() -> None:
    context = "Ana Ruiz founded the firm in 2004. Ben Cole joined in 1998."
    assert binding_variants("Ana Ruiz.", [context])  # rebindings exist...
    assert _checked("Ana Ruiz.", context) == []  # ...but nothing in the answer binds the name
    assert _checked("2004", context) == []
    assert ("substitute", "2004", "1998") in _checked("Ana Ruiz founded the firm in 2004.", context)


def test_names_are_rebound_within_their_type() -> None:
    context = "The French team beat Oslo University. Ana Ruiz coached Oslo University against Ben Cole."
    assert [name_type(s) for s in bindable_spans(context) if s.kind == "name"][:3] == [
        "demonym",
        "organisation",
        "name",
    ]
    checked = _checked("Ana Ruiz coached the team.", context)
    assert ("substitute", "Ana Ruiz", "Ben Cole") in checked
    assert all(replacement not in ("French", "Oslo University") for _, _, replacement in checked)


def test_two_mentions_of_one_entity_are_not_swapped() -> None:
    context = "Michael Phelps won in Beijing. Phelps swam the relay in Athens."
    answer = "Michael Phelps won in Beijing and Phelps swam the relay in Athens."
    swaps = [(o, r) for kind, o, r in _checked(answer, context) if kind == "swap"]
    assert ("Michael Phelps", "Beijing") in swaps  # other swaps stay
    assert ("Michael Phelps", "Phelps") not in swaps
    assert ("swap", "Michael Phelps", "Phelps") in [
        (v.kind, v.original, v.replacement) for v in binding_variants(answer, [context], limit=50)
    ]


def test_negations_and_numbers_in_a_relation_are_kept() -> None:
    context = "The bridge was not built in 1999. It opened in 2001."
    answer = "The bridge was built in 2001."
    kinds = {kind for kind, _, _ in _checked(answer, context)}
    assert kinds == {"negation", "substitute"}


def test_checkable_ranks_only_drop() -> None:
    rng = random.Random(11)
    alphabet = ["Ann", "met", "in", "1990", "two", "second", "May", "not", "is", ".", "French", "Bob", "Club"]
    for _ in range(200):
        answer = " ".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        context = " ".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        variants = binding_variants(answer, [context], limit=16)
        ranks = checkable_ranks(answer, [context], variants)
        assert ranks == sorted(set(ranks)) and all(0 <= r < len(variants) for r in ranks)
