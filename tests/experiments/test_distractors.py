"""``consens-distractors`` on a tiny slice with the fake model (issue 27), and its windows study."""

import asyncio
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from ragsense.cli._experiment import _full_ks
from ragsense.consens import GroundingResult, GroundingScorer, relevance_windows
from ragsense.consens._select import select_context, split_sentences
from ragsense.errors import ParameterError
from ragsense.experiments import load_pairs, split_parts, with_distractors
from ragsense.experiments._distractors import combine_windows, consens_distractors
from ragsense.models import load_model

Q = "Who designed the Elm bridge?"
ANSWER = "Maria Keller designed it in 1931."
DOCS = [
    "Bananas are yellow fruit grown in warm countries. " * 4,
    "Maria Keller designed the Elm bridge in 1931.",
    "Paris has many museums and a famous tower. " * 4,
    "The Elm bridge crosses the river near the old mill. " * 2,
    "Tulips bloom in spring in the Dutch fields. " * 4,
]


def test_distractors_are_seeded_nested_and_keep_the_own_document(shared_data: Path) -> None:
    del shared_data  # skips when the shared datasets are absent
    pool = split_parts(load_pairs("halueval"), 0)["report"]
    five, own5 = with_distractors(pool[0], pool, 5, 0)
    twenty, own20 = with_distractors(pool[0], pool, 20, 0)
    assert len(five) == 6 and len(twenty) == 21
    assert five[own5[0]] == twenty[own20[0]] == pool[0].documents[0]
    assert set(five) - {pool[0].documents[0]} <= set(twenty)
    assert with_distractors(pool[0], pool, 20, 0) == (twenty, own20)
    dev = {p.id for p in split_parts(load_pairs("halueval"), 0)["dev"]}
    assert dev.isdisjoint(p.id for p in pool)


def test_experiment_on_a_tiny_slice(shared_data: Path, tmp_path: Path) -> None:
    del shared_data
    figures = consens_distractors(
        model=load_model("fake"), limit=3, ks=(0, 5), budgets=(64, 128), dev_k=5, out=str(tmp_path)
    )
    assert figures["budget"] in (64, 128)
    assert isinstance(figures["windows_win_dev"], bool)
    assert set(figures["dev"]["halueval"]) == {"64", "128", f"windows-{figures['budget']}"}
    for name in ("wikieval", "halueval"):
        for k in ("k=0", "k=5"):
            row = figures[name][k]
            assert set(row) == {"budget", "tail", "full", "baseline_lexical_support"} | (
                {"windows"} if k == "k=0" else set()
            )
            for cell in (row["budget"], row["tail"], row["full"]):
                lo, hi = cell["auroc_ci95"]
                assert 0.0 <= lo <= cell["auroc"] <= hi <= 1.0 and cell["rows_per_s"] > 0
        # The budget keeps the pair's own document; a tail cut of a shuffled context does not always.
        assert figures[name]["k=5"]["budget"]["own_document_kept"] == 1.0
    with gzip.open(tmp_path / "report-halueval-k5.jsonl.gz", "rt", encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh]
    assert len(items) == 3 * 2 * 3  # conditions x answers x pairs
    assert {i["condition"] for i in items} == {"budget", "tail", "full"}


# The supporting sentence inside a long document: the best document is over small budgets.
LONG = [DOCS[0], DOCS[1] + " " + DOCS[2], DOCS[3]]


@pytest.mark.parametrize(
    ("docs", "budget", "unit"),
    [(DOCS, 30, "documents"), (DOCS, 60, "documents"), (LONG, 12, "sentences"), (LONG, 30, "sentences")],
)
def test_the_first_window_is_the_relevance_window_and_windows_do_not_overlap(
    docs: list[str], budget: int, unit: str
) -> None:
    model = load_model("fake")
    query = f"{Q}\n{ANSWER}"
    windows = relevance_windows(docs, query, budget, model.count_tokens, 4)
    single = select_context(docs, query, budget, model.count_tokens)
    assert single.unit == unit and windows[0] == single.parts
    assert 1 <= len(windows) <= 4 and (len(windows) > 1 or budget == 30)  # 30: the rest is over it
    assert all(model.count_tokens("\n\n".join(t for _, t in w)) <= budget + 2 for w in windows)
    if unit == "documents":
        assert len({d for w in windows for d, _ in w}) == sum(len(w) for w in windows)  # no repeats
    else:  # no sentence twice: no document gives more sentences than it has
        taken = Counter(d for w in windows for d, t in w for _ in split_sentences(t))
        assert all(taken[d] <= len(split_sentences(docs[d])) for d in taken)
        assert sum(taken.values()) > len(split_sentences(single.context))  # the next windows add some
    assert len(relevance_windows(docs, query, budget, model.count_tokens, 1)) == 1
    assert relevance_windows(docs, query, 10_000, model.count_tokens, 4) == [list(enumerate(docs))]


def _score(docs: list[str]) -> GroundingResult:
    [res] = asyncio.run(GroundingScorer(load_model("fake")).score([(Q, docs, ANSWER)]))
    assert isinstance(res, GroundingResult)
    return res


def test_each_word_keeps_its_best_evidence_over_the_windows() -> None:
    support, filler = _score([DOCS[1]]), _score([DOCS[0]])
    assert combine_windows([support]) == (pytest.approx(support.consens), [support.consens])
    both, each = combine_windows([filler, support])
    assert each == [filler.consens, support.consens]
    # The word-wise best is at least each window's own score (more evidence never lowers a word).
    assert both >= max(each) - 1e-9
    assert combine_windows([support, filler])[0] == pytest.approx(both)


def test_full_ks_per_set() -> None:
    assert _full_ks("wikieval:0 halueval:0,5,20") == {"wikieval": (0,), "halueval": (0, 5, 20)}
    assert _full_ks("0,5") == (0, 5)
    with pytest.raises(ParameterError):
        _full_ks("wikieval:0 :5")


def test_one_set_at_a_given_budget_and_unknown_sets_refused(shared_data: Path) -> None:
    del shared_data
    figures = consens_distractors(
        model=load_model("fake"), limit=2, ks=(0,), budget=64, sets=("halueval",), windows_ks=()
    )
    assert "wikieval" not in figures and "dev" not in figures and figures["budget"] == 64
    assert set(figures["halueval"]["k=0"]) == {"budget", "tail", "full", "baseline_lexical_support"}
    with pytest.raises(ParameterError):
        consens_distractors(model=load_model("fake"), sets=("squad",))
