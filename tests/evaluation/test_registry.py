"""Naming metrics: built-ins, combined names, errors, and a third-party metric plugged in through a real
``ragsense.metrics`` entry point (an installed distribution's metadata on sys.path), from Python and
from ``ragsense evaluate``."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main
from ragsense.consens import ConSens
from ragsense.correctness import Correctness
from ragsense.errors import ParameterError
from ragsense.evaluation import (
    DEFAULT_METRICS,
    ENTRY_POINT_GROUP,
    Metric,
    available_metrics,
    create_metric,
    evaluate,
    resolve_metrics,
)
from ragsense.similarity import Similarity
from ragsense.vera import Vera

BUILTINS = {
    "consens": ConSens,
    "attribution": ConSens,
    "vera": Vera,
    "correctness": Correctness,
    "similarity": Similarity,
}

ROWS = [
    {"id": "a", "question": "Who designs proteins?", "contexts": ["David Baker designs proteins."],
     "answer": "David Baker."},
    {"id": "b", "question": "What do cats do?", "contexts": ["Cats purr."], "answer": "Cats purr loudly."},
]  # fmt: skip


def test_builtin_names_resolve() -> None:
    registered = available_metrics()
    assert set(BUILTINS) <= set(registered)
    assert registered["consens"] == "ragsense.consens:ConSens"
    assert ENTRY_POINT_GROUP == "ragsense.metrics" and DEFAULT_METRICS == ("consens",)
    for name, cls in BUILTINS.items():
        options = {} if name == "similarity" else {"model": "fake"}
        if name == "correctness":  # needs a trained estimator: resolving the name says so
            with pytest.raises(ParameterError, match="estimator"):
                create_metric(name, **options)
            continue
        metric = create_metric(name, **options)
        assert isinstance(metric, cls) and isinstance(metric, Metric)
    assert [m.name for m in resolve_metrics(None, model="fake")] == ["consens"]


def test_shared_options_are_dropped_where_not_taken_but_aimed_ones_must_be_taken() -> None:
    # The model of a run goes to every metric named; the similarity baseline has none, so it is dropped.
    [similarity] = resolve_metrics("similarity", model="fake", model_options={"device": "cpu"})
    assert isinstance(similarity, Similarity)
    # Aimed at one metric, an option it does not take is an error listing the ones it does.
    with pytest.raises(ParameterError, match="takes no option 'model'") as info:
        create_metric("similarity", model="fake")
    assert info.value.parameter == "model" and "it accepts: embedder, mode" in str(info.value)
    with pytest.raises(ParameterError, match=r"the metric 'consens' takes no option 'agregation'") as info:
        create_metric("consens", model="fake", agregation="q25")
    message = str(info.value)
    assert "did you mean 'aggregation'?" in message
    for accepted in ("model", "attribution", "aggregation", "template", "model_options", "bands"):
        assert accepted in message.partition("it accepts: ")[2]
    with pytest.raises(ParameterError, match="takes no option 'band'"):
        resolve_metrics("consens,similarity", model="fake", per_metric={"consens": {"band": None}})
    # An aimed option wins over the shared one of the same name; None means the metric's default.
    [consens] = resolve_metrics(
        "consens", model="fake", per_metric={"consens": {"model": "fake:other", "aggregation": None}}
    )
    assert isinstance(consens, ConSens) and consens.settings()["model"] == "fake:other"
    assert consens.aggregation.value == ConSens(model="fake").aggregation.value


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ParameterError, match=r"unknown metric 'nope'; registered metrics: .*consens") as info:
        resolve_metrics("consens,nope", model="fake")
    assert info.value.parameter == "metrics"
    for name in BUILTINS:
        assert name in str(info.value)


def test_consens_and_attribution_are_one_consens_with_attribution() -> None:
    for spec in ("consens,attribution", "attribution, consens", ["consens", "attribution"]):
        [metric] = resolve_metrics(spec, model="fake")
        assert isinstance(metric, ConSens) and metric.attribution
        assert metric.fields[-2:] == ("attribution", "top_document")
    [plain] = resolve_metrics("consens", model="fake")
    assert isinstance(plain, ConSens) and not plain.attribution


def test_names_and_objects_mix_in_order() -> None:
    metrics = resolve_metrics(["similarity", ConSens(model="fake")], model="fake")
    assert [m.name for m in metrics] == ["similarity", "consens"]


def test_duplicate_names_are_an_error() -> None:
    specs: list[str | list[str | Metric]] = [
        "consens,consens",
        "attribution,attribution",
        ["consens", ConSens(model="fake")],
    ]
    for spec in specs:
        with pytest.raises(ParameterError, match="metric 'consens' is named twice"):
            resolve_metrics(spec, model="fake")


def test_empty_or_wrong_metrics_are_errors() -> None:
    with pytest.raises(ParameterError, match="name at least one metric"):
        resolve_metrics(" , ", model="fake")
    with pytest.raises(ParameterError, match="is not a Metric"):
        resolve_metrics([object()], model="fake")  # type: ignore[list-item]


# ------------------------------------------------------------------------------ a third-party plug-in

PLUGIN = '''
"""A third-party metric: the answer's length in words."""

