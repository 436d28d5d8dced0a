import csv
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ragsense.bench.kinship._evidence import EvidenceChain, EvidenceGraph, retrieval_recall
from ragsense.bench.kinship._names import FEMALE_NAMES, MALE_NAMES
from ragsense.bench.kinship._source import (
    INVERSE_KIND,
    RELATION_KINDS,
    RELATION_WORDS,
    WORD_KIND,
    KinshipSource,
    generate_kinship_source,
)
from ragsense.errors import ParameterError

# ---------------------------------------------------------------------------------------------- names


def test_name_lists_are_equally_long_distinct_and_never_inside_another_word() -> None:
    assert len(MALE_NAMES) == len(FEMALE_NAMES) == 60
    everyone = [n.lower() for n in (*MALE_NAMES, *FEMALE_NAMES)]
    assert len(set(everyone)) == 120
    words = [w.lower() for w in RELATION_WORDS]
    for name in everyone:
        others = [o for o in everyone if o != name] + words
        assert not [o for o in others if name in o], name


def test_relation_constants_agree() -> None:
    assert RELATION_WORDS[:4] == ("husband", "wife", "brother", "sister")
    assert len(RELATION_WORDS) == 20 == 2 * len(RELATION_KINDS)
    for word in RELATION_WORDS:
        assert word in RELATION_KINDS[WORD_KIND[word]]
    for kind, inverse in INVERSE_KIND.items():
        assert INVERSE_KIND[inverse] == kind
    assert INVERSE_KIND["grandparent"] == "grandchild" and INVERSE_KIND["spouse"] == "spouse"


# ------------------------------------------------------------------------------------------ structure


def test_same_seed_same_source_other_seed_other_pairing() -> None:
    a, b = generate_kinship_source(12, 3, seed=5), generate_kinship_source(12, 3, seed=5)
    assert a.documents == b.documents and a.queries == b.queries and a.couples == b.couples
    others = [generate_kinship_source(12, 3, seed=s) for s in (6, 7, 8)]
    assert any((o.couples, o.sibling_pairs) != (a.couples, a.sibling_pairs) for o in others)
    assert any(o.documents != a.documents for o in others)


@pytest.mark.parametrize(("names", "generations"), [(4, 2), (6, 3), (12, 3), (8, 4)])
def test_no_couple_are_siblings_and_generations_are_blocks(names: int, generations: int) -> None:
    for seed in range(100):
        source = generate_kinship_source(names, generations, seed=seed)
        m = names // generations
        for g in range(generations):
            assert set(source.couples[g]).isdisjoint(source.sibling_pairs[g])
            block = slice(g * m, (g + 1) * m)
            for pairs in (source.couples[g], source.sibling_pairs[g]):
                assert sorted(p[0] for p in pairs) == sorted(MALE_NAMES[block])
                assert sorted(p[1] for p in pairs) == sorted(FEMALE_NAMES[block])


def _expected_counts(m: int, generations: int) -> tuple[dict[str, int], dict[str, int]]:
    # Hand-derived, m men and m women per generation, G generations, N = m * G names per list.
    # Documents: every person has one spouse and one sibling (N per word); the 2m(G-1) people with
    # parents give one father and one mother doc each and the inverse son/daughter docs (2m(G-1) per
    # word), one uncle and one aunt doc each and their inverses; the 2m(G-2) people with grandparents
    # give two grandfather and two grandmother docs each and the inverses (4m(G-2) per word).
    g = generations
    n = m * g
    docs = {"husband": n, "wife": n, "brother": n, "sister": n}
    docs |= dict.fromkeys(
        ("father", "mother", "son", "daughter", "uncle", "aunt", "nephew", "niece"), 2 * m * (g - 1)
    )
    # Queries: one per (word, person). Husband/brother queries are about each woman, wife/sister about
    # each man (m*G each). Each child is asked father and mother, uncle and aunt; each parent (people
    # of generations 1..G-1) has exactly one son and one daughter, and each uncle/aunt one nephew and
    # one niece. Grandfather/grandmother: one query per grandchild (2 answers); grandson/granddaughter:
    # one per grandparent (2 answers: the son's and the daughter's child).
    queries = dict(docs)
    if g >= 3:
        docs |= dict.fromkeys(("grandfather", "grandmother", "grandson", "granddaughter"), 4 * m * (g - 2))
        queries |= dict.fromkeys(("grandfather", "grandmother", "grandson", "granddaughter"), 2 * m * (g - 2))
    return docs, queries


