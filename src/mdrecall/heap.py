"""Hand the C heap's free pages back to the system, for a long-lived process (glibc's ``malloc_trim``).

glibc's ``free`` keeps the memory it gets back: it returns pages to the system only from the top
of a heap, so a hole between blocks still in use stays resident until something the same size is
allocated there again. A process that serves requests for hours on many threads (the MCP server:
the SDK's worker threads, onnxruntime, SQLite, the search's buffers) accumulates such holes. The
soak (issue 28, docs/reliability.md "Soak") measured it: with the in-use heap flat, the server's
resident memory grew by the free-but-kept part, and a ``malloc_trim(0)`` a minute gave back 2.6–9.6
MiB of it each time, in 1.0–7.9 ms. :class:`HeapTrimmer` trims at most once per interval, after a request, so a busy server
stays at what it uses and an idle one costs nothing.

glibc also lets a block it handed out with ``mmap`` go back on ``free``, but only above a threshold
it raises to the largest block freed so far (up to 32 MiB): after onnxruntime frees its arena's
extensions (embeddings/bert_onnx.py), later blocks of that size come from the per-thread heaps and
stay there as holes. :func:`map_large_blocks` fixes the threshold at 1 MiB instead.

Elsewhere than glibc (macOS, musl, Windows) there is no such call and nothing happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
import time
from collections.abc import Callable

#: Seconds between two trims: one costs 1–8 ms on the MCP server's ~400 MiB heap (the soak's figures).
TRIM_INTERVAL_S = 60.0

#: Blocks from this size up are mapped on their own and go back to the system on ``free`` (glibc's
#: ``M_MMAP_THRESHOLD``; its own starting value is 128 KiB, raised as large blocks are freed).
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # malloc.h

_lock = threading.Lock()
_trim: Callable[[int], int] | None = None
_looked = False
_mapped = False


def _malloc_trim() -> Callable[[int], int] | None:
    global _trim, _looked
    with _lock:
        if not _looked:
            _looked = True
            if sys.platform.startswith("linux"):
                try:
                    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                    trim = libc.malloc_trim  # absent from musl's libc
                    trim.argtypes = [ctypes.c_size_t]
                    trim.restype = ctypes.c_int
                    _trim = trim
                except (OSError, AttributeError):
                    _trim = None
        return _trim


def map_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Let every block of ``threshold`` bytes or more be mapped on its own, so ``free`` unmaps it
    (glibc's ``mallopt(M_MMAP_THRESHOLD)``; it also stops glibc raising the threshold). Once per
    process; False where the C library has no such setting (not glibc)."""
    global _mapped
    if _malloc_trim() is None:  # not glibc: no mallopt either
        return False
    with _lock:
        if not _mapped:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _mapped = bool(libc.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(threshold)))
        return _mapped


def release_free_memory() -> bool:
    """Give every free page of the C heap back to the system; False where the C library cannot
    (not glibc), or when there was nothing to give back."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


class HeapTrimmer:
    """Calls :func:`release_free_memory` when :meth:`due` says so: at most once per ``every_s``."""

    def __init__(self, every_s: float = TRIM_INTERVAL_S, *, clock: Callable[[], float] = time.monotonic,
                 release: Callable[[], bool] = release_free_memory) -> None:  # fmt: skip
        self.every_s = every_s
        self._clock = clock
        self._release = release
        self._last = clock()
        self._lock = threading.Lock()
        self.trims = 0

    def due(self) -> bool:
        """Whether the interval has passed since the last trim (cheap: call it after every request)."""
        return self._clock() - self._last >= self.every_s

    def trim(self) -> None:
        """Trim if still due (another thread may have just done it). Blocking: call it off an event loop."""
        with self._lock:
            if not self.due():
                return
            self._last = self._clock()
            self.trims += 1
        self._release()
