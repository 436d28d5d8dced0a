"""The report's view model and size policy, read back from the page in Python."""

from __future__ import annotations

import json
import math
from typing import Any

from ragsense.report import ReportLimits, render_report
from ragsense.report._data import build_payload, row_keys
from ragsense.report._texts import fair_cap
from ragsense.runs import compare_rows

from ._decode import page_data, words_of
from ._rows import synthetic_rows
from .conftest import stored_run

EVIL = '</script><script>window.__xss = 1</script><!-- <img src=x onerror="window.__xss=2"> & \u2028'


def row(**fields: Any) -> dict[str, Any]:
    base = synthetic_rows(1, seed=7)[0]
    return {**base, **fields}


def test_fair_cap_cuts_only_the_longest_texts() -> None:
    assert fair_cap([10, 20, 30], budget=100, floor=1, ceiling=1000) == 1000  # everything fits
    assert fair_cap([10, 20, 300], budget=100, floor=1, ceiling=1000) == 70  # 10 + 20 + 70 = 100
    assert fair_cap([500] * 10, budget=100, floor=40, ceiling=1000) == 40  # never under the floor


def test_documents_are_stored_once_and_a_cut_is_flagged() -> None:
    long_doc = "Lorem ipsum dolor sit amet. " * 2000  # 56,000 characters
    rows = [row(id="a", contexts=[long_doc, "A short document."]), row(id="b", contexts=[long_doc])]
    page = render_report(stored_run(rows), rows, limits=ReportLimits(document_max=1000))
    data = page_data(page)
    assert len(data["docs"]) == 2  # the long document once
    assert data["docs"][0] == [long_doc[:1000], len(long_doc)]  # cut, with its full length
    assert data["docs"][1] == ["A short document.", None]
    assert data["rows"][0][1]["d"] == [0, 1] and data["rows"][1][1]["d"] == [0]
    assert data["meta"]["limits"]["documents_cut"] == 1
    assert data["meta"]["limits"]["document_cap"] == 1000


def test_answer_budget_cuts_long_answers_and_their_words() -> None:
    rows = synthetic_rows(20, seed=3, answer_words=120)
    rows[0] = {
        **rows[0],
        "answer": rows[0]["answer"] * 3,
    }  # the long answer; its words are in the first third
    others = [len(r["answer"]) for r in rows[1:]]
    limits = ReportLimits(answer_budget=sum(others) + max(others), answer_min=50)  # the cap: max(others)
    data = page_data(render_report(stored_run(rows), rows, limits=limits))
    long_view = data["rows"][0][1]
    assert long_view["an"] == len(rows[0]["answer"]) and len(long_view["a"]) == max(others)
    assert long_view["wn"] > 0  # the words past the cut are left out, and counted
    assert all(end <= len(long_view["a"]) for end in _ends(long_view))
    assert all("an" not in entry[1] for entry in data["rows"][1:])  # shorter answers are whole
    assert data["meta"]["limits"]["answers_cut"] == 1


def _ends(view: dict[str, Any]) -> list[int]:
    ends, position, flat = [], 0, view.get("w", [])
    for k in range(0, len(flat), 4):
        position += flat[k] + flat[k + 1]
        ends.append(position)
    return ends


def test_words_round_trip_by_code_point() -> None:
    answer = "😀 Ada Lovelace wrote it. 😀 Really."
    words = [
        {"word": "Ada", "start": 2, "end": 5, "nll_context": 1.23456, "nll_empty": 7.5},
        {"word": "Lovelace", "start": 6, "end": 14, "nll_context": 0.5, "nll_empty": 0.25},
        {"word": "Really", "start": 27, "end": 33, "nll_context": 2.0, "nll_empty": 2.0},
    ]
    rows = [row(id="emoji", answer=answer, words=words)]
    view = page_data(render_report(stored_run(rows), rows))["rows"][0][1]
    assert [w[0] for w in words_of(view)] == ["Ada", "Lovelace", "Really"]
    assert words_of(view)[0][1:] == (1.235, 7.5)  # thousandths of a nat
    assert "ws" not in view  # no word says the context states it


def test_the_words_the_context_states_are_marked_for_the_page() -> None:
    # The page never shades a stated word red; it reads which ones from "ws" (positions among the words).
    answer = "Ada Lovelace wrote it in Paris."
    words = [
        {"word": "Ada", "start": 0, "end": 3, "nll_context": 5.0, "nll_empty": 1.0, "stated": True},
        {"word": "Lovelace", "start": 4, "end": 12, "nll_context": 1.0, "nll_empty": 2.0, "stated": False},
        {"word": "Paris", "start": 25, "end": 30, "nll_context": 4.0, "nll_empty": 1.0, "stated": True},
    ]
    rows = [row(id="stated", answer=answer, words=words)]
    view = page_data(render_report(stored_run(rows), rows))["rows"][0][1]
    assert view["ws"] == [0, 2]


