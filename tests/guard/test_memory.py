"""The guard's worker gives freed native memory back to the system (glibc ``malloc_trim``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

import pytest

from ragsense.guard._memory import release_free_memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None, reason="glibc only"
)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_freed_heap_blocks_are_returned_to_the_system() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 48 * 1024  # below glibc's mmap threshold: these come from the heap, as small tensors do
    blocks = [libc.malloc(block) for _ in range(3000)]  # about 140 MB
    assert all(blocks)
    for address in blocks:
        ctypes.memset(address, 1, block)  # touch every page, so it is resident
    # Free all but the last block: it pins the heap's top, so free() alone cannot shrink the heap
    # (the fragmentation a long-running scorer sees, in miniature).
    for address in blocks[:-1]:
        libc.free(address)
    before = _rss_mb()
    assert release_free_memory() is True
    after = _rss_mb()
    libc.free(blocks[-1])
    assert before - after > 70, f"RSS {before:.0f} MB -> {after:.0f} MB"
