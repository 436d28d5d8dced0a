"""Reports of the kinship benchmark in the shape of the paper's Table 1.

Rows are the number of retrieved documents ``k``; columns are the control condition and then one per
relation; cells are accuracies. :func:`write_kinship_report` writes the raw records (``results.json``),
Markdown, CSV and JSON tables, and a plot of accuracy against ``k`` (``accuracy_vs_k.png``, needs the
``plot`` extra). A missing value (a condition with no queries) is ``None``: ``—`` in tables, ``null`` in
JSON, an empty CSV cell, a gap in the plot; never NaN.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from ragsense.data import dumps_json, write_csv, write_output
from ragsense.errors import BackendUnavailableError, InputError
from ragsense.tables import render_table

CONTROL = "control"
REQUIRED_KEYS = ("k", "condition", "accuracy", "n")
PLOT_FILE = "accuracy_vs_k.png"
MISSING = "—"
_INSTALL_HINT = "pip install 'ragsense[plot]'"


@dataclass(frozen=True)
class KinshipReport:
    """What :func:`write_kinship_report` wrote.

    ``files`` lists the written files in write order; ``plot_skipped`` says why no plot was drawn although
    one was asked for (``None`` when it was drawn or not asked for); ``accuracy_table`` is the accuracy
    table as plain text for the terminal.
    """

    out_dir: Path
    files: list[Path]
    plot_skipped: str | None
    accuracy_table: str


# ------------------------------------------------------------------------------------------ validation


def _is_int(value: Any) -> bool:
    # numbers.Integral admits numpy integers; bool is an int subclass but never a count.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_share(record: Mapping[str, Any], index: int, field: str) -> None:
    value = record.get(field)
    if value is None:
        return
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InputError(f"must be a number in [0, 1] or null, got {value!r}", row=index, field=field)
    if math.isnan(value) or not 0.0 <= float(value) <= 1.0:
        raise InputError(f"must be in [0, 1] (null for no value), got {value!r}", row=index, field=field)


def _check_interval(record: Mapping[str, Any], index: int, field: str) -> None:
    value = record.get(field)
    if value is None:
        return
    ok = (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == 2
        and all(isinstance(x, numbers.Real) and not isinstance(x, bool) and not math.isnan(x) for x in value)
    )
    if not ok or not 0.0 <= float(value[0]) <= float(value[1]) <= 1.0:
        raise InputError(
            f"must be [low, high] with 0 <= low <= high <= 1 (or null), got {value!r}", row=index, field=field
        )


def _check_record(record: Any, index: int) -> None:
    if not isinstance(record, Mapping):
        raise InputError(f"expected an object with named fields, got {type(record).__name__}", row=index)
    for key in REQUIRED_KEYS:
        if key not in record:
            raise InputError(f"missing required key {key!r}", row=index, field=key)
    if not _is_int(record["k"]) or record["k"] < 0:
        raise InputError(f"must be a non-negative integer, got {record['k']!r}", row=index, field="k")
    condition = record["condition"]
    if not isinstance(condition, str) or not condition.strip():
        raise InputError(f"must be a non-empty string, got {condition!r}", row=index, field="condition")
    if condition == "k":
        raise InputError("'k' is reserved for the row column", row=index, field="condition")
    if not _is_int(record["n"]) or record["n"] < 0:
        raise InputError(f"must be a non-negative integer, got {record['n']!r}", row=index, field="n")
    _check_share(record, index, "accuracy")
    _check_share(record, index, "retrieval_recall")
    _check_interval(record, index, "accuracy_ci")
    _check_interval(record, index, "retrieval_recall_ci")
    try:
        dumps_json(dict(record))  # extra keys are carried into results.json, so they must be writable
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), row=index) from exc


def _validate(records: Sequence[Any]) -> None:
    if not records:
        raise InputError("no result records to report")
    seen: dict[tuple[int, str], int] = {}
    for index, record in enumerate(records):
        _check_record(record, index)
        key = (int(record["k"]), str(record["condition"]))
        if key in seen:
            raise InputError(
                f"duplicate result for k={key[0]}, condition {key[1]!r} (first at row {seen[key]})",
                row=index,
                field="condition",
            )
        seen[key] = index


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Load and validate a ``results.json`` written by :func:`write_kinship_report`.

    Raises :class:`~ragsense.errors.InputError` naming the record index and field of a bad record.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.json"
    >>> _ = p.write_text('[{"k": 5, "condition": "control", "accuracy": 0.9, "n": 10}]')
    >>> read_results(p)[0]["accuracy"]
    0.9
    >>> _ = p.write_text('[{"k": 5, "condition": "control", "n": 10}]')
    >>> read_results(p)
    Traceback (most recent call last):
    ...
    ragsense.errors.InputError: row 0, field 'accuracy': missing required key 'accuracy'
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{str(file)!r} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, list):
        raise InputError(f"{str(file)!r} must hold a JSON list of result records, got {type(data).__name__}")
    _validate(data)
    return [dict(record) for record in data]


# ---------------------------------------------------------------------------------------------- tables


def _columns(records: Sequence[Mapping[str, Any]], conditions: Sequence[str] | None) -> list[str]:
    """Control first, then the given relations, or else the relations in first-seen order."""
    names = [str(r["condition"]) for r in records] if conditions is None else list(conditions)
    order = [CONTROL, *dict.fromkeys(c for c in names if c != CONTROL)]
    if conditions is not None:
        for index, record in enumerate(records):
            if record["condition"] not in order:
                raise InputError(
                    f"condition {record['condition']!r} is not among the conditions given ({order})",
                    row=index,
                    field="condition",
                )
    return order


def label(condition: str) -> str:
    """The column heading of a condition, title-cased like the paper.

    >>> label("grandfather"), label("great_aunt")
    ('Grandfather', 'Great Aunt')
    """
    return condition.replace("_", " ").strip().title()


def format_share(value: float | None) -> str:
    """A share as two decimals (halves rounded up, as a reader expects), or ``—`` for no value.

    >>> format_share(0.95), format_share(1), format_share(0.125), format_share(None)
    ('0.95', '1.00', '0.13', '—')
    """
    if value is None:
        return MISSING
    # Decimal of the shortest repr: 0.125 and 0.375 (shares of 8 queries) both round up, not to even.
    return str(Decimal(repr(float(value))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def format_markdown_table(rows: Sequence[Sequence[str]], columns: Sequence[str]) -> str:
    """A Markdown pipe table, first column left-aligned and the others right-aligned, padded to align.

    >>> print(format_markdown_table([["5", "0.95"]], ["# Retrieved", "Control"]))
    | # Retrieved | Control |
    | :---------- | ------: |
    | 5           |    0.95 |
    """

    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    body = [[cell(c) for c in row] for row in rows]
    head = [cell(c) for c in columns]
    widths = [max(3, len(head[i]), *(len(r[i]) for r in body)) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [":" + "-" * (w - 1) if i == 0 else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
    return "\n".join([line(head), "| " + " | ".join(rule) + " |", *(line(r) for r in body)])


def format_interval(value: float | None, interval: Sequence[float] | None) -> str:
    """A share with its interval, ``0.50 (0.15–0.85)``; the share alone when there is no interval.

    >>> format_interval(0.5, [0.15, 0.85]), format_interval(0.5, None), format_interval(None, None)
    ('0.50 (0.15–0.85)', '0.50', '—')
    """
    if value is None or interval is None:
        return format_share(value)
    return f"{format_share(value)} ({format_share(interval[0])}–{format_share(interval[1])})"


def _with_intervals(
    grid: Sequence[Mapping[str, Any]], ci_grid: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """CSV rows: ``k``, then per condition its share, ``<condition>_low`` and ``<condition>_high``."""
    out = []
    for row, ci_row in zip(grid, ci_grid, strict=True):
        flat: dict[str, Any] = {"k": row["k"]}
        for c in columns:
            interval = ci_row[c]
            flat[c] = row[c]
            flat[f"{c}_low"] = None if interval is None else interval[0]
            flat[f"{c}_high"] = None if interval is None else interval[1]
        out.append(flat)
    return out


def _grid(records: Sequence[Mapping[str, Any]], columns: Sequence[str], field: str) -> list[dict[str, Any]]:
    """One dict per k (ascending): ``{"k": k, condition: value or None, ...}``."""
    by_cell = {(int(r["k"]), r["condition"]): r.get(field) for r in records}
    ks = sorted({int(r["k"]) for r in records})
    return [{"k": k, **{c: by_cell.get((k, c)) for c in columns}} for k in ks]


def _markdown(
    title: str,
    metadata: Mapping[str, Any] | None,
    columns: Sequence[str],
    grids: Mapping[str, list[dict[str, Any]]],
) -> str:
    heads = ["# Retrieved", *(label(c) for c in columns)]
    out = [f"# {' '.join(title.split())}", ""]
    if metadata:
        for key, value in metadata.items():
            shown = value if isinstance(value, str) else dumps_json(value)
            out.append(f"- **{key}**: {' '.join(shown.split())}")
        out.append("")

    def section(heading: str, grid: list[dict[str, Any]], fmt: Any) -> None:
        rows = [[str(g["k"]), *(fmt(g[c]) for c in columns)] for g in grid]
        out.extend([f"## {heading}", "", format_markdown_table(rows, heads), ""])

    def count(value: Any) -> str:
        return MISSING if value is None else str(value)

    def shares(field: str) -> tuple[str, list[dict[str, Any]], Any]:
        """The heading, grid and cell format of a share, with its intervals when there are any."""
        ci = grids.get(f"{field}_ci")
        if ci is None or all(g[c] is None for g in ci for c in columns):
            return "", grids[field], format_share
        cells = [
            {"k": g["k"], **{c: format_interval(g[c], i[c]) for c in columns}}
            for g, i in zip(grids[field], ci, strict=True)
        ]
        return " (95% Wilson interval)", cells, str

    if any(g[c] is not None for g in grids["accuracy"] for c in columns):
        suffix, grid, fmt = shares("accuracy")
        section("Accuracy" + suffix, grid, fmt)
    else:  # a retriever alone answers nothing: an all-dash table would only look like a failure
        out.extend(["## Accuracy", "", "No answers were generated (retrieval only).", ""])
    suffix, grid, fmt = shares("retrieval_recall")
    section("Retrieval recall" + suffix, grid, fmt)
    if suffix:
        out.extend(
            [
                "Retrieval recall intervals count each needed document (shortest chain) as one trial.",
                "",
            ]
        )
    section("Queries per condition", grids["n"], count)
    if "n_errors" in grids:
        section("Failed queries per condition", grids["n_errors"], count)
    if "n_empty_answers" in grids:
        section("Empty answers per condition", grids["n_empty_answers"], count)
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ plot


def _load_matplotlib() -> Any:
    try:
        import matplotlib
        import matplotlib.style
    except ImportError as exc:
        raise BackendUnavailableError(
            f"matplotlib is not installed, so {PLOT_FILE} was not drawn: {_INSTALL_HINT}"
        ) from exc
    return matplotlib


def plot_accuracy_vs_k(
    results: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    title: str,
    conditions: Sequence[str] | None = None,
) -> Path:
    """Draw accuracy against k, one line per condition (control thick and black), as a PNG. Records
    with an ``accuracy_ci`` get error bars (each condition's nudged sideways so that they stay apart).

    The same input gives byte-identical files: matplotlib's default style (not the user's matplotlibrc)
    and no version stamp in the PNG. Raises :class:`~ragsense.errors.BackendUnavailableError` without
    matplotlib.

    >>> import tempfile, pathlib
    >>> recs = [{"k": 5, "condition": "control", "accuracy": 0.9, "n": 4}]
    >>> out = plot_accuracy_vs_k(recs, pathlib.Path(tempfile.mkdtemp()) / "p.png", title="T")
    >>> out.read_bytes()[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    _validate(results)
    columns = _columns(results, conditions)
    grid = _grid(results, columns, "accuracy")
    ci_grid = _grid(results, columns, "accuracy_ci")
    matplotlib = _load_matplotlib()
    # The object API with an explicit Agg canvas: works headless and leaves pyplot's backend alone.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ks = [g["k"] for g in grid]
    markers = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">"]
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(7.0, 4.2), dpi=120, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        colors = matplotlib.colormaps["tab10"].colors
        for i, condition in enumerate(columns):
            # NaN (not None) so matplotlib leaves a gap where a condition had no queries.
            ys = [math.nan if g[condition] is None else float(g[condition]) for g in grid]
            control = condition == CONTROL
            color = "black" if control else colors[(i - 1) % len(colors)]
            intervals = [(g["k"], g[condition], c[condition]) for g, c in zip(grid, ci_grid, strict=True)]
            bars = [(k, float(y), lo_hi) for k, y, lo_hi in intervals if y is not None and lo_hi is not None]
            if bars:
                # Each condition's bars nudged by 0.8% of the k range, so that equal cells stay apart.
                nudge = 0.008 * (max(ks) - min(ks) or 1) * (i - (len(columns) - 1) / 2)
                ax.errorbar(
                    [k + nudge for k, _, _ in bars],
                    [y for _, y, _ in bars],
                    yerr=[
                        [max(0.0, y - lo) for _, y, (lo, _) in bars],
                        [max(0.0, hi - y) for _, y, (_, hi) in bars],
                    ],
                    fmt="none",
                    ecolor=color,
                    elinewidth=1.0,
                    capsize=2.5,
                    alpha=0.55,
                    zorder=1,
                )
            ax.plot(
                ks,
                ys,
                label=label(condition),
                color=color,
                linewidth=2.8 if control else 1.5,
                marker=markers[i % len(markers)],
                markersize=5,
                zorder=3 if control else 2,
            )
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        # A small margin so lines at exactly 0 or 1 (common here) are not drawn on the frame.
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("Number of retrieved documents (k)")
        ax.set_ylabel("Accuracy")
        ax.set_title(" ".join(title.split()))
        ax.grid(True, alpha=0.3)
        fig.legend(loc="outside right upper", frameon=False)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, format="png", metadata={"Software": None})
    return target


