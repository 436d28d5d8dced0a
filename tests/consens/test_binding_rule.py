"""Issue 46's rule applied to the committed per-row outputs (docs/results/consens/binding): the figures
docs/results.md, docs/metrics.md and the README state come out of these files, and the decision that the
binding check is opt-in follows from them. No model runs here."""

from __future__ import annotations

import json
from pathlib import Path

from papers.consens.binding_check import DEFAULT_CHECK, _load, hand_verdicts, table

from ragsense.consens import BINDING_ON_BY_DEFAULT, DEFAULT_BINDING

FOLDER = Path(__file__).parents[2] / "docs" / "results" / "consens" / "binding"


def test_the_rule_finds_no_eligible_setting_so_the_check_is_opt_in() -> None:
    result = table(FOLDER)
    assert result["chosen"] is None and not any(g["eligible"] for g in result["grid"])
    assert BINDING_ON_BY_DEFAULT is False
    # The committed summary is what the files give: the same decisions and rows, and AUROCs within 1e-3
    # (they are recomputed here with this machine's exp/log; a last-bit difference could move one tie).
    committed = json.loads((FOLDER / "binding.json").read_text(encoding="utf-8"))
    assert committed["rows"] == result["rows"]
    assert len(committed["grid"]) == len(result["grid"])
    for old, new in zip(committed["grid"], result["grid"], strict=True):
        assert (old["min_margin"], old["min_lift"], old["eligible"]) == (
            new["min_margin"],
            new["min_lift"],
            new["eligible"],
        )
        assert abs(old["recombination_mean_auroc"] - new["recombination_mean_auroc"]) <= 1e-3
        assert set(old["dev_drop"]) == set(new["dev_drop"])
        assert all(abs(old["dev_drop"][k] - new["dev_drop"][k]) <= 1e-3 for k in old["dev_drop"])


def test_the_hand_written_rows_give_the_documented_verdicts() -> None:
    assert (DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift) == (
        DEFAULT_BINDING.min_margin,
        DEFAULT_BINDING.min_lift,
    )
    found = hand_verdicts(_load(FOLDER, "hand"), DEFAULT_CHECK.min_margin, DEFAULT_CHECK.min_lift)
    assert found["recombined_before"] == {"grounded": 31, "unsure": 2}
    assert found["recombined_after"]["grounded"] == 6 and sum(found["recombined_after"].values()) == 33
    assert found["twins_before"] == found["twins_after"]  # the check changed no twin's verdict
