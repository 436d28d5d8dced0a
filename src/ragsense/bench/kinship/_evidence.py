"""Documents needed to answer a kinship question from a given store: evidence chains and hops.

Each kinship document "A is the R of B." is read as an undirected edge between A and B. A question
"Who is the R of P?" is linked to a store by the shortest chains of edges from P to one of its answers.
A document and its inverse ("B is the R' of A.") link the same two people, so they form one *step*
whose alternatives are every document in the store linking those two people. The number of steps is
the question's *hops*: 1 when the fact is stated in the store, more when it has to be put together.
When no chain exists the store cannot answer the question at all and hops is ``None``.

The shortest chain is a lower bound on the documents a reader needs, not a proof. A chain always
links the two people, but it does not always entail the relation by itself: "B is the uncle of N."
and "F is the mother of N." link B to F without saying that B is F's brother. Hence "documents
needed": at least this many, possibly more.

>>> from types import SimpleNamespace as Doc
>>> store = [Doc(id="d1", subject="Ann", object="Bea"), Doc(id="d2", subject="Bea", object="Cy"),
...          Doc(id="d3", subject="Cy", object="Bea")]
>>> chains = evidence_chains(store, "Ann", {"Cy"})
>>> hops(chains), chains[0].people, sorted(chains[0].steps[1])
(2, ('Ann', 'Bea', 'Cy'), ['d2', 'd3'])
>>> retrieval_recall(chains, {"d3"})
0.5
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, pairwise
from typing import Final, Protocol

MAX_CHAINS: Final = 64


class LinkingDocument(Protocol):
    """What the evidence search reads from a document: its id and the two people it links."""

    @property
    def id(self) -> str: ...

    @property
    def subject(self) -> str | None: ...

    @property
    def object(self) -> str | None: ...


@dataclass(frozen=True)
class EvidenceChain:
    """One shortest chain of documents from a question's person to an answer.

    ``steps[i]`` holds the ids of every document in the store that links ``people[i]`` and
    ``people[i + 1]`` (any one of them is enough for that step).

    >>> chain = EvidenceChain((frozenset({"d1"}), frozenset({"d2", "d3"})), ("Ann", "Bea", "Cy"))
    >>> chain.hops, sorted(chain.document_ids)
    (2, ['d1', 'd2', 'd3'])
    """

    steps: tuple[frozenset[str], ...]
    people: tuple[str, ...] = ()

    @property
    def hops(self) -> int:
        """Number of steps (documents needed along this chain)."""
        return len(self.steps)

    @property
    def document_ids(self) -> frozenset[str]:
        """Every document id that can serve in some step of this chain."""
        return frozenset().union(*self.steps)


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class EvidenceGraph:
    """The people of a document store, linked by its documents; built once, queried per question.

    Documents without both a subject and an object (distractors) link nobody and are ignored.

    >>> from types import SimpleNamespace as Doc
    >>> graph = EvidenceGraph([Doc(id="d1", subject="Ann", object="Bea")])
    >>> graph.chains("Ann", {"Bea"})[0].steps
    (frozenset({'d1'}),)
    >>> graph.chains("Ann", {"Zed"})
    ()
    """

    def __init__(self, documents: Iterable[LinkingDocument]) -> None:
        self._links: dict[tuple[str, str], set[str]] = {}
        self._neighbours: dict[str, set[str]] = {}
        for doc in documents:
            if doc.subject is None or doc.object is None or doc.subject == doc.object:
                continue
            self._links.setdefault(_pair(doc.subject, doc.object), set()).add(doc.id)
            self._neighbours.setdefault(doc.subject, set()).add(doc.object)
            self._neighbours.setdefault(doc.object, set()).add(doc.subject)

    def chains(
        self, start: str, targets: Collection[str], *, max_chains: int = MAX_CHAINS
    ) -> tuple[EvidenceChain, ...]:
        """All shortest chains (at most ``max_chains``) from ``start`` to any of ``targets``.

        Empty when no target can be reached. Order is deterministic (people sorted by name).
        """
        if start in targets:
            return (EvidenceChain((), (start,)),)
        # Breadth-first search that keeps every predecessor on a shortest path, level by level, and
        # stops at the first level holding a target: all chains to the nearest answers have that length.
        parents: dict[str, list[str]] = {start: []}
        frontier = [start]
        found: list[str] = []
        while frontier and not found:
            level: dict[str, list[str]] = {}
            for person in frontier:
                for neighbour in sorted(self._neighbours.get(person, ())):
                    if neighbour not in parents:
                        level.setdefault(neighbour, []).append(person)
            parents.update(level)
            frontier = sorted(level)
            found = [person for person in frontier if person in targets]
        paths = islice(self._paths_to(found, parents), max_chains)
        return tuple(self._chain(path) for path in paths)

    def _paths_to(self, ends: Sequence[str], parents: dict[str, list[str]]) -> Iterator[tuple[str, ...]]:
        # Depth-first walk back along the predecessor lists; lazy so the cap stops it early.
        def walk(person: str, tail: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
            before = parents[person]
            if not before:
                yield (person, *tail)
            for previous in before:
                yield from walk(previous, (person, *tail))

        for end in ends:
            yield from walk(end, ())

    def _chain(self, people: tuple[str, ...]) -> EvidenceChain:
        steps = tuple(frozenset(self._links[_pair(a, b)]) for a, b in pairwise(people))
        return EvidenceChain(steps, people)


def evidence_chains(
    documents: Iterable[LinkingDocument],
    person: str,
    answers: Collection[str],
    *,
    max_chains: int = MAX_CHAINS,
) -> tuple[EvidenceChain, ...]:
    """Shortest evidence chains in ``documents`` from ``person`` to any of ``answers``.

    One-off convenience over :class:`EvidenceGraph`; build the graph once when asking many questions.

    >>> from types import SimpleNamespace as Doc
    >>> len(evidence_chains([Doc(id="d1", subject="Ann", object="Bea")], "Ann", ["Bea"]))
    1
    """
    return EvidenceGraph(documents).chains(person, answers, max_chains=max_chains)


def hops(chains: Sequence[EvidenceChain]) -> int | None:
    """Documents needed (length of the shortest chains), or ``None`` when no chain exists.

    >>> hops(()) is None
    True
    """
    return min((chain.hops for chain in chains), default=None)


def retrieval_recall(evidence: Sequence[EvidenceChain], retrieved_ids: Collection[str]) -> float | None:
    """Best share, over the chains, of steps covered by at least one retrieved document.

    ``None`` when there is no chain (the store cannot answer the question, so recall is undefined).

    >>> chain = EvidenceChain((frozenset({"a"}), frozenset({"b", "c"}), frozenset({"d"})))
    >>> retrieval_recall([chain], {"c", "d", "x"})
    0.6666666666666666
    >>> retrieval_recall([], {"a"}) is None
    True
    """
    if not evidence:
        return None
    retrieved = set(retrieved_ids)
    best = 0.0
    for chain in evidence:
        if not chain.steps:  # the person is an answer: nothing to retrieve
            return 1.0
        covered = sum(1 for step in chain.steps if not step.isdisjoint(retrieved))
        best = max(best, covered / len(chain.steps))
    return best