def test_everything_from_the_rows_is_escaped() -> None:
    rows = [
        row(
            id=EVIL,
            question=EVIL,
            answer=EVIL + " answer",
            contexts=[EVIL, "doc"],
            reference=EVIL,
            errors=[{"metric": "vera", "field": EVIL, "message": EVIL}],
            notes=[EVIL],
        ),
        row(id="plain"),
    ]
    run = stored_run(rows, tag=EVIL)
    for compress in (False, True):
        page = render_report(run, rows, compress=compress)
        scripts = page.count("<script")
        assert scripts == 5, scripts  # meta, rows, documents, context decisions, the page's own script
        assert page.count("</script>") == 5
        assert "<!--" not in page and "<img" not in page
        body = page.split("<body>")[1]
        assert "\u2028" not in body  # a raw line separator would end a JavaScript string
        data = page_data(page)
        assert data["meta"]["runs"][0]["tag"] == EVIL  # escaping loses nothing
        view = data["rows"][0][1]
        assert data["rows"][0][0] == EVIL and view["q"] == EVIL and view["a"].startswith(EVIL)
        assert data["docs"][0][0] == EVIL and view["e"][0][1:] == [EVIL, [EVIL, None]]
        assert ["reference", [EVIL, None]] in view["x"]
    title = page.split("<title>")[1].split("</title>")[0]
    assert "<" not in title and "&lt;/script&gt;" in title


def test_no_nan_or_infinity_reaches_the_page() -> None:
    bad = row(
        id="nan",
        consens=float("nan"),
        similarity=float("inf"),
        consens_raw=float("-inf"),
        ppl_context=float("nan"),
    )
    bad["words"] = [{**w, "nll_empty": float("inf")} for w in bad["words"]]
    bad["attribution"] = [{**a, "drop": float("nan")} for a in bad["attribution"]]
    bad["consens_by_aggregation"] = {"q25": float("nan")}
    rows = [bad, row(id="ok")]
    data = page_data(render_report(stored_run(rows), rows))  # parse_constant raises on NaN/Infinity
    view = data["rows"][0][1]
    scores = [s["name"] for s in data["meta"]["scores"]]
    assert view["s"][scores.index("consens")] is None and view["s"][scores.index("similarity")] is None
    assert view["w"][3] is None and view["t"][0][1] is None and view["c"]["ba"] == {"q25": None}
    assert "r" not in view["c"] and "pc" not in view["c"]


def test_floats_keep_four_significant_digits() -> None:
    rows = [row(id="x", consens=0.123456789, similarity=-0.000123456789)]
    data = page_data(render_report(stored_run(rows), rows))
    scores = [s["name"] for s in data["meta"]["scores"]]
    view = data["rows"][0][1]
    assert view["s"][scores.index("consens")] == 0.1235
    assert view["s"][scores.index("similarity")] == -0.0001235
    assert all(len(repr(x).strip("-0.").replace(".", "").rstrip("0")) <= 4 for x in view["c"]["ba"].values())


def test_vera_decisions_point_into_the_texts() -> None:
    rows = synthetic_rows(3, seed=5)
    data = page_data(render_report(stored_run(rows), rows))
    for (key, view), decisions, source in zip(data["rows"], data["ctx"], rows, strict=True):
        assert key == source["id"]
        [context] = [s for s in view["ve"]["st"] if s["k"] == "context"]
        assert context["n"] == len(decisions[0]) == len(source["vera"]["context"]["decisions"])
        previous: dict[int, int] = {}
        for d, original in zip(decisions[0], source["vera"]["context"]["decisions"], strict=True):
            start = previous.get(d[3], 0) + d[4]
            end = start + d[5]
            previous[d[3]] = end
            assert source["contexts"][d[3]][start:end] == original["text"]
            assert context["lb"][d[1]] == original["label"]
        [adherence] = [s for s in view["ve"]["st"] if s["k"] == "adherence"]
        for d, original in zip(adherence["dc"], source["vera"]["adherence"]["decisions"], strict=True):
            assert view["a"][d[4] : d[5]] == original["text"]
            assert d[7]["cs"] == float(f"{original['consens']:.4g}") and "t" not in d[7]


def test_incomplete_run_is_flagged_with_a_summary_from_its_rows() -> None:
    rows = synthetic_rows(6, seed=2)
    run = stored_run(rows, status="incomplete")
    data = page_data(render_report(run, rows))
    info = data["meta"]["runs"][0]
    assert info["status"] == "incomplete" and info["summary_source"] == "rows"
    assert (
        info["summary"]["consens"]["n"] == 6
        and info["summary"]["consens"]["scores"]["consens"]["mean"] is not None
    )


