"""Every output before and after a refactor, bit for bit: the sample (ConSens, attribution, similarity
on the bundled SmolLM2-135M; VERA on the fake judge) and the first WikiEval rows (ConSens).

The expected files were written by ``tests/golden/make_golden.py`` before the code moved; a change
that alters a score on purpose regenerates them in the same commit and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import make_golden

HERE = Path(__file__).resolve().parent


def _expected(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def _first_difference(expected: str, got: str) -> str:
    for number, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines(), strict=False), 1):
        if a != b:
            return f"line {number}: expected {a.strip()!r}, got {b.strip()!r}"
    return "the files differ in length"


@pytest.mark.model
def test_sample_outputs_unchanged() -> None:
    got = make_golden.canonical(make_golden.sample_records())
    assert got == _expected("sample.json"), _first_difference(_expected("sample.json"), got)


def test_vera_fake_outputs_unchanged() -> None:
    got = make_golden.canonical(make_golden.vera_records())
    assert got == _expected("vera_fake.json"), _first_difference(_expected("vera_fake.json"), got)


@pytest.mark.model
def test_wikieval_outputs_unchanged(shared_data: Path) -> None:
    del shared_data  # skips when the shared datasets are absent
    got = make_golden.canonical(make_golden.wikieval_records())
    assert got == _expected("wikieval.json"), _first_difference(_expected("wikieval.json"), got)


def test_golden_files_are_json() -> None:
    for name in ("sample.json", "vera_fake.json", "wikieval.json"):
        records = json.loads(_expected(name))
        assert records and all("id" in r for r in records)
