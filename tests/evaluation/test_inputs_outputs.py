"""evaluate: every kind of input gives the same scores; every output format keeps the rows whole;
the Evaluation's summary and DataFrame."""

from __future__ import annotations

import csv
import doctest
import importlib
import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ragsense.consens import VERDICTS
from ragsense.data import RagRow
from ragsense.errors import BackendUnavailableError, ParameterError
from ragsense.evaluation import Evaluation, MetricInfo, Needs, evaluate
from ragsense.evaluation._evaluation import summarize
from ragsense.evaluation._runner import RunStats
from ragsense.models import ModelPool
from ragsense.stats import mean_ci, share_ci

ROWS: list[dict[str, Any]] = [
    {
        "id": "a",
        "question": "Who designs proteins?",
        "contexts": ["David Baker designs proteins.", "He works in Seattle."],
        "answer": "David Baker, in Seattle.",
        "reference": "David Baker.",
    },
    {
        "id": "b",
        "question": "Where is the Eiffel Tower?",
        "contexts": ["The Eiffel Tower stands in Paris."],
        "answer": "It stands in Paris, France.",
    },
    {
        "id": "c",
        "question": "What do cats do?",
        "contexts": ["Cats purr.", "Dogs bark."],
        "answer": "Cats purr loudly.",
        "reference": "They purr.",
    },
]


class ReferenceLength:
    """A metric that needs a reference: shows whether an input's missing reference reads as absent."""

    name = "reference_length"
    needs = Needs(("reference",))
    fields = ("reference_length",)
    scores = ("reference_length",)
    verdict = None

    def settings(self) -> dict[str, Any]:
        return {}

    async def setup(self, pool: ModelPool) -> None:
        pass

    async def score(self, rows: Any) -> list[dict[str, Any] | Exception]:
        return [{"reference_length": len(row.reference)} for row in rows]

    async def aclose(self) -> None:
        pass


def scores_of(data: Any, **options: Any) -> list[tuple[str, float, int | None, list[str]]]:
    """Per row: id, consens, the reference length (None without a reference) and the erring metrics."""
    run = evaluate(data, ["consens", ReferenceLength()], model="fake", progress=False, **options)
    return [
        (r["id"], r["consens"], r["reference_length"], [e["metric"] for e in r["errors"]]) for r in run.rows
    ]


@pytest.fixture(scope="module")
def expected() -> list[tuple[str, float, int | None, list[str]]]:
    out = scores_of(ROWS)
    assert [(i, n, m) for i, _, n, m in out] == [
        ("a", 12, []),
        ("b", None, ["reference_length"]),
        ("c", 10, []),
    ]
    assert all(isinstance(c, float) and math.isfinite(c) for _, c, _, _ in out)
    assert len({c for _, c, _, _ in out}) == 3  # distinct rows, distinct scores
    return out


# --------------------------------------------------------------------------------------------- inputs


def test_list_of_dicts_and_ragrows(expected: list[Any]) -> None:
    mixed: list[Any] = [RagRow(**ROWS[0]), ROWS[1], RagRow(**ROWS[2])]
    assert scores_of(mixed) == expected
    assert scores_of(iter(ROWS)) == expected  # any iterable


def test_pandas_dataframe_with_a_nan_reference(expected: list[Any]) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(ROWS)
    assert isinstance(frame.loc[1, "reference"], float) and math.isnan(frame.loc[1, "reference"])
    assert scores_of(frame) == expected
    run = evaluate(frame, "consens", model="fake", progress=False)
    assert "reference" not in run.rows[1]  # absent, not NaN
    assert run.rows[0]["contexts"] == ROWS[0]["contexts"]


def test_hugging_face_dataset(expected: list[Any]) -> None:
    datasets = pytest.importorskip("datasets")
    assert scores_of(datasets.Dataset.from_list(ROWS)) == expected


def test_parquet_file(tmp_path: Path, expected: list[Any]) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert scores_of(path) == expected
    assert scores_of(str(path)) == expected


def test_csv_file(tmp_path: Path, expected: list[Any]) -> None:
    path = tmp_path / "in.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ["id", "question", "contexts", "answer", "reference"])
        writer.writeheader()
        for row in ROWS:
            writer.writerow({**row, "contexts": json.dumps(row["contexts"])})
    assert scores_of(path) == expected


def test_json_and_jsonl_files(tmp_path: Path, expected: list[Any]) -> None:
    (tmp_path / "in.json").write_text(json.dumps(ROWS), encoding="utf-8")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    assert scores_of(tmp_path / "in.json") == expected
    assert scores_of(tmp_path / "in.jsonl") == expected


