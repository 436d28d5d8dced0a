"""The last step of a benchmark script: its result as one JSON line, printed and, with ``--out``, saved.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "new" / "result.json"
>>> emit({"b": 1, "a": 2}, out, sort_keys=True)
{"a": 2, "b": 1}
>>> out.read_text()
'{"a": 2, "b": 1}\\n'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], out: str | Path | None, *, sort_keys: bool = False) -> None:
    """Print ``result`` as one JSON line (the line callers parse) and write it to ``out`` when given
    (its folder created)."""
    line = json.dumps(result, sort_keys=sort_keys)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n", encoding="utf-8")
    print(line)
