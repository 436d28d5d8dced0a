"""Vocabulary of the kinship benchmark: the built-in first names and the distractor sentences.

The paper starts from "two equally-long lists of names (one male and one female)". The built-in lists
hold 60 common English first names each, in a fixed order; the generator takes the first ``names`` of
each (:func:`name_lists`, which also checks user-supplied lists) and splits them into generations
(:func:`generation_size`). Answers are scored by string containment, so no built-in name is a substring
of another name or of a relation word (no "Ann" beside "Anna", no "Will" beside "William", no "Son").

Distractors are unrelated sentences drawn from templates whose slots are filled from small word
lists; none contains a person name or a relation word, so they can never answer a question.

>>> len(MALE_NAMES) == len(FEMALE_NAMES) == 60
True
>>> MALE_NAMES[:3], FEMALE_NAMES[:3]
(('Oliver', 'George', 'Arthur'), ('Amelia', 'Charlotte', 'Eleanor'))
>>> import random
>>> distractor_sentences(2, random.Random(0), forbidden=MALE_NAMES + FEMALE_NAMES)[0].endswith(".")
True
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import Final

from ragsense.errors import ParameterError

MALE_NAMES: Final[tuple[str, ...]] = (
    *("Oliver", "George", "Arthur", "Henry", "Thomas", "Samuel", "Edward", "Charles", "Frederick"),
    *("Albert", "Walter", "Harold", "Jacob", "Benjamin", "Richard", "Joseph", "Matthew", "Andrew"),
    *("Patrick", "Gregory", "Michael", "Stephen", "Timothy", "Vincent", "Lawrence", "Francis", "Hugo"),
    *("Felix", "Oscar", "Rupert", "Simon", "Peter", "Raymond", "Douglas", "Gordon", "Harvey", "Jasper"),
    *("Leonard", "Martin", "Nathan", "Nicholas", "Roger", "Russell", "Stanley", "Theodore", "Warren"),
    *("Wesley", "Dennis", "Howard", "Isaac", "Jerome", "Kenneth", "Malcolm", "Norman", "Percy"),
    *("Quentin", "Bernard", "Clifford", "Dominic", "Ernest"),
)

FEMALE_NAMES: Final[tuple[str, ...]] = (
    *("Amelia", "Charlotte", "Eleanor", "Margaret", "Elizabeth", "Catherine", "Harriet", "Beatrice"),
    *("Florence", "Dorothy", "Evelyn", "Grace", "Alice", "Clara", "Edith", "Frances", "Gwendolyn"),
    *("Hazel", "Irene", "Judith", "Lillian", "Mabel", "Phoebe", "Rosalind", "Sophia", "Theresa"),
    *("Ursula", "Violet", "Winifred", "Agnes", "Bridget", "Cecilia", "Daphne", "Esther", "Fiona"),
    *("Imogen", "Lucy", "Miriam", "Nancy", "Pamela", "Rachel", "Sarah", "Wendy", "Yvonne", "Abigail"),
    *("Barbara", "Caroline", "Deborah", "Emily", "Gloria", "Heather", "Isabel", "Natalie", "Rebecca"),
    *("Sylvia", "Tabitha", "Matilda", "Louisa", "Penelope", "Olivia"),
)

# Word lists shared by several templates. Place names are invented so that none is also a first name.
_VILLAGES = "Ashcombe Brackwater Coldharbour Dunholt Eastmere Fenwick Greyhaven Hollinby Kettleby Longmarsh"
_VILLAGES += " Millbrook Northcote"
_TOWNS = "Aldmoor Bexwell Carrick Dalby Elstow Fordham Garford Hensby Ilmer Kirkby Lydford Morwick"
_COLOURS = "grey white black brown speckled crested pale dusky spotted striped tawny blue"

# Each template has three slots; 8 templates give about 13,000 distinct sentences.
_TEMPLATES: Final[tuple[tuple[str, tuple[str, str, str]], ...]] = (
    (
        "The {} river {} flows into Lake {}.",
        (
            "slow wide cold shallow winding muddy clear narrow quiet swift broad deep",
            "Arlen Corvey Dunmere Eskett Ferrow Glaze Hallam Ibber Jorvale Kestle Lunn Merrow",
            "Avel Brenmoor Caddon Dorrick Elmere Fennick Gorrow Hetherby Islow Kennet Lomber Marrick",
        ),
    ),
    (
        "The village of {} is known for its {} {}.",
        (
            _VILLAGES,
            "copper wool glass cider pottery timber salt linen cheese honey lace slate",
            "mills markets kilns workshops quarries fairs harbours presses forges warehouses barns stalls",
        ),
    ),
    (
        "A {} {} nests on the cliffs of {}.",
        (
            _COLOURS,
            "heron gull tern plover curlew kestrel puffin wren lark owl finch cormorant",
            "Skerra Holmsey Varra Brannock Toller Orsay Mingary Fladda Sandray Eilor Kerrow Pabbay",
        ),
    ),
    (
        "The {} bridge at {} was rebuilt after the {} flood.",
        (
            "stone iron oak brick granite steel rope chalk marble cedar flint sandstone",
            _TOWNS,
            "spring summer autumn winter great early late sudden long third second first",
        ),
    ),
    (
        "The market in {} sells {} every {}.",
        (
            _TOWNS,
            "apples barley candles dyes fish flour hides onions pears nails spices turnips",
            "Monday Tuesday Wednesday Thursday Friday Saturday Sunday",
        ),
    ),
    (
        "The {} lighthouse on {} Point was painted {}.",
        (
            "old tall squat northern southern eastern western lonely ruined new stone small",
            "Carn Dellow Fairhead Gannet Hartle Kilbrey Mallin Nessick Ormond Pellow Quarry Ravel",
            "red white green yellow black grey orange blue cream crimson ochre teal",
        ),
    ),
    (
        "The {} road from {} to {} crosses the moor.",
        ("old new steep narrow muddy paved busy quiet winding straight long short", _VILLAGES, _TOWNS),
    ),
    (
        "A {} comet was seen over {} in the year {}.",
        (
            "bright faint green red silver pale sudden brief double blue golden dim",
            _VILLAGES,
            "1712 1719 1726 1733 1740 1747 1754 1761 1768 1775 1782 1789",
        ),
    ),
)


def distractor_capacity() -> int:
    """How many distinct distractor sentences the templates can produce (before any filtering).

    >>> distractor_capacity() > 10_000
    True
    """
    total = 0
    for _, slots in _TEMPLATES:
        a, b, c = (len(words.split()) for words in slots)
        total += a * b * c
    return total


def _sentence(index: int) -> str:
    # Decode a flat index into (template, slot words) so the whole space never has to be materialized.
    for template, slots in _TEMPLATES:
        lists = [words.split() for words in slots]
        size = len(lists[0]) * len(lists[1]) * len(lists[2])
        if index < size:
            i, rest = divmod(index, len(lists[1]) * len(lists[2]))
            j, k = divmod(rest, len(lists[2]))
            return template.format(lists[0][i], lists[1][j], lists[2][k])
        index -= size
    raise IndexError(index)


def distractor_sentences(count: int, rng: random.Random, *, forbidden: Iterable[str] = ()) -> list[str]:
    """``count`` distinct distractor sentences, in an order drawn from ``rng``.

    A sentence that contains any ``forbidden`` string as a whole word (case-insensitive) is skipped, so
    user-supplied names that happen to be template words still never appear. Raises ``ValueError`` when
    fewer than ``count`` sentences are available.

    >>> import random
    >>> distractor_sentences(3, random.Random(0)) == distractor_sentences(3, random.Random(0))
    True
    >>> any("Ashcombe" in s for s in distractor_sentences(500, random.Random(0), forbidden=["ashcombe"]))
    False
    """
    if count <= 0:
        return []
    words = sorted({w for w in forbidden if w}, key=len, reverse=True)
    pattern = (
        re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE) if words else None
    )
    order = list(range(distractor_capacity()))
    rng.shuffle(order)
    chosen: list[str] = []
    for index in order:
        text = _sentence(index)
        if pattern is None or pattern.search(text) is None:
            chosen.append(text)
            if len(chosen) == count:
                return chosen
    raise ValueError(f"only {len(chosen)} distractor sentences are available, {count} were asked for")


def name_lists(
    names: int, male_names: Sequence[str] | None, female_names: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The first ``names`` of each list: the built-in ones, or the user's (both, equally long, distinct).

    Raises :class:`~ragsense.errors.ParameterError` naming ``names``, ``male_names`` or ``female_names``.

    >>> name_lists(4, None, None)
    (['Oliver', 'George', 'Arthur', 'Henry'], ['Amelia', 'Charlotte', 'Eleanor', 'Margaret'])
    >>> name_lists(2, ["Al", "Bo", "Cy"], ["Di", "Eve", "Flo"])
    (['Al', 'Bo'], ['Di', 'Eve'])
    """
    if male_names is None and female_names is None:
        if names > len(MALE_NAMES):
            raise ParameterError(
                f"the built-in name lists hold {len(MALE_NAMES)} names each, {names} were asked for; "
                "pass male_names and female_names for more",
                parameter="names",
            )
        return list(MALE_NAMES[:names]), list(FEMALE_NAMES[:names])
    if male_names is None or female_names is None:
        missing = "male_names" if male_names is None else "female_names"
        raise ParameterError("give both male_names and female_names, or neither", parameter=missing)
    male, female = list(male_names), list(female_names)
    if len(male) != len(female):
        raise ParameterError(
            f"the name lists must be equally long: {len(male)} male names, {len(female)} female names",
            parameter="female_names",
        )
    seen: set[str] = set()
    for parameter, given in (("male_names", male), ("female_names", female)):
        for name in given:
            if not isinstance(name, str) or not name.strip():
                raise ParameterError(f"names must be non-empty strings, got {name!r}", parameter=parameter)
            if name.casefold() in seen:
                raise ParameterError(
                    f"duplicate name {name!r}: every person needs a distinct name", parameter=parameter
                )
            seen.add(name.casefold())
    if len(male) < names:
        raise ParameterError(
            f"{names} names per list were asked for, the lists hold {len(male)}", parameter="male_names"
        )
    return male[:names], female[:names]


def generation_size(names: int, generations: int) -> int:
    """Men (and women) per generation when each list of ``names`` is split into ``generations``.

    Raises :class:`~ragsense.errors.ParameterError` naming ``names`` or ``generations`` when the split
    is impossible: fewer than 4 names, fewer than 2 generations, an uneven split, or fewer than 2 men and
    2 women per generation (then some couple would have to be siblings).

    >>> generation_size(12, 3)
    4
    """
    if isinstance(names, bool) or not isinstance(names, int) or names < 4:
        raise ParameterError(
            f"must be an integer of at least 4 (names per list), got {names!r}", parameter="names"
        )
    if isinstance(generations, bool) or not isinstance(generations, int) or generations < 2:
        raise ParameterError(
            f"must be an integer of at least 2, got {generations!r}", parameter="generations"
        )
    if names % generations:
        raise ParameterError(
            f"names must be divisible by generations: {names} names cannot be split into "
            f"{generations} generations of equal size",
            parameter="names",
        )
    if names // generations < 2:
        raise ParameterError(
            "each generation needs at least 2 men and 2 women so that no couple are siblings; "
            f"{names} names over {generations} generations give {names // generations}",
            parameter="generations",
        )
    return names // generations
