"""Where a long-lived ``mdrecall mcp`` spends its memory (issue 28): a diagnosis hook for the soak.

Put this directory first on PYTHONPATH and set HEAPWATCH_DIR (soak.py passes the environment on,
except MDRECALL_* variables): every ``mdrecall mcp`` process started then writes, every
HEAPWATCH_EVERY seconds (default 120), one line to ``HEAPWATCH_DIR/stats-<pid>.log``: resident
memory (``RssAnon``), glibc's heap (``mallinfo2``: ``uordblks`` in use, ``fordblks`` free but kept,
``hblkhd`` in mmapped blocks), SQLite's memory, Python's allocated blocks; with HEAPWATCH_TRACE=1 also
a ``tracemalloc`` snapshot (HEAPWATCH_FRAMES frames, default 12: the server runs ~2x slower and its
heap churns more), to compare with ``diff.py``; with a file ``HEAPWATCH_DIR/TRIM`` present, a
``malloc_trim(0)`` after each line, its effect and time recorded. The process's own work is untouched.

    mkdir -p /tmp/hw && HEAPWATCH_DIR=/tmp/hw HEAPWATCH_TRACE=1 PYTHONPATH=benchmarks/heapwatch:src \\
        python benchmarks/soak.py --minutes 14 --ops-per-second 1.5 --probes-per-second 1.5
    python benchmarks/heapwatch/diff.py /tmp/hw/snap-002.pickle /tmp/hw/snap-005.pickle
"""

import os
import sys
import threading
import time

_DIR = os.environ.get("HEAPWATCH_DIR")


def _start(where: str) -> None:
    import ctypes
    import pickle
    import tracemalloc

    if os.environ.get("HEAPWATCH_TRACE") == "1":
        tracemalloc.start(int(os.environ.get("HEAPWATCH_FRAMES", "12")))
    libc = ctypes.CDLL("libc.so.6")

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip

    libc.mallinfo2.restype = MallInfo2

    def status() -> dict[str, str]:
        with open("/proc/self/status") as f:
            return {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k in ("VmRSS", "RssAnon", "RssFile", "Threads")}

    def loop() -> None:
        every = float(os.environ.get("HEAPWATCH_EVERY", "120"))
        with open(os.path.join(where, f"stats-{os.getpid()}.log"), "a") as log:
            for n in range(1_000_000):
                time.sleep(every if n else 20)
                info = libc.mallinfo2()
                # Not gc.get_objects(): it holds a reference to every tuple, and a tuple being
                # resized in another thread then fails with SystemError.
                rec: dict[str, object] = {"n": n, "t": time.time(), **status(), "arena": info.arena, "hblkhd": info.hblkhd,
                                          "uordblks": info.uordblks, "fordblks": info.fordblks,
                                          "python_blocks": sys.getallocatedblocks()}  # fmt: skip
                if tracemalloc.is_tracing():
                    rec["traced"] = tracemalloc.get_traced_memory()[0]
                try:
                    import apsw

                    rec["sqlite_memory"] = apsw.memory_used()
                except ImportError:
                    pass
                if tracemalloc.is_tracing():
                    with open(os.path.join(where, f"snap-{n:03d}.pickle"), "wb") as out:
                        pickle.dump(tracemalloc.take_snapshot(), out)
                if os.path.exists(os.path.join(where, "TRIM")):
                    before, started = status()["RssAnon"], time.perf_counter()
                    libc.malloc_trim(0)
                    rec["trim"] = (before, status()["RssAnon"], round((time.perf_counter() - started) * 1000, 1))
                log.write(repr(rec) + "\n")
                log.flush()

    threading.Thread(target=loop, daemon=True, name="heapwatch").start()


# sys.argv is ['-m', 'mcp', ...] here for `python -m mdrecall mcp`: only the server is watched.
if _DIR and "mcp" in sys.argv:
    _start(_DIR)
