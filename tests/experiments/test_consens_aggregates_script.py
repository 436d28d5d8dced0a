"""benchmarks/consens_aggregates.py: the rule that picks the default aggregate and the verdict bands."""

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "consens_aggregates.py"


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


def test_bands_split_at_the_best_balanced_accuracy_and_a_precise_grounded_band() -> None:
    mod = _script()
    grounded = [0.9, 0.8, 0.75, 0.7, 0.6, 0.55, 0.5, 0.45, 0.3, 0.2]
    not_grounded = [0.35, 0.25, 0.15, 0.1, 0.05, 0.0, -0.1, -0.2, -0.3, 0.65]
    grounded_at, ungrounded_below = mod.bands(grounded, not_grounded)
    # Below 0.3: 8 of 10 negatives and 1 of 10 grounded texts (J = 0.7); below 0.45 ties (0.9 - 0.2)
    # and the lower threshold, which flags fewer texts, is kept.
    assert ungrounded_below == 0.3
    # At or above 0.45, 8 of 9 texts are grounded (0.89 < 0.9); the first 90% threshold is 0.7 (4 of 4,
    # the negative at 0.65 is below it).
    assert grounded_at == 0.7
    assert grounded_at >= ungrounded_below


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
