"""``ragsense evaluate`` gates and JUnit, ``ragsense runs`` and ``ragsense compare``, on real runs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ragsense.cli import main
from ragsense.data import read_rows, sample_rows_path
from ragsense.runs import EXIT_GATE_FAILED, RunStore, compare_runs
from ragsense.stats import format_share, share_ci

SAMPLE = ["--sample", "--model", "fake", "--table", "never"]
N_SAMPLE = len(list(read_rows(sample_rows_path())))  # the rows of the bundled sample


def _evaluate(store: Path, *extra: str) -> int:
    return main(["evaluate", *SAMPLE, "--store", str(store), *extra])


def _fake_means(store: Path) -> dict[str, float]:
    assert _evaluate(store, "--metrics", "consens,similarity", "--tag", "probe") == 0
    return RunStore(store).get("probe").means()


def test_fail_under_passes_and_fails_on_the_mean(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    mean = _fake_means(store)["consens"]
    assert _evaluate(store, "--fail-under", f"consens={mean - 0.01:.4f}") == 0
    assert _evaluate(store, "--fail-under", f"consens={mean + 0.01:.4f}") == EXIT_GATE_FAILED
    # Two gates: one failing is enough; the run is still recorded in full.
    code = _evaluate(
        store,
        "--metrics",
        "consens,similarity",
        "--fail-under",
        "consens=-1,similarity=0.99",
        "--tag",
        "two",
    )
    assert code == EXIT_GATE_FAILED
    assert RunStore(store).get("two").status == "complete"


def test_max_share_counts_verdicts_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.sqlite"
    assert _evaluate(store, "--tag", "shares") == 0
    summary = RunStore(store).get("shares").summary
    assert summary is not None
    verdicts = summary["metrics"]["consens"]["verdicts"]
    unsure = verdicts.get("unsure", 0)
    assert unsure > 0  # the fake model leaves some sample rows "unsure"
    assert summary["metrics"]["consens"]["verdict_shares"]["unsure"] == share_ci(
        unsure, N_SAMPLE
    )  # stored too
    capsys.readouterr()
    assert _evaluate(store, "--max-share", f"unsure={unsure / N_SAMPLE:.4f}") == 0
    assert _evaluate(store, "--max-share", f"unsure={unsure / N_SAMPLE - 0.01:.4f}") == EXIT_GATE_FAILED
    # The failure says how many rows, the share and its Wilson interval.
    failed = capsys.readouterr().err.splitlines()[-1]
    assert failed.startswith("gate FAILED: share unsure ")
    assert f"{format_share(share_ci(unsure, N_SAMPLE))} > " in failed and "95% Wilson interval" in failed
    assert _evaluate(store, "--max-share", "errors=0") == 0


def test_rows_with_errors_fail_the_errors_gate_with_exit_4_not_3(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"id": "ok", "question": "Q?", "contexts": ["Ada built it."], "answer": "Ada built it."})
        + "\n"
        + json.dumps({"id": "bad", "question": "Q?", "contexts": ["Ada built it."], "answer": ""})
        + "\n"
    )
    base = [
        "evaluate",
        str(rows),
        "--model",
        "fake",
        "--store",
        str(tmp_path / "s.sqlite"),
        "--table",
        "never",
    ]
    assert main(base) == 3
    assert main([*base, "--max-share", "errors=0.5"]) == 3  # the gate passes; the row error still shows
    assert main([*base, "--max-share", "errors=0.4"]) == EXIT_GATE_FAILED


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--fail-under", "consens", "write NAME=NUMBER"),
        ("--fail-under", "consens=high", "write NAME=NUMBER"),
        ("--fail-under", "consens=nan", "write NAME=NUMBER"),
        ("--fail-under", "response_adherence=0.8", "no chosen metric has that score"),
        ("--max-share", "ungrounded=1.5", "a share is between 0 and 1"),
        ("--max-share", "ungroundd=0.1", "not a verdict of the chosen metrics"),
    ],
)
def test_bad_gates_are_usage_errors_before_the_run(
    tmp_path: Path, flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.sqlite"
    with pytest.raises(SystemExit) as stopped:
        _evaluate(store, flag, value)
    assert message in str(stopped.value)
    assert not store.exists()  # refused before anything ran or was recorded


def test_junit_has_one_case_per_gate_and_per_row(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    junit = tmp_path / "ci" / "ragsense.xml"
    code = _evaluate(
        store,
        "--fail-under",
        "consens=0.99",
        "--max-share",
        "ungrounded=1",
        "--junit",
        str(junit),
        "--junit-rows",
    )
    assert code == EXIT_GATE_FAILED
    root = ET.parse(junit).getroot()
    gates, rows = root.findall("testsuite")
    assert (
        gates.get("name") == "ragsense.gates" and gates.get("tests") == "2" and gates.get("failures") == "1"
    )
    cases = gates.findall("testcase")
    assert [c.get("name") for c in cases] == ["mean consens >= 0.99", "share ungrounded <= 1"]
    assert cases[0].find("failure") is not None and cases[1].find("failure") is None
    run_id = gates.find("properties/property").get("value")  # type: ignore[union-attr]
    assert RunStore(store).get(run_id or "").status == "complete"
    assert rows.get("name") == "ragsense.rows" and rows.get("tests") == str(N_SAMPLE)
    failed = [c for c in rows.findall("testcase") if c.find("failure") is not None]
    assert rows.get("failures") == str(len(failed)) and 0 < len(failed) <= N_SAMPLE
    assert all("< 0.99" in (c.find("failure").get("message") or "") for c in failed)  # type: ignore[union-attr]
    # Without gates, --junit still writes a file (an empty gates suite) so CI always finds it.
    assert _evaluate(store, "--junit", str(tmp_path / "empty.xml")) == 0
    assert ET.parse(tmp_path / "empty.xml").getroot().find("testsuite").get("tests") == "0"  # type: ignore[union-attr]


def test_runs_lists_and_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.sqlite"
    assert _evaluate(store, "--tag", "first") == 0
    assert main(["evaluate", *SAMPLE, "--no-store"]) == 0
    capsys.readouterr()
    assert main(["runs", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "first" in listing and "complete" in listing and listing.count("sample_rag.jsonl") == 1
    assert main(["runs", "show", "first", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "--tag first" in shown and "model: fake:fake" in shown and "input     sha256" in shown
    assert main(["runs", "--json", "--store", str(store)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["tag"] == "first"
    assert main(["runs", "show", "nope", "--store", str(store)]) == 2


def _wikieval_rows(shared_data: Path, which: str, n: int) -> list[dict[str, object]]:
    from ragsense.data import load_wikieval

    items = load_wikieval(shared_data / "wikieval")[:n]
    answer = "grounded_answer" if which == "grounded" else "ungrounded_answer"
    return [
        {
            "id": item.id,
            "question": item.question,
            "contexts": item.context_v1,
            "answer": getattr(item, answer),
        }
        for item in items
    ]


# Slow (kept out of the 15-minute default suite; run with -m slow): a cheaper test covers the path.
@pytest.mark.slow
@pytest.mark.model
def test_compare_two_real_runs_on_wikieval(
    tmp_path: Path, shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Grounded vs ungrounded WikiEval answers as two "systems", scored by the bundled SmolLM2: the
    comparison must find the ungrounded system worse, significantly, on the rows the runs share."""
    store = tmp_path / "runs.sqlite"
    for which in ("grounded", "ungrounded"):
        path = tmp_path / f"{which}.jsonl"
        rows = _wikieval_rows(shared_data, which, 10)
        if which == "ungrounded":
            rows = rows[2:]  # the runs share 8 rows by id
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert (
            main(
                [
                    "evaluate",
                    str(path),
                    "--model",
                    "smollm2-135m",
                    "--store",
                    str(store),
                    "--tag",
                    which,
                    "--table",
                    "never",
                ]
            )
            == 0
        )
    comparison = compare_runs(RunStore(store), "grounded", "ungrounded")
    assert comparison.n_shared == 8
    consens = comparison.scores[0]
    assert consens.score == "consens" and consens.n == 8
    assert consens.ci95 is not None and consens.ci95[1] < 0  # B - A: the ungrounded system scores lower
    assert consens.p_value is not None and consens.p_value < 0.05  # Wilcoxon, n = 8: at least 0.0078
    assert consens.n_worse > consens.n_better
    capsys.readouterr()
    assert main(["compare", "grounded", "ungrounded", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "compared on the 8 rows they share by id" in out and "worse in consens:" in out
    assert main(["compare", "grounded", "ungrounded", "--store", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_shared"] == 8 and data["scores"][0]["mean_difference"] < 0