def test_comparison_is_compare_rows_and_keeps_rows_of_either_run() -> None:
    rows_a = synthetic_rows(30, seed=11)
    rows_b = [{**r, "consens": r["consens"] - 0.3 * (k % 2)} for k, r in enumerate(rows_a[1:])]
    rows_b.append({**rows_a[0], "id": "only-in-b"})
    run_a, run_b = stored_run(rows_a, run_id="aaaa00000000"), stored_run(rows_b, run_id="bbbb00000000")
    data = page_data(render_report(run_a, rows_a, other=(run_b, rows_b)))
    expected = compare_rows(rows_a, rows_b, [s["name"] for s in data["meta"]["scores"]], ["verdict"])
    [consens] = [s for s in data["meta"]["comparison"]["scores"] if s["score"] == "consens"]
    [want] = [s for s in expected.scores if s.score == "consens"]
    assert consens["n"] == want.n == 29 and consens["worse"] == want.n_worse == 14
    assert math.isclose(consens["difference"], want.mean_difference, rel_tol=1e-3)
    assert consens["ci95"] == [float(f"{x:.4g}") for x in want.ci95]
    worst = data["meta"]["comparison"]["worst"]["consens"]
    assert [w[0] for w in worst] == [c.key for c in expected.worst("consens", 20)]
    keys = [entry[0] for entry in data["rows"]]
    assert keys == row_keys([rows_a, rows_b]) and keys[-1] == "only-in-b"
    assert data["rows"][0][2] is None and data["rows"][-1][1] is None  # row 0 only in A, the last only in B


def test_duplicate_ids_are_all_kept() -> None:
    rows = [row(id="same", _row=0), row(id="same", _row=1), {**row(), "id": None, "_row": 2}]
    data = page_data(render_report(stored_run(rows), rows))
    assert [entry[0] for entry in data["rows"]] == ["same", "same (#1)", "#2"]


def test_payload_of_a_run_without_optional_metrics() -> None:
    rows = [
        {
            "id": "1",
            "question": "Q?",
            "contexts": ["C."],
            "answer": "A.",
            "similarity": 0.5,
            "errors": [],
            "_row": 0,
        }
    ]
    payload = build_payload([rows], ["1"], [{"name": "similarity"}], [], ReportLimits())
    [[key, view]] = payload.rows
    assert key == "1" and view == {"p": 0, "q": "Q?", "a": "A.", "d": [0], "s": [0.5]}
    assert json.dumps(payload.rows, allow_nan=False)


def test_size_at_10000_rows_stays_under_5_mb(big_report: Any) -> None:
    path, report, seconds = big_report
    assert report.size < 5_000_000 and path.stat().st_size == report.size
    data = page_data(report.html)
    assert len(data["rows"]) == 10_000  # every row is in the table, whatever was cut
    limits = data["meta"]["limits"]
    assert not limits["over"]
    print(f"10,000 rows: {report.size / 1e6:.2f} MB in {seconds:.1f} s; {report.step.describe()}; {limits}")


def test_refusals_are_marked_apart_and_left_out_of_the_summary_means() -> None:
    """The one refusal rule in the report: a refusal row is marked ``rf`` (the page lists it in its own
    table, not among the rows ranked worst first) and the summary's mean leaves it out."""
    from ragsense.report._summary import summary_from_rows

    rows = [
        row(id="good", consens=0.9, verdict="grounded"),
        row(id="ref1", consens=-0.61, verdict="refusal", refusal=True),
        row(id="ref2", consens=-0.47, verdict="refusal", refusal=True),
    ]
    data = page_data(render_report(stored_run(rows), rows))
    marked = {entry[0]: entry[1].get("rf") for entry in data["rows"]}
    assert marked == {"good": None, "ref1": 1, "ref2": 1}
    summary = summary_from_rows(stored_run(rows, status="running"), rows)["consens"]
    assert summary["refusals"] == 2 and summary["scores"]["consens"]["mean"] == 0.9
    assert summary["verdicts"] == {"grounded": 1, "refusal": 2}  # counted in the verdicts
    page = render_report(stored_run(rows), rows, compress=False)
    assert 'id="refusals"' in page and "renderRefusals" in page


def test_the_raw_score_is_labelled_for_what_it_holds_and_old_files_still_read() -> None:
    """``consens_raw`` (``r`` in older files) is shown with what it holds under the row's aggregation;
    only the perplexity aggregations make it ln(P_empty / P_context)."""
    from ragsense.consens import RAW_SCORE_MEANINGS

    new = row(id="new", consens_raw=-1.119, aggregation="support")
    old = {k: v for k, v in row(id="old", aggregation="support").items() if k != "consens_raw"} | {
        "r": -1.119
    }
    data = page_data(render_report(stored_run([new, old]), [new, old]))
    assert [entry[1]["c"]["r"] for entry in data["rows"]] == [-1.119, -1.119]
    assert all(k != "r" for entry in data["rows"] for k, _ in entry[1].get("x", []))  # not shown twice
    assert data["meta"]["raw_meanings"] == RAW_SCORE_MEANINGS
    assert "ln(P_empty" not in RAW_SCORE_MEANINGS["support"]
    assert RAW_SCORE_MEANINGS["geometric"].startswith("ln(P_empty / P_context)")
