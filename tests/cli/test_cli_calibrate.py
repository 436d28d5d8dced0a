"""``ragsense calibrate``: bands fitted on labelled rows (scored ones read, others scored by the fake
model through the spine), its refusals and row errors; ``--bands`` on evaluate and grounding."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main
from ragsense.consens import DEFAULT_AGGREGATION, Aggregation, Bands, default_bands

AGG = DEFAULT_AGGREGATION.value
OTHER_AGG = next(a.value for a in Aggregation if a is not DEFAULT_AGGREGATION)
CONTEXT = ["David Baker designs proteins in Seattle."]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def scored_rows(n: int = 60, seed: int = 11) -> list[dict[str, Any]]:
    """Rows already scored: label-1 scores uniform in [0.2, 1], label-0 uniform in [-1, 0.1]."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        for label, (lo, hi) in ((1, (0.2, 1.0)), (0, (-1.0, 0.1))):
            rows.append(
                {
                    "id": f"{label}-{k}",
                    "question": "Who designs proteins?",
                    "contexts": CONTEXT,
                    "answer": f"Answer {k}.",
                    "label": label,
                    "consens": rng.uniform(lo, hi),
                    "aggregation": AGG,
                    "verdict": "unsure",
                }
            )
    return rows


def unscored_rows(n: int = 25) -> list[dict[str, Any]]:
    """Rows for the fake model: answers from the context (grounded) or not (ungrounded), one refusal."""
    rows = []
    for k in range(n):
        rows.append(
            {"id": f"g{k}", "question": "Who?", "contexts": [f"David Baker designs proteins {k}."],
             "answer": f"David Baker designs proteins {k}.", "label": 1}
        )  # fmt: skip
        rows.append(
            {"id": f"u{k}", "question": "Who?", "contexts": [f"David Baker designs proteins {k}."],
             "answer": f"Marie Curie studied radium in Warsaw {k}.", "label": 0}
        )  # fmt: skip
    rows.append({"id": "r", "question": "Who?", "contexts": CONTEXT, "answer": "I don't know.", "label": 0})
    return rows


def calibrate(*args: str) -> int:
    return main(["calibrate", *args])


def test_scored_rows_give_the_known_edges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_rows(tmp_path / "labelled.jsonl", scored_rows())
    out = tmp_path / "bands.json"
    # No --model: rows that carry the score are read, never scored (the default model is not loaded).
    assert calibrate(str(src), "-o", str(out), "--target-precision", "1.0") == 0
    bands = Bands.load(out)
    assert bands.score == AGG
    # Both edges fall in the gap between the classes (label 0 below 0.1, label 1 from 0.2).
    top_0 = max(r["consens"] for r in scored_rows() if r["label"] == 0)
    assert top_0 < bands.grounded_at <= 0.2 and top_0 < bands.ungrounded_below < 0.2
    assert str(src) in bands.origin and "120 rows" in bands.origin
    fit = bands.fit
    assert fit["grounded"]["in_sample"]["precision"] == 1.0 == fit["ungrounded"]["in_sample"]["precision"]
    assert fit["grounded"]["cross_validated"]["precision"] == 1.0
    assert (fit["n"], fit["row_errors"], fit["refusals_left_out"], fit["input_rows"]) == (120, 0, 0, 120)
    stdout, stderr = capsys.readouterr()
    assert "grounded" in stdout and "ungrounded" in stdout and "5-fold CV precision" in stdout
    assert "1.00 [0.94, 1.00]" in stdout  # precision 60 of 60 with its Wilson interval
    assert f"--bands {out}" in stderr


def test_unscored_rows_are_scored_through_evaluate_and_refusals_left_out(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "labelled.jsonl", unscored_rows())
    direct = tmp_path / "direct.json"
    assert calibrate(str(src), "-o", str(direct), "--model", "fake", "--min-per-class", "10") == 0
    # The same rows through `evaluate` first, then calibrated from its output: the same fit.
    scored = tmp_path / "scored.jsonl"
    assert (
        main(["evaluate", str(src), "--model", "fake", "--no-store", "-o", str(scored), "--table", "never"])
        == 0
    )
    again = tmp_path / "again.json"
    assert calibrate(str(scored), "-o", str(again), "--min-per-class", "10") == 0
    a, b = Bands.load(direct), Bands.load(again)
    assert (a.grounded_at, a.ungrounded_below) == (b.grounded_at, b.ungrounded_below)
    assert a.fit["refusals_left_out"] == 1 and a.fit["n"] == 50 and a.fit["label_0"] == 25
    assert a.fit["grounded"]["in_sample"]["precision"] == 1.0


