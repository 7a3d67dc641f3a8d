"""The query's embedding, made on a helper thread while the search does its keyword work.

A hybrid search needs the query vector only from the vector side on: the keyword search, the corpus
statistics and the keyword candidates' evidence need none of it. Embedding the query is the largest
single cost of a search over a small workspace (3-6 ms for the bundled model, a network round trip
for a hosted one), and it runs in native code (onnxruntime, an HTTP read) that lets go of the GIL,
so the two overlap on a second core instead of adding up. The results are the same either way: the
vector is the provider's, and the keyword side computes exactly what it would have after it.

The helpers are daemon threads, kept for the next search (one per search running at once): a
Ctrl-C while a search waits interrupts the wait, and a hosted call that hangs never holds the
process at exit. Providers were already called from any thread (the async API runs searches on
worker threads; embeddings/base.py says so). On a single usable core there is nothing to overlap
with: the embedding is made on the calling thread, when it is asked for.

Work done on the search's thread while it waits is best finished before the embedding is: the helper
needs the GIL back to hand its vector over, and a thread busy in Python gives it up only at its next
blocking call, or after the switch interval (5 ms by default). :meth:`QueryEmbedding.due` says when
to stop: when the embedding is done, or due by how long the provider's recent ones took
(benchmarks/read_ahead.py measures what stopping there is worth: at 1k chunks the search ended
1.0-1.4 ms sooner than reading on until the vector was there).
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable

from mdrecall.threads import usable_cores


class QueryEmbedding:
    """``embed(text)``, started now on a helper thread; :meth:`result` waits for it and returns the
    vector or raises what the provider raised."""

    __slots__ = ("_done", "_due_at", "_embed", "_error", "_taken", "_text", "_value")

    def __init__(self, embed: Callable[[str], list[float]], text: str) -> None:
        self._embed, self._text = embed, text
        self._value: list[float] | None = None
        self._error: BaseException | None = None
        self._done: threading.Event | None = None
        self._due_at = math.inf  # never timed: due when done
        if _overlap():
            self._done = threading.Event()
            typical = _TIMES.typical(embed)
            if typical is not None:
                self._due_at = time.perf_counter() + typical * (1 - _DUE_MARGIN)
            # Held until the helper takes the job: the search waits for that (its GIL free) so the
            # helper reaches the provider's native code now, not at the search's next blocking call.
            self._taken = threading.Lock()
            self._taken.acquire()
            _HELPERS.run(self)
            self._taken.acquire(timeout=_HANDOVER_S)

    def compute(self) -> None:
        if self._done is not None:
            self._taken.release()
        started = time.perf_counter()
        try:
            self._value = self._embed(self._text)
        except BaseException as exc:  # handed to the waiting search, which degrades or re-raises
            self._error = exc
        else:
            _TIMES.record(self._embed, time.perf_counter() - started)

    def finish(self) -> None:
        if self._done is not None:
            self._done.set()

    def ready(self) -> bool:
        """Whether :meth:`result` would return without waiting for the helper (on one core, where
        the embedding is made when asked for, always: there is no idle core to wait on)."""
        return self._done is None or self._done.is_set()

    def due(self) -> bool:
        """Whether the embedding is done or soon will be, by how long the provider's recent ones
        took (the first one: when done): work the search does while it waits should stop here."""
        return self.ready() or time.perf_counter() >= self._due_at

    def result(self) -> list[float]:
        if self._done is None:  # one core: made here, now
            return self._embed(self._text)
        self._done.wait()
        if self._error is not None:
            error, self._error = self._error, None  # raised once; the thread's frames are not kept
            raise error
        return self._value  # type: ignore[return-value]  # what the provider returned


#: The longest the search waits for the helper to take the job (a loaded machine may not run it at
#: once: the search then goes on, as it did before the handover was waited for).
_HANDOVER_S = 0.0005

#: The share of a typical embedding's time left to it alone at the end: the search waits, its GIL
#: free, so the helper hands the vector over at once.
_DUE_MARGIN = 0.15


class _Times:
    """How long each provider's query embeddings take, smoothed (per provider object: a hosted
    model's round trip and the bundled model's few milliseconds are told apart)."""

    def __init__(self) -> None:
        self._by: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def typical(self, embed: Callable[[str], list[float]]) -> float | None:
        owner = getattr(embed, "__self__", embed)
        try:
            with self._lock:
                return self._by.get(owner)
        except TypeError:  # cannot be weakly referenced: never timed, so never guessed
            return None

    def record(self, embed: Callable[[str], list[float]], seconds: float) -> None:
        owner = getattr(embed, "__self__", embed)
        try:
            with self._lock:
                last = self._by.get(owner)
                self._by[owner] = seconds if last is None else last + 0.2 * (seconds - last)
        except TypeError:
            pass


_TIMES = _Times()

#: Idle helpers kept for the next searches; one more that finishes its job then ends (after a
#: burst of searches at once, a server keeps a few threads, not one per search of the burst).
KEEP_IDLE = 4


class _Helpers:
    """Daemon threads that each run one job at a time, started when every one is busy (so a job
    never waits behind another search's embedding) and kept for the next job, up to ``KEEP_IDLE``."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[QueryEmbedding] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        #: Helpers started so far, and those not ended.
        self.started = 0
        self.running = 0

    def run(self, job: QueryEmbedding) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # that helper is this job's
            else:
                self.started += 1
                self.running += 1
                threading.Thread(target=self._serve, name=f"mdrecall-query-embedding-{self.started}", daemon=True).start()
        self._jobs.put(job)

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            job.compute()
            # Counted idle before the search hears back: its next search finds this helper free.
            with self._lock:
                stay = self._idle < KEEP_IDLE
                if stay:
                    self._idle += 1
                else:
                    self.running -= 1
            job.finish()
            if not stay:
                return


_HELPERS = _Helpers()
_OVERLAP: bool | None = None


def _forget_helpers() -> None:
    # A forked child has none of its parent's threads: helpers counted idle would never take a job.
    global _HELPERS
    _HELPERS = _Helpers()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_helpers)


def _overlap() -> bool:
    global _OVERLAP
    if _OVERLAP is None:
        _OVERLAP = usable_cores() > 1
    return _OVERLAP


__all__ = ["QueryEmbedding"]