@pytest.mark.parametrize(("names", "generations", "n_docs", "n_queries"), [(4, 2, 48, 48), (12, 3, 240, 208)])
def test_exact_counts(names: int, generations: int, n_docs: int, n_queries: int) -> None:
    source = generate_kinship_source(names, generations, seed=1)
    docs, queries = _expected_counts(names // generations, generations)
    summary = source.summary()
    assert summary["people"] == 2 * names and summary["couples"] == names
    assert summary["documents_per_relation"] == docs and sum(docs.values()) == n_docs
    assert summary["queries_per_relation"] == queries and sum(queries.values()) == n_queries
    assert summary["kinship_documents"] == len(source.documents) == n_docs
    assert summary["queries"] == len(source.queries) == n_queries and summary["distractors"] == 0


def _true_statements(source: KinshipSource) -> set[tuple[str, str, str]]:
    """(subject, word, object) recomputed from the couples and sibling pairs alone."""
    male = {p.name for p in source.people if p.gender == "male"}
    father: dict[str, str] = {}
    mother: dict[str, str] = {}
    sibling: dict[str, str] = {}
    out: set[tuple[str, str, str]] = set()
    for g, couples in enumerate(source.couples):
        for h, w in couples:
            out |= {(h, "husband", w), (w, "wife", h)}
        for b, s in source.sibling_pairs[g]:
            out |= {(b, "brother", s), (s, "sister", b)}
            sibling |= {b: s, s: b}
        if g + 1 < len(source.couples):
            for (h, w), (b, s) in zip(couples, source.sibling_pairs[g + 1], strict=True):
                father |= {b: h, s: h}
                mother |= {b: w, s: w}

    def state(elder: str, word: str, young: str, down: str) -> None:
        out.add((elder, word, young))
        out.add(
            (
                young,
                down
                if young in male
                else {
                    "son": "daughter",
                    "grandson": "granddaughter",
                    "nephew": "niece",
                    "great-grandson": "great-granddaughter",
                }[down],
                elder,
            )
        )

    for c in father:
        state(father[c], "father", c, "son")
        state(mother[c], "mother", c, "son")
        state(sibling[mother[c]], "uncle", c, "nephew")
        state(sibling[father[c]], "aunt", c, "nephew")
        for p in (father[c], mother[c]):
            if p in father:
                state(father[p], "grandfather", c, "grandson")
                state(mother[p], "grandmother", c, "grandson")
                for q in (father[p], mother[p]):
                    if q in father:
                        state(father[q], "great-grandfather", c, "great-grandson")
                        state(mother[q], "great-grandmother", c, "great-grandson")
    return out


@pytest.mark.parametrize(("names", "generations", "seed"), [(4, 2, 0), (12, 3, 2), (12, 4, 3), (16, 4, 9)])
def test_every_document_is_true_and_every_truth_is_a_document(
    names: int, generations: int, seed: int
) -> None:
    source = generate_kinship_source(names, generations, seed=seed)
    stated = {(d.subject, d.relation, d.object) for d in source.documents}
    assert stated == _true_statements(source)
    assert len(stated) == len(source.documents)
    for i, doc in enumerate(source.documents, 1):
        assert doc.id == f"doc-{i:04d}"
        assert doc.text == f"{doc.subject} is the {doc.relation} of {doc.object}."
        assert doc.relation is not None and doc.kind == WORD_KIND[doc.relation]


@pytest.mark.parametrize(("names", "generations"), [(12, 3), (12, 4)])
def test_one_query_per_relation_and_person_with_every_answer(names: int, generations: int) -> None:
    source = generate_kinship_source(names, generations, seed=4)
    expected: dict[tuple[Any, Any], list[Any]] = {}
    for doc in source.documents:
        expected.setdefault((doc.relation, doc.object), []).append(doc.subject)
    assert len(source.queries) == len(expected)
    for i, q in enumerate(source.queries, 1):
        assert q.id == f"q-{i:04d}" and q.text == f"Who is the {q.relation} of {q.person}?"
        assert q.answers == tuple(sorted(expected[q.relation, q.person]))
        if q.relation in ("grandfather", "grandmother", "grandson", "granddaughter"):
            assert len(q.answers) == 2
        elif not q.relation.startswith("great-"):
            assert len(q.answers) == 1


@pytest.mark.parametrize(
    ("kwargs", "parameter", "fragment"),
    [
        ({"names": 3}, "names", "at least 4"),
        ({"names": 4, "generations": 1}, "generations", "at least 2"),
        ({"names": 13, "generations": 3}, "names", "13 names cannot be split into 3 generations"),
        ({"names": 6, "generations": 6}, "generations", "at least 2 men and 2 women"),
        ({"names": 12.0}, "names", "integer"),
        ({"names": 62, "generations": 2}, "names", "built-in name lists hold 60"),
        ({"distractor_share": 1.0}, "distractor_share", "[0, 1)"),
        ({"distractor_share": -0.1}, "distractor_share", "[0, 1)"),
        ({"names": 4, "generations": 2, "male_names": ["A", "B", "C", "D"]}, "female_names", "both"),
        (
            {"names": 4, "generations": 2, "male_names": list("ABCDE"), "female_names": list("FGHI")},
            "female_names",
            "equally",
        ),
        (
            {"names": 4, "generations": 2, "male_names": list("ABCA"), "female_names": list("FGHI")},
            "male_names",
            "duplicate",
        ),
        (
            {"names": 4, "generations": 2, "male_names": list("ABCD"), "female_names": list("FGHa")},
            "female_names",
            "duplicate",
        ),
        (
            {"names": 6, "generations": 2, "male_names": list("ABCD"), "female_names": list("FGHI")},
            "male_names",
            "hold 4",
        ),
    ],
)
def test_validation_names_the_parameter(kwargs: dict[str, Any], parameter: str, fragment: str) -> None:
    with pytest.raises(ParameterError) as caught:
        generate_kinship_source(**kwargs)
    assert caught.value.parameter == parameter
    assert str(caught.value).startswith(parameter + ": ") and fragment in str(caught.value)


def test_user_name_lists_are_used() -> None:
    source = generate_kinship_source(
        4, 2, male_names=["Al", "Bo", "Cy", "Dan", "Ed"], female_names=list("VWXYZ")
    )
    assert sorted(p.name for p in source.people) == ["Al", "Bo", "Cy", "Dan", "V", "W", "X", "Y"]


# ------------------------------------------------------------------------------------------ conditions


def test_unknown_condition_lists_valid_names() -> None:
    source = generate_kinship_source(12, 3)
    for bad in ("cousin", "great-grandfather", "great_grandparent"):
        with pytest.raises(ParameterError, match="valid names are: husband, wife") as caught:
            source.experimental(bad)
        assert caught.value.parameter == "relation"
    with pytest.raises(ParameterError):
        source.experimental("grandfather", hold_out="both")  # type: ignore[arg-type]
    assert source.experimental("sibling").held_out == ("brother", "sister")


def test_hold_out_fact_removes_inverses_relation_keeps_them() -> None:
    source = generate_kinship_source(12, 3, seed=2)
    by_id = {d.id: d for d in source.documents}
    grandfather = {d.id for d in source.documents if d.relation == "grandfather"}
    inverses = {
        d.id
        for d in source.documents
        if d.relation in ("grandson", "granddaughter")
        and any((by_id[g].subject, by_id[g].object) == (d.object, d.subject) for g in grandfather)
    }
    assert len(inverses) == len(grandfather) == 16
    kept = source.experimental("grandfather", hold_out="relation")
    assert {d.id for d in kept.documents} == set(by_id) - grandfather
    strict = source.experimental("grandfather", hold_out="fact")
    assert {d.id for d in strict.documents} == set(by_id) - grandfather - inverses
    assert strict.hold_out == "fact" and strict.held_out == ("grandfather",)
    assert [cq.query.relation for cq in strict.queries] == ["grandfather"] * 8
    # Spouse is its own inverse: holding out husband as a fact removes every wife document too.
    husband = source.experimental("husband")
    assert not [d for d in husband.documents if d.kind == "spouse"]


def test_hops_control_one_grandfather_two_under_fact_one_under_relation() -> None:
    source = generate_kinship_source(12, 3, seed=0)
    control = source.control()
    assert len(control.queries) == 208 and {cq.hops for cq in control.queries} == {1}
    for cq in control.queries:
        assert all(chain.hops == 1 for chain in cq.evidence)
    assert {cq.hops for cq in source.experimental("grandfather").queries} == {2}
    assert {cq.hops for cq in source.experimental("grandfather", hold_out="relation").queries} == {1}
    assert {cq.hops for cq in source.experimental("sibling", hold_out="relation").queries} == {2}
    names = [c.name for c in source.conditions(["uncle", "aunt"])]
    assert names == ["control", "uncle", "aunt"]


def _components(documents: Any) -> dict[str, str]:
    root: dict[str, str] = {}

    def find(x: str) -> str:
        root.setdefault(x, x)
        while root[x] != x:
            x = root[x]
        return x

    for d in documents:
        if d.subject is not None:
            root[find(d.subject)] = find(d.object)
    return {x: find(x) for x in list(root)}


def test_evidence_chains_are_valid_and_none_only_when_disconnected() -> None:
    seen_none = 0
    for seed in range(20):
        source = generate_kinship_source(8, 2, seed=seed)
        condition = source.experimental("spouse")
        by_id = {d.id: d for d in condition.documents}
        component = _components(condition.documents)
        for cq in condition.queries:
            q = cq.query
            reachable = any(component.get(a) == component.get(q.person) is not None for a in q.answers)
            assert (cq.hops is None) == (not reachable) == (cq.evidence == ())
            seen_none += cq.hops is None
            for chain in cq.evidence:
                assert chain.hops == cq.hops and chain.people[0] == q.person and chain.people[-1] in q.answers
                for step, a, b in zip(chain.steps, chain.people, chain.people[1:], strict=False):
                    assert step and all({by_id[i].subject, by_id[i].object} == {a, b} for i in step)
                    assert not [i for i in step if by_id[i].kind == "spouse"]
    assert seen_none > 0  # a last-generation couple from unconnected families: no chain without spouse docs


# ------------------------------------------------------------------------------------------ distractors


def test_distractors_share_and_vocabulary() -> None:
    source = generate_kinship_source(12, 3, seed=3, distractor_share=0.2)
    distractors = [d for d in source.documents if d.relation is None]
    assert len(distractors) == round(0.2 / 0.8 * 240) == 60 == source.summary()["distractors"]
    assert [d.id for d in source.documents[240:]] == [f"distractor-{i:04d}" for i in range(1, 61)]
    assert len({d.text for d in distractors}) == 60
    banned = re.compile(r"\b(" + "|".join([*MALE_NAMES, *FEMALE_NAMES, *RELATION_WORDS]) + r")\b", re.I)
    big = generate_kinship_source(60, 2, seed=1, distractor_share=0.9)
    texts = [d.text for d in big.documents if d.relation is None]
    assert len(texts) == len(set(texts)) == round(0.9 / 0.1 * big.summary()["kinship_documents"])
    assert not [t for t in texts if banned.search(t)]
    for condition in source.conditions(["grandfather"]):
        assert {d.id for d in distractors} <= {d.id for d in condition.documents}
    assert generate_kinship_source(12, 3, seed=3, distractor_share=0.2).documents == source.documents


def test_distractors_avoid_user_names_that_are_template_words() -> None:
    source = generate_kinship_source(
        4,
        2,
        distractor_share=0.9,
        male_names=["Carrick", "Bo", "Cy", "Dan"],
        female_names=["Ashcombe", *"XYZ"],
    )
    texts = " ".join(d.text for d in source.documents if d.relation is None)
    assert "Carrick" not in texts and "Ashcombe" not in texts


# ------------------------------------------------------------------------------------------ csv


def _read(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_write_csv(tmp_path: Path) -> None:
    source = generate_kinship_source(12, 3, seed=0, distractor_share=0.2)
    written = source.write_csv(tmp_path / "out")
    assert len(written) == 2 + 2 * 16 and all(p.exists() for p in written)
    docs = _read(tmp_path / "out" / "control_documents.csv")
    assert docs[0] == ["id", "text", "relation", "subject", "object"] and len(docs) == 1 + 240 + 60
    queries = _read(tmp_path / "out" / "control_queries.csv")
    assert queries[0] == ["id", "query", "relation", "person", "answers"] and len(queries) == 1 + 208
    assert Counter(len(row[4].split("|")) for row in queries[1:]) == Counter({1: 176, 2: 32})
    exp_docs = _read(tmp_path / "out" / "experimental_grandfather_documents.csv")
    assert len(exp_docs) == 1 + 240 - 32 + 60
    exp = _read(tmp_path / "out" / "experimental_grandfather_queries.csv")
    assert exp[0] == ["id", "query", "relation", "person", "answers", "hops"]
    assert len(exp) == 1 + 8 and {row[5] for row in exp[1:]} == {"2"}


# ------------------------------------------------------------------------------------------ evidence


def _step(*ids: str) -> frozenset[str]:
    return frozenset(ids)


def test_retrieval_recall_math() -> None:
    long = EvidenceChain((_step("a"), _step("b", "c"), _step("d"), _step("e")))
    short = EvidenceChain((_step("x"), _step("y")))
    assert retrieval_recall([long, short], {"c", "e"}) == 0.5
    assert retrieval_recall([long, short], {"c", "e", "a", "y"}) == 0.75
    assert retrieval_recall([long, short], {"x", "y"}) == 1.0
    assert retrieval_recall([long], set()) == 0.0
    assert retrieval_recall([], {"a"}) is None


def test_graph_finds_every_shortest_chain_and_caps() -> None:
    class Doc:
        def __init__(self, id: str, subject: str | None, object: str | None) -> None:
            self.id, self.subject, self.object = id, subject, object

    # Two routes A-B-D and A-C-D; a longer one A-E-F-D; D-A inverse pair forms one step.
    docs = [
        Doc("1", "A", "B"),
        Doc("2", "D", "B"),
        Doc("3", "A", "C"),
        Doc("4", "C", "D"),
        Doc("5", "A", "E"),
        Doc("6", "E", "F"),
        Doc("7", "F", "D"),
        Doc("8", "B", "D"),
        Doc("9", None, None),
    ]
    graph = EvidenceGraph(docs)
    chains = graph.chains("A", {"D"})
    assert [c.people for c in chains] == [("A", "B", "D"), ("A", "C", "D")]
    assert chains[0].steps == (_step("1"), _step("2", "8"))
    assert len(graph.chains("A", {"D"}, max_chains=1)) == 1
    assert graph.chains("A", {"Z"}) == () and graph.chains("F", {"B", "A"})[0].hops == 2