def test_ragas_evaluation_dataset_is_read_by_duck_typing(
    monkeypatch: pytest.MonkeyPatch, expected: list[Any]
) -> None:
    # ragas is not installed: a stand-in class whose module is ragas's, with EvaluationDataset.to_list().
    module = types.ModuleType("ragas.dataset_schema")

    class EvaluationDataset:
        def __init__(self, samples: list[dict[str, Any]]) -> None:
            self.samples = samples

        def to_list(self) -> list[dict[str, Any]]:
            return [dict(s) for s in self.samples]

    EvaluationDataset.__module__ = module.__name__
    module.EvaluationDataset = EvaluationDataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    samples = [
        {
            "id": r["id"],
            "user_input": r["question"],
            "retrieved_contexts": r["contexts"],
            "response": r["answer"],
            "reference": r.get("reference"),
        }
        for r in ROWS
    ]
    dataset = module.EvaluationDataset(samples)
    assert scores_of(dataset) == expected
    run = evaluate(dataset, "consens", model="fake", progress=False)
    # Output rows keep RAGAS's own names.
    assert {"user_input", "retrieved_contexts", "response"} <= set(run.rows[0])
    assert "question" not in run.rows[0] and "reference" not in run.rows[1]


def test_what_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"cannot read rows from a builtins\.dict"):
        evaluate({"question": "Q?"}, "consens", model="fake", progress=False)
    with pytest.raises(ParameterError, match=r"cannot read rows from a builtins\.int"):
        evaluate(3, "consens", model="fake", progress=False)


def test_an_unreadable_row_is_an_input_error_and_the_others_are_scored() -> None:
    run = evaluate([ROWS[0], {"answer": "no question"}], "consens", model="fake", progress=False)
    assert run.rows[0]["errors"] == [] and run.rows[0]["consens"] is not None
    assert [(e["metric"], e["field"]) for e in run.rows[1]["errors"]] == [("input", "question")]
    assert run.rows[1]["consens"] is None and run.has_errors


# -------------------------------------------------------------------------------------------- outputs


def reference_run(**options: Any) -> Evaluation:
    return evaluate(ROWS, "consens", model="fake", progress=False, **options)


def with_error_row() -> list[dict[str, Any]]:
    return [*ROWS, {"id": "d", "question": "Q?", "contexts": ["C."]}]  # no answer: a consens error


