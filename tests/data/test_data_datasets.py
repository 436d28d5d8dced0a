"""The dataset loaders, on the real shared files (skipped when they are not on this machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragsense.data import DATA_DIR_ENV, default_data_dir, load_pubmedqa, load_squad_v2, load_wikieval

SHARED = Path(os.environ.get(DATA_DIR_ENV, "/work/shared/data"))
needs_data = pytest.mark.skipif(
    not (SHARED / "wikieval").is_dir(),
    reason=f"shared datasets not found at {SHARED} (set {DATA_DIR_ENV} to the folder holding wikieval/, ...)",
)


def test_default_data_dir_prefers_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert default_data_dir() == tmp_path


def test_default_data_dir_relative_then_last_resort(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert default_data_dir() == (tmp_path / "shared" / "data").resolve()
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == Path("/work/shared/data")


def test_missing_dataset_file_names_the_env_variable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV):
        load_wikieval(tmp_path)


@needs_data
def test_wikieval() -> None:
    items = load_wikieval(SHARED / "wikieval" / "wikieval.jsonl")
    assert len(items) == 50
    assert [item.id for item in items] == [str(i) for i in range(50)]
    assert len({item.source for item in items}) == 50
    for item in items:
        assert not item.question.startswith("Question:")
        for answer in (item.grounded_answer, item.ungrounded_answer, item.poor_answer):
            assert answer and not answer.startswith("Answer:")
        assert len(item.context_v1) == 1
        assert 1 <= len(item.context_v2) <= 3
    first = items[0]
    assert first.source == "PSLV-C56"
    assert first.question.startswith("When is the scheduled launch date and time for the PSLV-C56 mission")
    assert first.grounded_answer.startswith("The PSLV-C56 mission is scheduled to be launched on Sunday")
    # One ungrounded answer in the published data also carries the prefix; it is stripped too.
    hormozgan = next(item for item in items if "Hormozgan" in item.ungrounded_answer)
    assert hormozgan.ungrounded_answer.startswith("The 2022 Hormozgan earthquakes")


@needs_data
def test_wikieval_from_folder_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(load_wikieval(SHARED / "wikieval")) == 50
    monkeypatch.setenv(DATA_DIR_ENV, str(SHARED))
    assert len(load_wikieval()) == 50


@needs_data
def test_pubmedqa() -> None:
    items = load_pubmedqa(SHARED / "pubmedqa" / "ori_pqal.json")
    assert len(items) == 1000
    assert len({item.pmid for item in items}) == 1000
    assert items[0].pmid == "21645374"  # file order is kept
    assert items[0].question.startswith("Do mitochondria play a role in remodelling lace plant leaves")
    assert items[0].labels == ["BACKGROUND", "RESULTS"]
    decisions = [item.final_decision for item in items]
    assert (decisions.count("yes"), decisions.count("no"), decisions.count("maybe")) == (552, 338, 110)
    assert all(len(item.contexts) == len(item.labels) >= 1 for item in items)
    assert all(item.long_answer for item in items)


@needs_data
def test_squad_v2() -> None:
    items = load_squad_v2(SHARED / "squad_v2" / "dev-v2.0.json")
    assert len(items) == 6078
    impossible = [item for item in items if item.is_impossible]
    assert len(impossible) == 3168
    assert all(not item.answers and item.plausible_answers for item in impossible)
    answerable = [item for item in items if not item.is_impossible]
    assert all(item.answers and not item.plausible_answers for item in answerable)
    assert all(len(set(item.answers)) == len(item.answers) for item in items)
    first = items[0]
    assert (first.title, first.question, first.answers) == (
        "Normans",
        "In what country is Normandy located?",
        ["France"],
    )
    assert "France" in first.context
    assert len({item.title for item in items}) == 16
    assert len({item.id for item in items}) == 6078