def test_another_aggregation_is_read_from_the_scores_an_evaluate_output_carries(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "labelled.jsonl", unscored_rows())
    scored = tmp_path / "scored.jsonl"
    assert (
        main(["evaluate", str(src), "--model", "fake", "--no-store", "-o", str(scored), "--table", "never"])
        == 0
    )
    out = tmp_path / "bands.json"
    assert calibrate(str(scored), "-o", str(out), "--aggregation", OTHER_AGG, "--min-per-class", "10") == 0
    assert Bands.load(out).score == OTHER_AGG
    # A CSV output holds labels and scores as text and nested fields as JSON text: the same fit.
    as_csv, from_csv = tmp_path / "scored.csv", tmp_path / "from-csv.json"
    assert (
        main(["evaluate", str(src), "--model", "fake", "--no-store", "-o", str(as_csv), "--table", "never"])
        == 0
    )
    assert (
        calibrate(str(as_csv), "-o", str(from_csv), "--aggregation", OTHER_AGG, "--min-per-class", "10") == 0
    )
    a, b = Bands.load(out), Bands.load(from_csv)
    assert (a.grounded_at, a.ungrounded_below, a.fit["refusals_left_out"]) == (
        b.grounded_at,
        b.ungrounded_below,
        b.fit["refusals_left_out"],
    )


def test_too_few_rows_of_a_class_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = scored_rows(30)
    src = write_rows(tmp_path / "labelled.jsonl", [r for r in rows if r["label"] == 0] + rows[:10:2])
    out = tmp_path / "bands.json"
    assert calibrate(str(src), "-o", str(out)) == 2
    err = capsys.readouterr().err
    assert "too few labelled rows" in err and "5 grounded (label 1)" in err and "at least 20" in err
    assert not out.exists()
    assert calibrate(str(src), "-o", str(out), "--min-per-class", "5") == 0  # the threshold is a flag


def test_malformed_labels_are_row_errors_naming_row_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = scored_rows(30)
    bad = [
        {**good[0], "id": "no-label", "label": None},
        {**good[0], "id": "word", "label": "yes"},
        {**good[0], "id": "two", "label": 2},
        {**good[0], "id": "nan", "consens": None},
        {**good[0], "id": "other-agg", "aggregation": OTHER_AGG},
    ]
    missing = {k: v for k, v in good[0].items() if k != "label"}
    src = write_rows(tmp_path / "labelled.jsonl", [*good, *bad, {**missing, "id": "absent"}])
    out = tmp_path / "bands.json"
    assert calibrate(str(src), "-o", str(out)) == 3  # written from the good rows; the bad ones listed
    err = capsys.readouterr().err
    for rid in ("no-label", "word", "two", "absent"):
        assert f"row {rid}, field 'label'" in err
    assert "row nan, field 'consens': expected a finite score" in err
    assert f"row other-agg, field 'aggregation': scored with {OTHER_AGG}" in err
    assert Bands.load(out).fit["row_errors"] == 6 and Bands.load(out).fit["n"] == 60


def test_an_existing_output_is_kept_without_overwrite(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "labelled.jsonl", scored_rows())
    out = tmp_path / "bands.json"
    out.write_text("keep me")
    assert calibrate(str(src), "-o", str(out)) == 2
    assert out.read_text() == "keep me"
    assert calibrate(str(src), "-o", str(out), "--overwrite") == 0


def test_too_few_labels_names_the_rows_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"question": "q", "contexts": ["c"], "answer": "a", "label": bad} for bad in (2, "yes")]
    src = write_rows(tmp_path / "labelled.jsonl", rows)
    assert calibrate(str(src), "-o", str(tmp_path / "b.json")) == 2
    err = capsys.readouterr().err
    assert "too few labelled rows" in err and "2 row(s) left out as unusable" in err
    assert "field 'label': expected grounded/1/true, ungrounded/0/false, unsure or refusal, got 2" in err


