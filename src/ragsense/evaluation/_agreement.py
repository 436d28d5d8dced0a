"""Agreement of a metric's verdicts with the user's own labels, for the run's summary.

When rows carry the verdict their author expects (``label`` or ``expected``, in any of the spellings
:func:`ragsense.data.label_verdict` reads: grounded/1/true, ungrounded/0/false, unsure, refusal), the
summary of a metric whose verdicts are ConSens's says how often they agree (with a 95% Wilson
interval) and where they do not: the confusion of labels (rows) against verdicts (columns). A verdict
agrees when it is the label itself, so a row labelled ``grounded`` and called ``unsure`` disagrees.

>>> rows = [{"label": 1, "verdict": "grounded"}, {"label": "0", "verdict": "unsure"},
...         {"label": "refusal", "verdict": "refusal"}, {"label": "maybe", "verdict": "grounded"}, {}]
>>> a = agreement_of(rows, "verdict", ("grounded", "unsure", "ungrounded", "refusal"))
>>> print("\\n".join(a.lines("consens")))
  consens agrees with label on 67% [21%, 94%] (2 of 3) labelled rows; 1 unreadable label (row 3: 'maybe')
    label \\ verdict  grounded  unsure  ungrounded  refusal
    ---------------  --------  ------  ----------  -------
    grounded         1         0       0           0
    ungrounded       0         1       0           0
    refusal          0         0       0           1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsense.data import LABEL_VALUES, label_field, label_verdict
from ragsense.errors import InputError
from ragsense.stats import Share, format_share, share_ci
from ragsense.tables import render_table


@dataclass(frozen=True)
class Agreement:
    """Verdicts against labels: ``accuracy`` (agreeing share of the labelled rows with a verdict),
    ``confusion`` (label -> verdict -> rows, labels and verdicts that occur), the field(s) the labels
    came from, and the rows whose label could not be read (counted, the first named)."""

    fields: tuple[str, ...]
    accuracy: Share
    confusion: dict[str, dict[str, int]]
    verdicts: tuple[str, ...]
    unreadable: int = 0
    first_unreadable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fields": list(self.fields),
            "accuracy": dict(self.accuracy),
            "confusion": {k: dict(v) for k, v in self.confusion.items()},
            "unreadable": self.unreadable,
        }

    def lines(self, metric: str) -> list[str]:
        """The summary's lines: the agreement, then the confusion as a small table."""
        name = "/".join(self.fields)
        head = f"  {metric} agrees with {name} on {format_share(self.accuracy)} labelled rows"
        if self.unreadable:
            plural = "" if self.unreadable == 1 else "s"
            head += f"; {self.unreadable} unreadable label{plural} ({self.first_unreadable})"
        headers = [f"{name} \\ verdict", *self.verdicts]
        rows = [
            [label, *(str(counts.get(v, 0)) for v in self.verdicts)]
            for label, counts in self.confusion.items()
        ]
        widths = [max(len(headers[0]), *(len(r[0]) for r in rows)), *(len(v) for v in self.verdicts)]
        table = render_table(headers, rows, widths)
        return [head, *("    " + line for line in table.splitlines())]


def agreement_of(
    rows: Sequence[Mapping[str, Any]], verdict_field: str, verdict_values: Sequence[str]
) -> Agreement | None:
    """The agreement of ``verdict_field`` with the rows' labels; None when no row is labelled or the
    verdicts are not ConSens's (a label says grounded/ungrounded/unsure/refusal, nothing else)."""
    if not set(LABEL_VALUES) <= set(verdict_values):
        return None
    pairs: list[tuple[str, str]] = []
    fields: dict[str, None] = {}
    unreadable: list[str] = []
    for index, row in enumerate(rows):
        name = label_field(row)
        verdict = row.get(verdict_field)
        if name is None or verdict is None:
            continue
        try:
            label = label_verdict(row[name], row=row.get("_row", index), field=name)
        except InputError:
            unreadable.append(f"row {row.get('_row', index)}: {row[name]!r}")
            continue
        fields[name] = None
        pairs.append((str(label), str(verdict)))
    if not pairs and not unreadable:
        return None
    labels = {label for label, _ in pairs}
    # Every verdict the metric can give is a column (a column of zeros is a finding), labels that occur rows.
    order = [*verdict_values, *sorted({v for _, v in pairs} - set(verdict_values))]
    confusion = {
        label: {v: sum(1 for lab, ver in pairs if lab == label and ver == v) for v in order}
        for label in LABEL_VALUES
        if label in labels
    }
    agree = sum(1 for label, verdict in pairs if label == verdict)
    return Agreement(
        fields=tuple(fields) or ("label",),
        accuracy=share_ci(agree, len(pairs)),
        confusion=confusion,
        verdicts=tuple(order),
        unreadable=len(unreadable),
        first_unreadable=unreadable[0] if unreadable else None,
    )
