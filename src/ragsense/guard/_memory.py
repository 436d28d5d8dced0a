"""Giving freed native memory back to the system between micro-batches.

A long-running scorer sees tensors of a new shape with nearly every micro-batch (rows differ in length,
batches in size). glibc's allocator keeps the freed blocks of those shapes in its heaps, fragmented, and
the process's resident memory creeps up although nothing is kept alive (benchmarks/diag_guard_memory.py
tells the two apart: Python's heap and malloc's in-use bytes stay flat while the free bytes grow).
``malloc_trim(0)`` returns the free pages of every heap to the system; it costs about a millisecond, small
beside a batch of model passes, so the guard's worker calls it after each batch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # Only glibc has malloc_trim; elsewhere (musl, macOS, Windows) there is nothing to call.
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return freed heap memory to the operating system; ``False`` where the C library cannot.

    >>> isinstance(release_free_memory(), bool)
    True
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def resident_bytes() -> int | None:
    """This process's resident memory in bytes (Linux ``/proc/self/statm``), ``None`` elsewhere.

    >>> value = resident_bytes()
    >>> value is None or value > 0
    True
    """
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")
