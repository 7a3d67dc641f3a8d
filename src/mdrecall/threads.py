"""How many threads mdrecall's number crunching uses, decided once per process.

NumPy's OpenBLAS starts one thread per core for every matrix product, and torch has its own pool
of the same size. mdrecall's products are small (one query is a 10×384 by 384×1536 product; a KNN
is one matrix-vector product), so those threads cost more in wake-ups than they save, and on a busy
machine, or beside a document batch, they oversubscribe the cores: one query embedding took 306–629
ms of CPU with OpenBLAS's pool and 20–25 ms with one thread (issue 12).

So, once, the first time mdrecall computes anything (:func:`configure`):

* BLAS runs one thread (threadpoolctl; every BLAS loaded into the process, not only OpenBLAS);
* query-sized work (query embedding, KNN) then runs on the calling thread, single-threaded;
* document batches are split over :func:`document_workers` threads of mdrecall's own, each running
  single-threaded BLAS, so a batch uses a known number of cores and a search that runs meanwhile
  competes with exactly that many threads, not with two thread pools.

``MDRECALL_THREADS`` sets the document workers (default: the usable cores, at most 4). A host
application that wants its own BLAS thread count back can set it after mdrecall has started
(``threadpoolctl.threadpool_limits``); mdrecall does not touch it again.
"""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_configured = False
_limiter: object | None = None  # keeps threadpoolctl's record of the original limits alive

#: Most document workers by default: the model is memory-bound beyond a few cores.
MAX_DEFAULT_WORKERS = 4


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def document_workers() -> int:
    """Threads for a batch of documents (``MDRECALL_THREADS``, else the usable cores, at most 4)."""
    raw = os.environ.get("MDRECALL_THREADS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            pass
    return min(usable_cores(), MAX_DEFAULT_WORKERS)


def configure() -> None:
    """Limit BLAS to one thread, once per process (cheap after the first call)."""
    if not _configured:
        _configure_once()


def _configure_once() -> None:
    global _configured, _limiter
    with _lock:
        if _configured:
            return
        try:
            from threadpoolctl import threadpool_limits

            _limiter = threadpool_limits(limits=1, user_api="blas")
        except Exception:  # threadpoolctl missing or a BLAS it cannot drive: keep the defaults
            _limiter = None
        _configured = True


def configure_torch(torch: object, workers: int | None = None) -> None:
    """torch's intra-op pool for document batches (the caller holds the model's lock)."""
    configure()
    try:
        torch.set_num_threads(workers or document_workers())  # type: ignore[attr-defined]
    except Exception:
        pass


__all__ = ["configure", "configure_torch", "document_workers", "usable_cores"]
