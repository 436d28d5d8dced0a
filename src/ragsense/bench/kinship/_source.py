"""Synthetic family trees as a RAG knowledge source: documents, queries and experimental conditions.

Follows "Knowledge Source and Query Generation" of the multi-document kinship benchmark. Two equally
long name lists are split into generations; in each generation men and women are paired into couples,
then re-paired into brother-sister siblings so that no couple are siblings. Couple ``i`` of generation
``n`` are the parents of sibling pair ``i`` of generation ``n + 1``. Every relation that follows
(spouse, sibling, parent, child, grandparent, grandchild, uncle/aunt, nephew/niece, and from four
generations great-grandparent and great-grandchild) is written in both directions as one document
"[name1] is the [relation] of [name2]." with the relation word gendered by name1.

One query "Who is the [relation] of [name2]?" per relation word and person lists every correct answer.
The control store holds every document; an experimental store leaves out one relation (see
:meth:`KinshipSource.experimental`), so its questions need more than one document.

>>> source = generate_kinship_source(names=6, generations=3, seed=0)
>>> len(source.people), len(source.documents), len(source.queries)
(12, 120, 104)
>>> condition = source.experimental("grandfather")
>>> {q.hops for q in condition.queries}
{2}
"""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final, Literal, TypedDict

from ragsense.bench.kinship._evidence import EvidenceChain, EvidenceGraph, hops
from ragsense.bench.kinship._names import distractor_sentences, generation_size, name_lists
from ragsense.data import write_output
from ragsense.errors import ParameterError

Gender = Literal["male", "female"]
HoldOut = Literal["relation", "fact"]

RELATION_KINDS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "spouse": ("husband", "wife"),
        "sibling": ("brother", "sister"),
        "parent": ("father", "mother"),
        "child": ("son", "daughter"),
        "grandparent": ("grandfather", "grandmother"),
        "grandchild": ("grandson", "granddaughter"),
        "uncle_aunt": ("uncle", "aunt"),
        "nephew_niece": ("nephew", "niece"),
        "great_grandparent": ("great-grandfather", "great-grandmother"),
        "great_grandchild": ("great-grandson", "great-granddaughter"),
    }
)
"""Relation kind -> (word when the subject is male, word when female), in document order."""

RELATION_WORDS: Final[tuple[str, ...]] = tuple(word for pair in RELATION_KINDS.values() for word in pair)
WORD_KIND: Final[Mapping[str, str]] = MappingProxyType(
    {word: kind for kind, pair in RELATION_KINDS.items() for word in pair}
)
_INVERSES = (
    *(("spouse", "spouse"), ("sibling", "sibling"), ("parent", "child"), ("grandparent", "grandchild")),
    *(("uncle_aunt", "nephew_niece"), ("great_grandparent", "great_grandchild")),
)
INVERSE_KIND: Final[Mapping[str, str]] = MappingProxyType({**dict(_INVERSES), **{b: a for a, b in _INVERSES}})
_WORD_ORDER: Final = {word: i for i, word in enumerate(RELATION_WORDS)}
_DOC_COLUMNS: Final = ["id", "text", "relation", "subject", "object"]
_QUERY_COLUMNS: Final = ["id", "query", "relation", "person", "answers"]


def relation_word(kind: str, gender: Gender) -> str:
    """The word for ``kind`` when the subject has ``gender``.

    >>> relation_word("uncle_aunt", "female"), WORD_KIND["aunt"], INVERSE_KIND["uncle_aunt"]
    ('aunt', 'uncle_aunt', 'nephew_niece')
    """
    return RELATION_KINDS[kind][0 if gender == "male" else 1]


@dataclass(frozen=True)
class Person:
    """One person of the tree; ``generation`` counts from 1 (the oldest, who have no parents)."""

    name: str
    gender: Gender
    generation: int


@dataclass(frozen=True)
class KinshipDocument:
    """One store document; kinship facts "subject is the relation of object.", or a distractor."""

    id: str
    text: str
    relation: str | None
    kind: str | None
    subject: str | None
    object: str | None


@dataclass(frozen=True)
class KinshipQuery:
    """A question "Who is the relation of person?" with every correct answer (sorted)."""

    id: str
    text: str
    relation: str
    kind: str
    person: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class ConditionQuery:
    """A query as posed in one condition: the documents needed in that condition's store.

    ``hops`` is ``None`` when no chain of documents links the person to an answer in that store.
    """

    query: KinshipQuery
    hops: int | None
    evidence: tuple[EvidenceChain, ...]