@pytest.mark.parametrize(("flag", "value"), [("--target-precision", "0"), ("--folds", "1")])  # 1.5: argparse
def test_bad_settings_exit_2(
    tmp_path: Path, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_rows(tmp_path / "labelled.jsonl", scored_rows())
    assert calibrate(str(src), "-o", str(tmp_path / "b.json"), flag, value) == 2
    assert flag in capsys.readouterr().err


# --------------------------------------------------------------------------- --bands on scoring commands


@pytest.fixture
def strict_bands(tmp_path: Path) -> Path:
    """Bands of the default aggregation under which the fake model's grounded answer is 'unsure'."""
    path = tmp_path / "strict.json"
    Bands(AGG, grounded_at=1.5, ungrounded_below=-0.5, origin="strict test bands").save(path)
    return path


def test_evaluate_and_grounding_use_the_bands_file(tmp_path: Path, strict_bands: Path) -> None:
    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(1)[:1])
    for command in ("evaluate", "grounding"):
        plain, banded = tmp_path / f"{command}-plain.jsonl", tmp_path / f"{command}-banded.jsonl"
        base = [command, str(src), "--model", "fake", "--no-store", "--table", "never"]
        assert main([*base, "-o", str(plain)]) == 0
        assert main([*base, "-o", str(banded), "--bands", str(strict_bands)]) == 0
        [p] = [json.loads(line) for line in plain.read_text().splitlines()]
        [b] = [json.loads(line) for line in banded.read_text().splitlines()]
        assert p["consens"] == b["consens"] < 1.5
        assert p["verdict"] == default_bands().verdict(p["consens"]) and b["verdict"] == "unsure"


def test_evaluate_records_the_bands_in_the_run_store(tmp_path: Path, strict_bands: Path) -> None:
    from ragsense.runs import RunStore

    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(2))
    store = tmp_path / "runs.sqlite"
    base = ["evaluate", str(src), "--model", "fake", "--store", str(store), "--table", "never"]
    assert main([*base, "--metrics", "attribution", "--bands", str(strict_bands), "--tag", "strict"]) == 0
    assert main([*base, "--tag", "plain"]) == 0
    strict, plain = RunStore(store).get("strict"), RunStore(store).get("plain")
    assert strict.metrics[0]["settings"]["bands"] == Bands.load(strict_bands).to_dict()
    assert plain.metrics[0]["settings"]["bands"] == default_bands().to_dict()


def test_runs_show_and_compare_name_the_bands(
    tmp_path: Path, strict_bands: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(2))
    store = tmp_path / "runs.sqlite"
    base = ["evaluate", str(src), "--model", "fake", "--store", str(store), "--table", "never"]
    assert main([*base, "--bands", str(strict_bands), "--tag", "strict"]) == 0
    assert main([*base, "--tag", "plain"]) == 0
    capsys.readouterr()
    assert main(["runs", "show", "strict", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "bands: grounded >= +1.50, ungrounded < -0.50" in shown and "(strict test bands)" in shown
    assert main(["compare", "plain", "strict", "--store", str(store)]) == 0
    err = capsys.readouterr().err
    assert "different verdict bands" in err and "strict test bands" in err and "(default)" in err


def test_bands_fitted_on_another_aggregation_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    Bands(OTHER_AGG, grounded_at=0.5, ungrounded_below=0.1).save(other)
    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(1))
    for command in ("evaluate", "grounding"):
        out = tmp_path / f"{command}.jsonl"
        assert (
            main([command, str(src), "--model", "fake", "--no-store", "-o", str(out), "--bands", str(other)])
            == 2
        )
        err = capsys.readouterr().err
        assert f"fitted on {OTHER_AGG} scores; this score is {AGG}" in err
        assert not out.exists()
    # With the matching --aggregation the same file is used.
    args = ["evaluate", str(src), "--model", "fake", "--no-store", "--table", "never"]
    assert main([*args, "--bands", str(other), "--aggregation", OTHER_AGG]) == 0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "is not JSON"),
        ('{"format": "something/9", "score": "q25"}', "not a ragsense bands file"),
        ('{"format": "ragsense.bands/1", "score": "q25"}', "missing field(s) grounded_at, ungrounded_below"),
        (
            '{"format": "ragsense.bands/1", "score": "q25", "grounded_at": -0.5, "ungrounded_below": 0.5}',
            "is above grounded_at",
        ),
    ],
)
def test_a_malformed_bands_file_is_refused_with_a_clear_message(
    tmp_path: Path, text: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(1))
    assert main(["evaluate", str(src), "--model", "fake", "--no-store", "--bands", str(bad)]) == 2
    err = capsys.readouterr().err
    assert words in err and "bands" in err


