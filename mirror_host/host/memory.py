"""Giving memory the host freed back to the system (glibc). I/O.

The host's memory use is bounded (docs/performance.md, "Memory under fuzz"),
but what it frees is not always returned. Measured under network fuzz (glibc's
``mallinfo2``): the bytes in use stayed level while the C heap kept growing,
free space and all, about 2 MiB a minute. Two behaviours of glibc's allocator
cause it:

* **The dynamic mmap threshold.** A block above 128 KiB is mapped on its own
  and unmapped when freed, but freeing one raises the threshold to its size
  (up to 32 MiB). After the first 8 MiB packet buffer, every later one comes
  from the heap, where it leaves an 8 MiB hole. :func:`tune` fixes the
  threshold at :data:`MMAP_THRESHOLD`, so large buffers (packets, history
  snapshots, captures) always go back at once; and caps the arenas threads get
  at :data:`ARENAS` (the host's threads only write files and read ``/proc``).
* **Fragmentation.** Thousands of short connections (a TLS object, its
  buffers, a task each) interleave with what lives on; the heap's top cannot
  shrink past a live block, and free pages in the middle stay resident.
  :func:`return_freed_memory` calls ``malloc_trim(0)`` every
  :data:`TRIM_SECONDS`, which hands every whole free page back (``madvise``),
  so the resident size follows what is in use.

Elsewhere (macOS, musl) both do nothing: :func:`tune` says whether it applied.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import trio

__all__ = ["ARENAS", "MMAP_THRESHOLD", "TRIM_SECONDS", "return_freed_memory", "tune"]

logger = logging.getLogger(__name__)

#: Blocks above this are always mapped on their own (glibc's default start).
MMAP_THRESHOLD = 128 * 1024
#: Malloc arenas at most (glibc's default is 8 per core, for threads).
ARENAS = 2
#: How often free pages are handed back.
TRIM_SECONDS = 30.0

# mallopt parameters (glibc's malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def _glibc() -> Any | None:
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    needed = ("gnu_get_libc_version", "mallopt", "malloc_trim")
    return libc if all(hasattr(libc, name) for name in needed) else None


_LIBC = _glibc()


def tune() -> bool:
    """Fix glibc's mmap threshold and cap its arenas (module docstring); whether it did
    (``False``: not glibc). Call it once, early."""
    if _LIBC is None:
        return False
    _LIBC.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    _LIBC.mallopt.restype = ctypes.c_int
    fixed: bool = _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    capped: bool = _LIBC.mallopt(_M_ARENA_MAX, ARENAS) == 1
    return fixed and capped


def trim() -> bool:
    """Hand every whole free page of every arena back now; whether any was."""
    if _LIBC is None:
        return False
    _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
    _LIBC.malloc_trim.restype = ctypes.c_int
    return bool(_LIBC.malloc_trim(0))


async def return_freed_memory(*, seconds: float = TRIM_SECONDS) -> None:
    """Trim every ``seconds``, until cancelled (nothing to do without glibc)."""
    if _LIBC is None:
        return
    while True:
        await trio.sleep(seconds)
        trim()
