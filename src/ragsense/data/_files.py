"""Writing output files safely: whole or not at all, never through a link, never over a file unasked.

Every writer of a finished output (CSV, Parquet, the HTML report, JUnit XML, bands, span annotations)
goes through :func:`write_output`: the bytes go to a temporary file created exclusively next to the
target (a random name, ``O_CREAT | O_EXCL``: a file or link planted there, such as ``x.html.tmp``
pointing elsewhere, is never opened) and are then renamed over the target (a rename replaces a link
at the target itself, never the file it points to). An existing target, a dangling link included, is
refused (:class:`~ragsense.errors.OutputExistsError`) unless ``overwrite``. An output written as it
goes (JSON Lines results, chunk by chunk) is opened by :func:`open_output`, which never follows a link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import IO

from ragsense.errors import OutputExistsError, ParameterError


def _umask() -> int:
    # The process's umask, read by setting it back at once: mkstemp creates 0600 files, and an output
    # gets the permissions an ordinary open() would give it.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


def _refuse_link(path: Path) -> ParameterError:
    return ParameterError(
        f"{str(path)!r} is a symbolic link; ragsense does not write through links: "
        "remove it or name the file itself",
        parameter="output",
    )


def write_output(
    path: str | os.PathLike[str], data: str | bytes, *, overwrite: bool, what: str = "output file"
) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all (see the module docstring);
    ``what`` names the file in the refusal of an existing one.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> write_output(p, "one", overwrite=False).read_text()
    'one'
    >>> write_output(p, "two", overwrite=False)
    Traceback (most recent call last):
    ...
    ragsense.errors.OutputExistsError: output file '...out.txt' already exists; replace it with overwrite=True
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not overwrite and os.path.lexists(target):
        raise OutputExistsError(f"{what} {str(target)!r} already exists", can_resume=False)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.chmod(0o666 & ~_UMASK)
        if overwrite:
            os.replace(temporary, target)
        else:
            _link_new(temporary, target, what)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    return target


def _link_new(temporary: Path, target: Path, what: str) -> None:
    """Put ``temporary`` at ``target`` only if nothing is there (a hard link fails on anything that
    appeared since the check, a link included); a file system without hard links gets a rename."""
    try:
        os.link(temporary, target, follow_symlinks=False)
    except FileExistsError:
        raise OutputExistsError(f"{what} {str(target)!r} already exists", can_resume=False) from None
    except OSError:
        os.replace(temporary, target)


def open_output(path: str | os.PathLike[str], *, append: bool) -> IO[str]:
    """Open ``path`` for writing text as it goes (truncated, or ``append``), refusing a symbolic link
    there (``O_NOFOLLOW``): a dangling link named as the output is not written through.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "link.jsonl").symlink_to(d / "elsewhere.jsonl")
    >>> open_output(d / "link.jsonl", append=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: output: '...link.jsonl' is a symbolic link; ...
    """
    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or target.is_symlink():
            raise _refuse_link(target) from None
        raise
    return os.fdopen(fd, "a" if append else "w", encoding="utf-8", newline="\n")