def test_a_missing_bands_file_and_bands_without_consens_exit_2(
    tmp_path: Path, strict_bands: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_rows(tmp_path / "rows.jsonl", unscored_rows(1))
    args = ["evaluate", str(src), "--model", "fake", "--no-store"]
    assert main([*args, "--bands", str(tmp_path / "nowhere.json")]) == 2
    assert "cannot read bands file" in capsys.readouterr().err
    assert main([*args, "--metrics", "similarity", "--bands", str(strict_bands)]) == 2
    assert "--bands sets the verdicts of consens or attribution" in capsys.readouterr().err


@pytest.mark.model
def test_calibrate_with_the_bundled_model(tmp_path: Path) -> None:
    """Once on the real default model, as a user labels a small set (words, a refusal labelled
    grounded, the folds left to the data): rows scored through evaluate, finite edges, a usable file."""
    rows = [
        {"id": f"g{k}", "question": q, "contexts": [c], "answer": a, "label": "grounded"}
        for k, (q, c, a) in enumerate(FACTS)
    ] + [
        {"id": f"u{k}", "question": q, "contexts": [c], "answer": wrong, "label": "ungrounded"}
        for k, ((q, c, _), wrong) in enumerate(zip(FACTS, WRONG, strict=True))
    ]
    rows.append({"id": "ref", "question": "What colour is it?", "contexts": CONTEXT, "label": "grounded",
                 "answer": "The documents do not say what colour it is."})  # fmt: skip
    src = write_rows(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "bands.json"
    args = ["-o", str(out), "--min-per-class", "5", "--min-called", "3", "--threads", "1"]
    assert calibrate(str(src), *args) == 0
    bands = Bands.load(out)
    assert bands.score == AGG and bands.fit["n"] == 12 and bands.fit["refusals_left_out"] == 1
    assert bands.fit["folds"] == 5 and bands.fit["label_1"] == 6
    assert -1.0 <= bands.ungrounded_below <= bands.grounded_at
    # The file works where it is meant to: evaluate reads it back for the same aggregation.
    args = ["evaluate", str(src), "--no-store", "--table", "never", "--threads", "1", "--bands", str(out)]
    assert main(args) == 0


FACTS = [
    ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.", "It stands in Paris."),
    ("Who designs proteins?", "David Baker designs proteins in Seattle.", "David Baker designs them."),
    ("What is the boiling point of water?", "Water boils at 100 degrees Celsius at sea level.",
     "Water boils at 100 degrees Celsius."),
    ("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare.", "Shakespeare wrote it."),
    ("What is the capital of Japan?", "Tokyo is the capital of Japan.", "The capital is Tokyo."),
    ("What do bees make?", "Honey bees make honey from the nectar of flowers.", "Bees make honey."),
]  # fmt: skip
WRONG = [
    "It stands in Rome.",
    "Marie Curie designs them.",
    "Water boils at 40 degrees Celsius.",
    "Charles Dickens wrote it.",
    "The capital is Osaka.",
    "Bees make silk from leaves.",
]


# ----------------------------------------------------------------- a user's small labelled set (issue 37)


def small_labelled_set(path: Path, grounded: Any = "grounded", ungrounded: Any = "ungrounded") -> Path:
    """What the issue's user had: a handful of rows labelled in words, two of them correct refusals
    labelled grounded (a good answer), unscored."""
    rows = []
    for k, (question, context, _answer) in enumerate(FACTS[:4]):
        rows.append({"id": f"g{k}", "question": question, "contexts": [context], "answer": context,
                     "label": grounded})  # fmt: skip
        rows.append({"id": f"u{k}", "question": question, "contexts": [context], "answer": WRONG[k] +
                     " It was painted green by Marie Curie in 1740.", "label": ungrounded})  # fmt: skip
    for k in range(2):
        rows.append({"id": f"ref{k}", "question": "What colour is the lighthouse?", "contexts": CONTEXT,
                     "answer": "The documents do not say what colour it is.", "label": grounded})  # fmt: skip
    return write_rows(path, rows)


def test_a_small_labelled_set_works_on_the_first_try(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = small_labelled_set(tmp_path / "mine.jsonl")
    out = tmp_path / "bands.json"
    # 4 rows of each class: at the default precision and 5 rows per edge, no band can call anything.
    assert calibrate(str(src), "-o", str(out), "--model", "fake", "--min-per-class", "3") == 2
    captured = capsys.readouterr()
    assert not out.exists()
    # The counts are the fit's: the two refusals (labelled grounded) are left out and said so.
    assert "from 8 of 10 rows" in captured.out and "4 grounded, 4 not" in captured.out
    assert "left out: 2 rows whose answer is a refusal (labelled grounded)" in captured.out
    assert "4 folds, chosen from the data" in captured.out  # not 5: a class has 4 rows
    assert "no grounded edge reaches precision 0.9" in captured.err and "none were written" in captured.err
    assert "The most these rows support (in-sample): grounded" in captured.err
    # The per-edge minimum is a flag: with 3 rows per edge the same rows give bands.
    assert (
        calibrate(str(src), "-o", str(out), "--model", "fake", "--min-per-class", "3", "--min-called", "3")
        == 0
    )
    bands = Bands.load(out)
    assert (bands.fit["label_1"], bands.fit["label_0"], bands.fit["folds"]) == (4, 4, 4)
    assert bands.fit["left_out"] == {"verdict refusal, labelled grounded": 2}
    assert bands.fit["min_called"] == 3 and bands.fit["grounded"]["calls"]


@pytest.mark.parametrize(("grounded", "ungrounded"), [(1, 0), ("1", "0"), (True, False), ("TRUE", "false")])
def test_every_label_vocabulary_gives_the_same_fit(tmp_path: Path, grounded: Any, ungrounded: Any) -> None:
    words, other = tmp_path / "words.json", tmp_path / "other.json"
    base = ["--model", "fake", "--min-per-class", "3", "--min-called", "3"]
    assert calibrate(str(small_labelled_set(tmp_path / "w.jsonl")), "-o", str(words), *base) == 0
    src = small_labelled_set(tmp_path / "o.jsonl", grounded, ungrounded)
    assert calibrate(str(src), "-o", str(other), *base) == 0
    a, b = Bands.load(words), Bands.load(other)
    assert (a.grounded_at, a.ungrounded_below, a.fit["label_1"]) == (b.grounded_at, b.ungrounded_below, 4)


def test_rows_labelled_unsure_or_refusal_are_left_out_and_counted(tmp_path: Path) -> None:
    rows = scored_rows(20)
    rows += [{**rows[0], "id": "u", "label": "unsure"}, {**rows[1], "id": "r", "label": "refusal"}]
    rows += [{**rows[2], "id": "v", "verdict": "refusal", "label": 0}]
    src = write_rows(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "bands.json"
    assert calibrate(str(src), "-o", str(out), "--min-per-class", "10") == 0
    fit = Bands.load(out).fit
    assert fit["n"] == 40 and fit["row_errors"] == 0
    assert fit["left_out"] == {
        "labelled refusal": 1,
        "labelled unsure": 1,
        "verdict refusal, labelled ungrounded": 1,
    }


def test_too_few_rows_after_refusals_names_what_was_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three rows labelled grounded, two of them refusals: the labels pass the count, the fit's rows do not.
    rows = scored_rows(3)
    for row in rows[:4:2]:
        row["verdict"] = "refusal"
    src = write_rows(tmp_path / "labelled.jsonl", rows)
    assert calibrate(str(src), "-o", str(tmp_path / "b.json"), "--min-per-class", "2") == 2
    err = capsys.readouterr().err
    assert "1 grounded (label 1) and 3 not" in err
    assert "after leaving out 2 rows whose answer is a refusal (labelled grounded)" in err


def test_no_band_at_the_target_exits_2_and_says_what_the_rows_support(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Scores that separate the classes only so far: the best grounded edge is 4 of 5 (0.8).
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    labels = [1, 0, 1, 1, 1, 0, 1, 0, 0, 0]
    rows = [
        {**scored_rows(1)[0], "id": f"r{k}", "consens": s, "label": y}
        for k, (s, y) in enumerate(zip(scores, labels, strict=True))
    ]
    src = write_rows(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "bands.json"
    assert calibrate(str(src), "-o", str(out), "--min-per-class", "5") == 2
    err = capsys.readouterr().err
    assert "grounded 0.80 (4 of 5 rows)" in err and "rerun with --target-precision 0.8;" in err
    assert not out.exists()
    assert calibrate(str(src), "-o", str(out), "--min-per-class", "5", "--target-precision", "0.8") == 0
    assert Bands.load(out).fit["grounded"]["in_sample"]["precision"] == 0.8
