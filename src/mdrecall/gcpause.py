"""Python's cyclic garbage collector held off while a search runs, and let run after it.

A warm hybrid search makes ~1,200 container objects that live until it ends (candidates, hits,
their evidence, the tuples and lists between steps). The collector counts allocations, so a
youngest-generation collection fell inside nearly every search (1.4 a search at 1k chunks, 0.14 ms
each) and walked those objects while they were alive; surviving it moved them to the next
generation, whose collections (1 ms, every ~8 searches) walked them again. After the search they
are freed by their reference counts alone, so a collection there walks only what the search kept
(the caches' new entries). ``benchmarks/search_stages.py`` counts both.

Only the automatic collections wait, only while a search runs, and only when the collector was on:
``gc.collect()`` still collects, and a process that turned the collector off keeps it off. Searches
that overlap on several threads share one pause: the last to end turns the collector back on. A
server whose searches overlap without a break would never get there, so a search that ends while
the pause has lasted ``MAX_PAUSE_S`` runs the collection that was due, as the collector would have.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The longest the collector's automatic runs wait while searches overlap without a break.
MAX_PAUSE_S = 1.0

_LOCK = threading.Lock()
_RUNNING = 0
#: Whether the first of the running searches found the collector on (and so turned it off).
_TURNED_OFF = False
#: When the collector was turned off, or last collected for overlapping searches.
_PAUSED_AT = 0.0


@contextmanager
def deferred_collection() -> Iterator[None]:
    """The collector's automatic runs held off inside the block (see the module's docstring)."""
    global _RUNNING, _TURNED_OFF, _PAUSED_AT
    with _LOCK:
        if _RUNNING == 0:
            _TURNED_OFF = gc.isenabled()
            if _TURNED_OFF:
                gc.disable()
                _PAUSED_AT = time.monotonic()
        _RUNNING += 1
    try:
        yield
    finally:
        collect = False
        with _LOCK:
            _RUNNING -= 1
            if _RUNNING == 0 and _TURNED_OFF:
                _TURNED_OFF = False
                gc.enable()
            elif _TURNED_OFF and time.monotonic() - _PAUSED_AT >= MAX_PAUSE_S:
                _PAUSED_AT = time.monotonic()
                collect = True
        if collect:
            _collect_due()


def _collect_due() -> None:
    """The generation the collector would collect now by its counts and thresholds (none if none is due)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if not thresholds[0]:
        return  # automatic collection set off by threshold 0: nothing is ever due
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            gc.collect(generation)
            return


__all__ = ["deferred_collection"]