@dataclass(frozen=True)
class KinshipCondition:
    """A store and the questions asked against it (the control, or one held-out relation)."""

    name: str
    held_out: tuple[str, ...]
    hold_out: str
    documents: tuple[KinshipDocument, ...]
    queries: tuple[ConditionQuery, ...]


class KinshipSummary(TypedDict):
    """Counts reported by :meth:`KinshipSource.summary`."""

    names: int
    generations: int
    seed: int
    distractor_share: float
    people: int
    couples: int
    kinship_documents: int
    distractors: int
    documents: int
    queries: int
    documents_per_relation: dict[str, int]
    queries_per_relation: dict[str, int]


Pairs = tuple[tuple[tuple[str, str], ...], ...]


@dataclass(frozen=True)
class KinshipSource:
    """A generated family tree with its documents and queries; build it with
    :func:`generate_kinship_source`.

    ``couples[g]`` and ``sibling_pairs[g]`` hold generation ``g + 1`` as (husband, wife) and
    (brother, sister); couple ``i`` of one generation are the parents of sibling pair ``i`` of the next.
    ``documents`` are the kinship documents then the distractors. Kinship documents are ordered by the
    generation of their object, then relation word (in :data:`RELATION_WORDS` order), object name and
    subject name; queries by the generation of their person, relation word and person name.
    """

    people: tuple[Person, ...]
    couples: Pairs
    sibling_pairs: Pairs
    documents: tuple[KinshipDocument, ...]
    queries: tuple[KinshipQuery, ...]
    names: int
    generations: int
    seed: int
    distractor_share: float

    def relations(self) -> list[str]:
        """The relation words present in this source, in :data:`RELATION_WORDS` order."""
        present = {doc.relation for doc in self.documents}
        return [word for word in RELATION_WORDS if word in present]

    def condition_names(self) -> list[str]:
        """Every name :meth:`experimental` accepts: the relation words, then the kinds, present here."""
        words = self.relations()
        kinds = [kind for kind, pair in RELATION_KINDS.items() if pair[0] in words or pair[1] in words]
        return words + kinds

    def control(self) -> KinshipCondition:
        """Every document, every query: each answer is stated in one document (hops 1)."""
        return self._condition("control", (), "none", self.documents)

    def experimental(self, relation: str, *, hold_out: HoldOut = "fact") -> KinshipCondition:
        """The questions about ``relation`` against a store without the documents that state them.

        ``relation`` is a relation word ("grandfather") or a kind ("sibling": brother and sister).
        ``hold_out="relation"`` is the paper's wording: drop every document with that relation.
        ``hold_out="fact"`` (default) also drops each dropped document's inverse ("X is the grandson
        of A." for "A is the grandfather of X."), so no held-out fact is still stated backwards in a
        single document and the questions need more than one document, as the paper intends.
        Distractors stay in every store.
        """
        held = self._resolve(relation)
        if hold_out not in ("relation", "fact"):
            raise ParameterError(f"must be 'relation' or 'fact', not {hold_out!r}", parameter="hold_out")
        dropped = [doc for doc in self.documents if doc.relation in held]
        removed = {doc.id for doc in dropped}
        if hold_out == "fact":
            backwards = {(doc.object, doc.subject) for doc in dropped}
            removed |= {doc.id for doc in self.documents if (doc.subject, doc.object) in backwards}
        store = tuple(doc for doc in self.documents if doc.id not in removed)
        return self._condition(relation, held, hold_out, store)

    def conditions(
        self, relations: Sequence[str] | None = None, *, hold_out: HoldOut = "fact"
    ) -> list[KinshipCondition]:
        """The control, then one experimental condition per name (default: every relation word)."""
        names = self.relations() if relations is None else list(relations)
        return [self.control(), *(self.experimental(name, hold_out=hold_out) for name in names)]

    def write_csv(self, directory: str | Path, *, hold_out: HoldOut = "fact") -> list[Path]:
        """Write the paper's CSV files and return their paths.

        ``control_documents.csv`` (id, text, relation, subject, object), ``control_queries.csv`` (id,
        query, relation, person, answers joined by "|"), and for each relation word R
        ``experimental_R_documents.csv`` and ``experimental_R_queries.csv`` (queries with hops; empty
        when the store cannot answer).
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for condition in self.conditions(hold_out=hold_out):
            control = condition.name == "control"
            prefix = "control" if control else f"experimental_{condition.name}"
            docs = [
                [d.id, d.text, d.relation or "", d.subject or "", d.object or ""] for d in condition.documents
            ]
            written.append(_write(out / f"{prefix}_documents.csv", _DOC_COLUMNS, docs))
            rows = []
            for posed in condition.queries:
                q = posed.query
                row = [q.id, q.text, q.relation, q.person, "|".join(q.answers)]
                rows.append(row if control else [*row, "" if posed.hops is None else str(posed.hops)])
            columns = _QUERY_COLUMNS if control else [*_QUERY_COLUMNS, "hops"]
            written.append(_write(out / f"{prefix}_queries.csv", columns, rows))
        return written

    def summary(self) -> KinshipSummary:
        """People, documents and queries counted, overall and per relation word."""
        kinship = [doc for doc in self.documents if doc.relation is not None]
        per_doc = Counter(doc.relation for doc in kinship)
        per_query = Counter(q.relation for q in self.queries)
        words = self.relations()
        return KinshipSummary(
            names=self.names,
            generations=self.generations,
            seed=self.seed,
            distractor_share=self.distractor_share,
            people=len(self.people),
            couples=sum(len(g) for g in self.couples),
            kinship_documents=len(kinship),
            distractors=len(self.documents) - len(kinship),
            documents=len(self.documents),
            queries=len(self.queries),
            documents_per_relation={word: per_doc[word] for word in words},
            queries_per_relation={word: per_query[word] for word in words},
        )

    def _resolve(self, name: str) -> tuple[str, ...]:
        words = self.relations()
        if name in words:
            return (name,)
        if name in RELATION_KINDS:
            held = tuple(word for word in RELATION_KINDS[name] if word in words)
            if held:
                return held
        valid = ", ".join(self.condition_names())
        raise ParameterError(f"unknown condition {name!r}; valid names are: {valid}", parameter="relation")

    def _condition(
        self, name: str, held: tuple[str, ...], hold_out: str, store: tuple[KinshipDocument, ...]
    ) -> KinshipCondition:
        graph = EvidenceGraph(store)
        asked = [q for q in self.queries if not held or q.relation in held]
        posed = []
        for query in asked:
            chains = graph.chains(query.person, query.answers)
            posed.append(ConditionQuery(query, hops(chains), chains))
        return KinshipCondition(name, held, hold_out, store, tuple(posed))


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    return write_output(path, text.getvalue(), overwrite=True)  # whole, never through a link


def _pair_generation(
    men: list[str], women: list[str], rng: random.Random
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    wives = women[:]
    rng.shuffle(wives)
    couples = tuple(zip(men, wives, strict=True))
    married = set(couples)
    while True:
        # Shuffle both lists so that which sibling pair a couple parents is random too; redraw until
        # no brother-sister pair is also a couple (a derangement: about e draws on average).
        brothers, sisters = men[:], women[:]
        rng.shuffle(brothers)
        rng.shuffle(sisters)
        siblings = tuple(zip(brothers, sisters, strict=True))
        if married.isdisjoint(siblings):
            return couples, siblings


def _facts(couples: Pairs, sibling_pairs: Pairs, generations: int) -> set[tuple[str, str, str]]:
    """(subject, kind, object) triples for every relation, both directions."""
    facts: set[tuple[str, str, str]] = set()
    parents: dict[str, tuple[str, str]] = {}
    sibling: dict[str, str] = {}
    for g in range(generations):
        for husband, wife in couples[g]:
            facts |= {(husband, "spouse", wife), (wife, "spouse", husband)}
        for brother, sister in sibling_pairs[g]:
            facts |= {(brother, "sibling", sister), (sister, "sibling", brother)}
            sibling[brother], sibling[sister] = sister, brother
        if g > 0:
            for couple, pair in zip(couples[g - 1], sibling_pairs[g], strict=True):
                parents.update(dict.fromkeys(pair, couple))

    def ancestors(person: str, depth: int) -> set[str]:
        level = {person}
        for _ in range(depth):
            level = {p for child in level if child in parents for p in parents[child]}
        return level

    for child, (father, mother) in parents.items():
        # Blood uncle/aunt only: the mother's brother and the father's sister.
        for elder, kind, inverse in (
            *((parent, "parent", "child") for parent in (father, mother)),
            *((g, "grandparent", "grandchild") for g in ancestors(child, 2)),
            *((g, "great_grandparent", "great_grandchild") for g in ancestors(child, 3)),
            *((relative, "uncle_aunt", "nephew_niece") for relative in (sibling[mother], sibling[father])),
        ):
            facts |= {(elder, kind, child), (child, inverse, elder)}
    return facts


def generate_kinship_source(
    names: int = 12,
    generations: int = 3,
    *,
    seed: int = 0,
    distractor_share: float = 0.0,
    male_names: Sequence[str] | None = None,
    female_names: Sequence[str] | None = None,
) -> KinshipSource:
    """Generate a family tree, its documents and its queries; deterministic for a ``seed``.

    ``names`` is the length of each name list (12 gives 12 men and 12 women); each list is split into
    ``generations`` equal blocks of at least 2. ``distractor_share`` is the share of the store made of
    unrelated sentences (0.2 adds a quarter as many distractors as kinship documents). Raises
    :class:`~ragsense.errors.ParameterError` naming the bad parameter.

    >>> source = generate_kinship_source(4, 2, seed=3, distractor_share=0.5)
    >>> source.summary()["kinship_documents"], source.summary()["distractors"]
    (48, 48)
    >>> try:
    ...     generate_kinship_source(13, 3)
    ... except ParameterError as error:
    ...     print(error.parameter)
    names
    """
    per_generation = generation_size(names, generations)
    if not isinstance(distractor_share, int | float) or not 0 <= distractor_share < 1:
        raise ParameterError(f"must be in [0, 1), got {distractor_share!r}", parameter="distractor_share")
    male, female = name_lists(names, male_names, female_names)
    rng = random.Random(seed)
    people: list[Person] = []
    couples, sibling_pairs = [], []
    for g in range(generations):
        block = slice(g * per_generation, (g + 1) * per_generation)
        people += [Person(name, "male", g + 1) for name in male[block]]
        people += [Person(name, "female", g + 1) for name in female[block]]
        pairs = _pair_generation(male[block], female[block], rng)
        couples.append(pairs[0])
        sibling_pairs.append(pairs[1])
    by_name = {person.name: person for person in people}
    facts = _facts(tuple(couples), tuple(sibling_pairs), generations)

    # (generation of object, word order, object, subject) fixes the document order; see KinshipSource.
    stated = sorted(
        (by_name[o].generation, _WORD_ORDER[w], o, s, w)
        for s, kind, o in facts
        for w in [relation_word(kind, by_name[s].gender)]
    )
    width = max(4, len(str(len(stated))))
    documents = [
        KinshipDocument(f"doc-{i:0{width}d}", f"{s} is the {w} of {o}.", w, WORD_KIND[w], s, o)
        for i, (_, _, o, s, w) in enumerate(stated, 1)
    ]
    answers: dict[tuple[int, int, str], list[str]] = {}
    for generation, order, o, s, _ in stated:
        answers.setdefault((generation, order, o), []).append(s)
    width = max(4, len(str(len(answers))))
    queries = tuple(
        KinshipQuery(f"q-{i:0{width}d}", f"Who is the {w} of {p}?", w, WORD_KIND[w], p, tuple(sorted(found)))
        for i, ((_, order, p), found) in enumerate(sorted(answers.items()), 1)
        for w in [RELATION_WORDS[order]]
    )
    if distractor_share > 0:
        count = round(distractor_share / (1 - distractor_share) * len(documents))
        try:
            texts = distractor_sentences(count, rng, forbidden=[*male, *female, *RELATION_WORDS])
        except ValueError as error:
            raise ParameterError(f"{error}; lower the share", parameter="distractor_share") from None
        width = max(4, len(str(count)))
        documents += [
            KinshipDocument(f"distractor-{i:0{width}d}", text, None, None, None, None)
            for i, text in enumerate(texts, 1)
        ]
    return KinshipSource(
        people=tuple(people),
        couples=tuple(couples),
        sibling_pairs=tuple(sibling_pairs),
        documents=tuple(documents),
        queries=queries,
        names=names,
        generations=generations,
        seed=seed,
        distractor_share=float(distractor_share),
    )
