"""Handing freed heap memory back to the operating system."""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None on other C libraries."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_heap() -> None:
    """Hand freed heap pages back to the OS (glibc only; a no-op elsewhere).

    Arrays below glibc's mmap threshold (the parse's per-chunk columns of
    ~100 KB, Python objects freed in bulk) live on the heap; once freed they
    stay resident until trimmed, and the next large arrays are mapped fresh
    beside them. The Kineto reader trims after each table it assembles and once
    at the end (~360 MiB and ~190 MiB of the peak at 10 M events); the
    decomposer trims once its views are built.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