from ragsense.evaluation import Needs


class AnswerLength:
    name = "answer_length"
    needs = Needs(("answer",))
    fields = ("answer_length",)
    scores = ("answer_length",)
    verdict = None

    def __init__(self):
        self.ready = False

    def settings(self):
        return {"unit": "words"}

    async def setup(self, pool):
        self.ready = True

    async def score(self, rows):
        assert self.ready
        return [
            ValueError("cannot measure BOOM") if row.answer == "BOOM"
            else {"answer_length": len(row.answer.split())}
            for row in rows
        ]

    async def aclose(self):
        self.ready = False
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``fakeplug`` installed on sys.path: its module and its dist-info with the entry point."""
    site = tmp_path / "site"
    info = site / "fakeplug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nanswer_length = fakeplug_mod:AnswerLength\n"
    )
    (site / "fakeplug_mod.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("fakeplug_mod", None)


def test_a_plugin_metric_is_registered_through_its_entry_point(plugin: Path) -> None:
    registered = available_metrics()
    assert registered["answer_length"] == "fakeplug_mod:AnswerLength"
    assert set(BUILTINS) <= set(registered)
    metric = create_metric("answer_length")
    assert type(metric).__module__ == "fakeplug_mod" and isinstance(metric, Metric)
    # The run's model is a shared option, dropped for a metric without one; aimed at it, an error.
    [shared] = resolve_metrics("answer_length", model="fake", model_options={})
    assert shared.name == "answer_length"
    with pytest.raises(
        ParameterError, match=r"'answer_length' takes no option 'model'; it accepts: no options"
    ):
        create_metric("answer_length", model="fake")
    with pytest.raises(ParameterError, match=r"registered metrics: .*answer_length"):
        create_metric("nope")


def test_evaluate_runs_a_plugin_metric_beside_a_builtin(plugin: Path) -> None:
    rows: list[dict[str, Any]] = [*ROWS, {**ROWS[0], "id": "c", "answer": "BOOM"}]
    run = evaluate(rows, "consens,answer_length", model="fake", progress=False)
    assert [r["answer_length"] for r in run.rows] == [2, 3, None]
    assert all(isinstance(r["consens"], float) for r in run.rows)  # consens scored row c too
    assert run.rows[2]["errors"] == [
        {"metric": "answer_length", "field": None, "message": "ValueError: cannot measure BOOM"}
    ]
    summary = run.summary()
    assert summary.metrics["answer_length"].n == 2
    assert summary.metrics["answer_length"].scores["answer_length"].mean == pytest.approx(2.5)
    assert [m.settings for m in run.metrics if m.name == "answer_length"] == [{"unit": "words"}]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_evaluate_runs_a_plugin_metric(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_rows(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    args = ["evaluate", str(source), "-o", str(out), "--metrics", "consens,answer_length", "--model", "fake"]
    assert main(args) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["answer_length"] for r in rows] == [2, 3]
    assert all(r["errors"] == [] and isinstance(r["consens"], float) for r in rows)
    captured = capsys.readouterr()
    assert "answer l" in captured.out.splitlines()[0]  # its score is a table column
    assert "answer_length: n=2" in captured.err and f"written to {out}" in captured.err
    # A CSV output through the same flags.
    assert main([*args[:3], str(tmp_path / "out.csv"), *args[4:]]) == 0
    assert (tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()[0].count("answer_length") == 1


def test_cli_exit_code_3_when_a_row_errors(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_rows(tmp_path / "in.jsonl", [*ROWS, {**ROWS[0], "id": "c", "answer": "BOOM"}])
    out = tmp_path / "out.jsonl"
    code = main(
        ["evaluate", str(source), "-o", str(out), "--metrics", "consens,answer_length", "--model", "fake"]
    )
    assert code == 3
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["answer_length"] for r in rows] == [2, 3, None]
    assert [[e["metric"] for e in r["errors"]] for r in rows] == [[], [], ["answer_length"]]
    assert "row 2: answer_length" in capsys.readouterr().err


def test_cli_exit_code_2_for_an_unknown_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_rows(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    code = main(["evaluate", str(source), "-o", str(out), "--metrics", "consens,nope", "--model", "fake"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown metric 'nope'" in err and "consens" in err
    assert not out.exists()
    assert main(["evaluate", str(source), "--metrics", "consens,consens", "--model", "fake"]) == 2
    assert "named twice" in capsys.readouterr().err


def test_consens_scored_before_setup_says_so() -> None:
    import asyncio

    from ragsense.data import RagRow

    row = RagRow(id="1", question="Who?", contexts=["Ada wrote it."], answer="Ada.")
    with pytest.raises(ParameterError, match="call setup"):
        asyncio.run(ConSens("fake").score([row]))