# ---------------------------------------------------------------------------------------------- report


def _write_text(path: Path, text: str) -> Path:
    return write_output(path, text if text.endswith("\n") else text + "\n", overwrite=True)


def write_kinship_report(
    results: Sequence[Mapping[str, Any]],
    out_dir: Path | str,
    *,
    title: str,
    metadata: Mapping[str, Any] | None = None,
    conditions: Sequence[str] | None = None,
    plot: bool = True,
) -> KinshipReport:
    """Write ``results.json``, ``table.md``, ``table.csv``, ``retrieval_recall.csv``, ``table.json`` and
    ``accuracy_vs_k.png`` into ``out_dir``.

    Each record is ``{"k", "condition", "accuracy", "n"}`` plus optionally ``"retrieval_recall"`` and any
    other keys (carried into ``results.json`` unchanged). ``conditions`` fixes the relation columns (a
    record of another condition is an error); without it they follow first appearance. Control is always
    the first column. A bad record raises :class:`~ragsense.errors.InputError` naming its index and field.
    Without matplotlib the plot is skipped and ``plot_skipped`` says why; a plot from an earlier run is
    removed whenever none is drawn, so the folder never mixes two runs.

    >>> import tempfile
    >>> recs = [{"k": 5, "condition": "control", "accuracy": 0.95, "n": 20},
    ...         {"k": 5, "condition": "grandfather", "accuracy": 0.0, "n": 4}]
    >>> report = write_kinship_report(recs, tempfile.mkdtemp(), title="Small", plot=False)
    >>> print(report.accuracy_table)
    # Retrieved  Control  Grandfather
    -----------  -------  -----------
    5            0.95     0.00
    >>> sorted(p.name for p in report.files)
    ['results.json', 'retrieval_recall.csv', 'table.csv', 'table.json', 'table.md']
    """
    _validate(results)
    if metadata is not None:
        dumps_json(dict(metadata))  # refuse NaN / unserializable metadata before writing anything
    columns = _columns(results, conditions)
    rank = {c: i for i, c in enumerate(columns)}
    ordered = sorted(results, key=lambda r: (int(r["k"]), rank[r["condition"]]))

    grids = {field: _grid(ordered, columns, field) for field in ("accuracy", "retrieval_recall", "n")}
    for optional in ("n_errors", "n_empty_answers", "accuracy_ci", "retrieval_recall_ci"):
        if any(optional in r for r in ordered):
            grids[optional] = _grid(ordered, columns, optional)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    # dumps_json refuses NaN; the round trip through json only adds the indentation.
    pretty = json.dumps(json.loads(dumps_json([dict(r) for r in ordered])), indent=2, ensure_ascii=False)
    files.append(_write_text(out / "results.json", pretty))
    files.append(_write_text(out / "table.md", _markdown(title, metadata, columns, grids)))
    # write_csv takes its columns from the rows' keys in order: k, control, then the relations.
    # With intervals each condition is followed by its <condition>_low and <condition>_high columns.
    for name, field in (("table.csv", "accuracy"), ("retrieval_recall.csv", "retrieval_recall")):
        ci = grids.get(f"{field}_ci")
        write_csv(out / name, grids[field] if ci is None else _with_intervals(grids[field], ci, columns))
        files.append(out / name)
    table = {
        "title": title,
        "metadata": dict(metadata) if metadata is not None else {},
        "columns": ["k", *columns],
        "column_labels": ["# Retrieved", *(label(c) for c in columns)],
        "interval": "95% Wilson score" if "accuracy_ci" in grids else None,
        "rows": grids["accuracy"],
        "retrieval_recall_rows": grids["retrieval_recall"],
        "n_rows": grids["n"],
        **{f"{f}_rows": grids[f] for f in ("accuracy_ci", "retrieval_recall_ci") if f in grids},
    }
    files.append(_write_text(out / "table.json", json.dumps(json.loads(dumps_json(table)), indent=2)))

    plot_skipped: str | None = None
    png = out / PLOT_FILE
    drawn = False
    if plot:
        try:
            files.append(plot_accuracy_vs_k(ordered, png, title=title, conditions=columns))
            drawn = True
        except BackendUnavailableError as exc:
            plot_skipped = str(exc)
    if not drawn:
        png.unlink(missing_ok=True)

    heads = ["# Retrieved", *(label(c) for c in columns)]
    rows = [[str(g["k"]), *(format_share(g[c]) for c in columns)] for g in grids["accuracy"]]
    widths = [max(len(heads[i]), *(len(r[i]) for r in rows)) for i in range(len(heads))]
    return KinshipReport(out, files, plot_skipped, render_table(heads, rows, widths))