def test_jsonl_output_is_written_as_the_run_goes(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run = evaluate(with_error_row(), "consens", model="fake", progress=False, output=out)
    back = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # The file also keeps each row's input fingerprint, for --resume (issue 25); the rows do not.
    assert all(len(r.pop("_input")) == 32 for r in back)
    assert back == run.rows
    assert back[3]["errors"] == [
        {"metric": "consens", "field": "answer", "message": "'answer' is missing or empty (consens needs it)"}
    ]
    assert isinstance(back[0]["words"], list) and isinstance(back[0]["consens_by_aggregation"], dict)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_csv_output_keeps_values_and_nested_fields_as_json(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    run = evaluate(with_error_row(), "consens", model="fake", progress=False, output=out, chunk_size=2)
    assert not (tmp_path / "out.csv.partial.jsonl").exists()  # the working file is gone
    back = csv_rows(out)
    assert [r["id"] for r in back] == ["a", "b", "c", "d"]
    assert [float(r["consens"]) for r in back[:3]] == [r["consens"] for r in run.rows[:3]]
    assert back[3]["consens"] == ""  # null
    assert json.loads(back[3]["errors"]) == run.rows[3]["errors"]
    assert json.loads(back[0]["errors"]) == []
    assert json.loads(back[0]["words"]) == run.rows[0]["words"]
    assert json.loads(back[0]["consens_by_aggregation"]) == run.rows[0]["consens_by_aggregation"]
    assert json.loads(back[0]["contexts"]) == ROWS[0]["contexts"]
    assert [int(r["_row"]) for r in back] == [0, 1, 2, 3]
    # save() writes the same file.
    run.save(tmp_path / "saved.csv")
    assert (tmp_path / "saved.csv").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_parquet_output_keeps_values_and_nested_fields(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.parquet"
    run = evaluate(with_error_row(), "consens", model="fake", progress=False, output=out)
    assert not (tmp_path / "out.parquet.partial.jsonl").exists()
    table = pq.read_table(out)
    back = table.to_pylist()
    assert table.column_names == list(run.rows[0])
    assert [r["consens"] for r in back] == [r["consens"] for r in run.rows]
    assert back[3]["consens"] is None
    assert [json.loads(r["errors"]) for r in back] == [r["errors"] for r in run.rows]  # JSON text
    assert json.loads(back[0]["words"]) == run.rows[0]["words"]
    assert back[0]["contexts"] == ROWS[0]["contexts"]  # a list of strings stays a list
    assert [r["_row"] for r in back] == [0, 1, 2, 3]
    run.save(tmp_path / "saved.parquet")
    assert pq.read_table(tmp_path / "saved.parquet").to_pylist() == back


def test_save_to_jsonl(tmp_path: Path) -> None:
    run = reference_run()
    path = run.save(tmp_path / "deep" / "out.jsonl")
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == run.rows


class Interrupting:
    """A metric that is interrupted (Ctrl-C) on its ``at``-th call, and otherwise counts words."""

    name = "words_n"
    needs = Needs(("answer",))
    fields = ("words_n",)
    scores = ("words_n",)
    verdict = None

    def __init__(self, at: int | None = None) -> None:
        self.at = at
        self.calls: list[list[str]] = []

    def settings(self) -> dict[str, Any]:
        return {}

    async def setup(self, pool: ModelPool) -> None:
        pass

    async def score(self, rows: Any) -> list[dict[str, Any] | Exception]:
        if len(self.calls) == self.at:
            raise KeyboardInterrupt
        self.calls.append([row.id for row in rows])
        return [{"words_n": len(row.answer.split())} for row in rows]

    async def aclose(self) -> None:
        pass


def test_resume_of_a_csv_run_continues_from_its_working_file(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.csv"
    evaluate(ROWS, ["consens", Interrupting()], model="fake", progress=False, output=fresh, chunk_size=1)
    out = tmp_path / "out.csv"
    working = tmp_path / "out.csv.partial.jsonl"
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            ROWS, ["consens", Interrupting(at=2)], model="fake", progress=False, output=out, chunk_size=1
        )
    assert not out.exists()
    assert [json.loads(line)["_row"] for line in working.read_text().splitlines()] == [0, 1]
    with pytest.raises(FileExistsError):  # the working file is an existing output too
        evaluate(ROWS, ["consens", Interrupting()], model="fake", progress=False, output=out, chunk_size=1)
    metric = Interrupting()
    run = evaluate(
        ROWS, ["consens", metric], model="fake", progress=False, output=out, chunk_size=1, resume=True
    )
    assert metric.calls == [["c"]]  # only the chunk that was not done
    assert run.stats.n_resumed == 2 and run.summary().n_resumed == 2
    assert not working.exists()
    assert out.read_text(encoding="utf-8") == fresh.read_text(encoding="utf-8")


def test_existing_output_needs_overwrite_or_resume(tmp_path: Path) -> None:
    for name in ("out.jsonl", "out.csv", "out.parquet"):
        out = tmp_path / name
        out.write_text("old\n")
        with pytest.raises(FileExistsError, match="overwrite"):
            reference_run(output=out)
        assert out.read_text() == "old\n"
        reference_run(output=out, overwrite=True)
        assert out.read_bytes() != b"old\n"


def test_unknown_output_suffix_is_a_parameter_error(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"output: .*use a \.jsonl, \.csv or \.parquet"):
        reference_run(output=tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ParameterError, match="output"):
        reference_run().save(tmp_path / "out.xlsx")


def test_resume_to_stdout_is_refused() -> None:
    from ragsense.errors import ResumeError

    with pytest.raises(ResumeError, match="standard output"):
        reference_run(output="-", resume=True)


# ------------------------------------------------------------------------------- Evaluation, summary


def test_to_pandas() -> None:
    pytest.importorskip("pandas")
    run = evaluate(with_error_row(), "consens", model="fake", progress=False)
    frame = run.to_pandas()
    assert list(frame.columns) == list(run.rows[0])
    assert len(frame) == 4 and frame["id"].tolist() == ["a", "b", "c", "d"]
    assert frame["consens"].tolist()[:3] == [r["consens"] for r in run.rows[:3]]
    assert frame["errors"].tolist()[3][0]["metric"] == "consens"


def test_missing_optional_packages_name_their_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    run = reference_run()
    run.save(tmp_path / "in.parquet")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(BackendUnavailableError, match=r"Evaluation\.to_pandas\(\).*ragsense\[pandas\]"):
        run.to_pandas()
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(BackendUnavailableError, match=r"ragsense\[parquet\]"):
        run.save(tmp_path / "out.parquet")
    with pytest.raises(BackendUnavailableError, match=r"ragsense\[parquet\]"):
        evaluate(tmp_path / "in.parquet", "consens", model="fake", progress=False)


def test_summary_mean_ci95_and_verdicts() -> None:
    run = evaluate(with_error_row(), "consens", model="fake", progress=False)
    summary = run.summary()
    values = [r["consens"] for r in run.rows[:3]]
    consens = summary.metrics["consens"]
    assert (summary.n_rows, summary.rows_with_errors, summary.n_resumed) == (4, 1, 0)
    assert (consens.n, consens.errors) == (3, 1)
    score = consens.scores["consens"]
    assert score.n == 3
    assert score.mean == pytest.approx(sum(values) / 3)
    assert (score.mean, *score.ci95) == mean_ci(values)  # the one bootstrap interval of ragsense.stats
    assert -1.0 <= min(values) <= score.ci95[0] <= score.mean <= score.ci95[1] <= max(values) <= 1.0
    verdicts: dict[str, int] = {}
    for r in run.rows[:3]:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    assert consens.verdicts == verdicts and sum(verdicts.values()) == 3
    # Every declared verdict has a share, in the declared order, zero counts included.
    assert list(consens.verdict_shares) == list(VERDICTS)
    for name, share in consens.verdict_shares.items():
        assert share == share_ci(verdicts.get(name, 0), 3)
    assert summary.errors == [(3, "consens", "answer", "'answer' is missing or empty (consens needs it)")]
    data = summary.to_dict()
    json.dumps(data, allow_nan=False)  # never NaN
    shares = data["metrics"]["consens"]["verdict_shares"]
    assert set(shares["ungrounded"]) >= {"share", "low", "high", "n"} and shares["ungrounded"]["n"] == 3
    assert set(data["metrics"]["consens"]) >= {"n", "errors", "scores", "verdicts"}  # the keys of before
    text = str(summary)
    assert "4 rows: 3 ok, 1 with errors" in text and "consens: n=3" in text and "row 3: consens" in text


def test_summary_text_leads_with_verdict_shares() -> None:
    rows = [
        {"consens": c, "verdict": v, "errors": []}
        for c, v in [
            (0.9, "grounded"),
            (0.8, "grounded"),
            (-0.3, "ungrounded"),
            (-0.2, "ungrounded"),
            (0.1, "ungrounded"),
        ]
    ]
    info = MetricInfo("consens", ("consens", "verdict"), ("consens",), "verdict", {}, verdict_values=VERDICTS)
    text = str(summarize(rows, [info], RunStats(5)))
    lines = text.splitlines()
    shares_at = next(i for i, line in enumerate(lines) if line.startswith("  consens verdicts: "))
    means_at = next(i for i, line in enumerate(lines) if line.startswith("  consens: n=5; consens "))
    assert shares_at < means_at
    assert "ungrounded 60% [23%, 88%] (3 of 5)" in lines[shares_at]
    assert "unsure 0% [0%, 43%] (0 of 5)" in lines[shares_at]  # an absent verdict is a finding too
    # A metric without a verdict prints no verdict line.
    plain = MetricInfo("answer_length", ("answer_length",), ("answer_length",), None, {})
    text = str(summarize([{"answer_length": 3.0, "errors": []}], [plain], RunStats(1)))
    assert "verdicts" not in text and "answer_length: n=1; answer_length +3.000 [+3.000, +3.000]" in text


def test_summary_doctest_runs() -> None:
    result = doctest.testmod(importlib.import_module("ragsense.evaluation._evaluation"))
    assert result.attempted >= 1 and result.failed == 0


def test_summary_is_never_nan() -> None:
    one = evaluate(ROWS[:1], "consens", model="fake", progress=False).summary()
    score = one.metrics["consens"].scores["consens"]
    assert score.n == 1 and score.ci95 == (score.mean, score.mean)
    [share] = [s for s in one.metrics["consens"].verdict_shares.values() if s["count"] == 1]
    assert share["high"] == 1.0 and share["low"] < 0.25  # one row: a wide share interval, not 100%
    none_scored = evaluate(
        [{"question": "Q?", "contexts": ["C."]}], "consens", model="fake", progress=False
    ).summary()
    assert none_scored.metrics["consens"].n == 0 and none_scored.metrics["consens"].scores == {}
    assert none_scored.metrics["consens"].verdicts == {}
    assert none_scored.metrics["consens"].verdict_shares == {}
    for summary in (one, none_scored):
        json.dumps(summary.to_dict(), allow_nan=False)
        assert "nan" not in str(summary).lower()
    empty = evaluate([], "consens", model="fake", progress=False)
    assert len(empty) == 0 and empty.summary().metrics["consens"].n == 0
    assert not empty.has_errors


def test_evaluation_basics() -> None:
    run = evaluate(ROWS, "consens", model="fake", progress=False)
    assert len(run) == 3 and [r["id"] for r in run] == ["a", "b", "c"]
    assert repr(run) == "Evaluation(3 rows; metrics: consens)"
    assert not run.has_errors
    assert run.metrics[0].settings["model"] == "fake" and run.metrics[0].verdict == "verdict"


def test_save_refuses_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    # Issue 25: save() replaced an existing file silently while the CLI refused; one rule for both.
    run = reference_run()
    path = tmp_path / "out.jsonl"
    path.write_text("precious\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        run.save(path)
    assert path.read_text(encoding="utf-8") == "precious\n"
    run.save(path, overwrite=True)
    assert len(path.read_text(encoding="utf-8").splitlines()) == len(run.rows)
