"""Rule 3's chosen candidate (papers/consens/grounding_rule3.py) is the shipped ``support_count``."""

from __future__ import annotations

import doctest
import importlib.util
import random
from pathlib import Path

import pytest

from ragsense.consens import Aggregation, consens_from_word_nll

SCRIPT = Path(__file__).resolve().parents[2] / "papers" / "consens" / "grounding_rule3.py"
_SPEC = importlib.util.spec_from_file_location("grounding_rule3", SCRIPT)
assert _SPEC is not None and _SPEC.loader is not None
grounding_rule3 = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(grounding_rule3)


def test_support_count_is_rule_3s_support_and_count() -> None:
    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(1, 30)
        empty = [rng.uniform(0.0, 12.0) for _ in range(n)]
        context = [rng.uniform(0.0, 12.0) for _ in range(n)]
        stated = [rng.random() < 0.5 for _ in range(n)]
        contrasts = [e - c for e, c in zip(empty, context, strict=True)]
        shipped = consens_from_word_nll(empty, context, Aggregation.SUPPORT_COUNT, stated)[0]
        assert shipped == pytest.approx(grounding_rule3.support_and_count(contrasts, stated), abs=1e-12)
        support = consens_from_word_nll(empty, context, Aggregation.SUPPORT, stated)[0]
        assert support == pytest.approx(grounding_rule3.support(contrasts, stated), abs=1e-12)


def test_rule_3_candidates_doctests() -> None:
    assert doctest.testmod(grounding_rule3).failed == 0
