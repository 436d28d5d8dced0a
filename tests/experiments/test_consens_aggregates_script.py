"""papers/consens/consens_aggregates.py: the rule that picks the default aggregate and the verdict bands."""

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "papers" / "consens" / "consens_aggregates.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("consens_aggregates", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_choice_prefers_the_incumbent_on_a_tie_and_the_best_mean_otherwise() -> None:
    mod = _script()
    near = {a: {"x": 0.80, "y": 0.70} for a in ("arithmetic", "geometric", "min_word", "q10", "q25")}
    near |= {a: {"x": 0.80, "y": 0.70} for a in ("tail25", "mean_tail", "share")}
    near["q10"] = {"x": 0.804, "y": 0.70}  # better by 0.002 on the mean: a tie
    assert mod.choose(near)[0] == "geometric"
    near["q10"] = {"x": 0.85, "y": 0.72}  # better by 0.035
    assert mod.choose(near)[0] == "q10"


def test_bands_use_one_threshold_for_every_set_and_spare_90_percent_of_grounded_texts() -> None:
    mod = _script()
    # Set A (long answers) scores lower overall than set B (short answers); each separates at its own level.
    a = (
        [0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75],
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.32, 0.34, 0.36],
    )
    b = (
        [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.94, 0.96],
        [0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.62, 0.64, 0.66],
    )
    grounded_at, ungrounded_below = mod.bands([a, b])
    # One threshold for both sets: the best mean balanced accuracy lies between the thresholds each set
    # would pick alone (A: 0.37, B: 0.67).
    assert 0.37 <= grounded_at <= 0.67
    # 90% of A's grounded texts reach 0.35, 90% of B's reach 0.65: the flag stays below both.
    assert ungrounded_below == 0.35
    assert mod.bands([a])[1] <= mod.bands([a])[0]


def test_the_script_reads_per_item_files_and_prints_one_json_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _script()

    def result(helped: float) -> dict[str, object]:
        return {
            "words": [{"nll_empty": 3.0, "nll_context": 3.0 - helped}, {"nll_empty": 2.0, "nll_context": 1.0}]
        }

    paths = {}
    for kind, (hi, lo) in mod.KEYS.items():
        path = tmp_path / f"{kind}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            for i in range(8):
                fh.write(json.dumps({hi: result(1.0 + i / 10), lo: result(-0.5 + i / 5)}) + "\n")
        paths[kind] = path
    assert mod.main([f"--{k}={p}" for k, p in paths.items()]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["chosen"] in figures["development_mean_auroc"]
    assert set(figures["report"]) == set(mod.KEYS)
    assert figures["report"]["wikieval"]["n_report"] == 4
