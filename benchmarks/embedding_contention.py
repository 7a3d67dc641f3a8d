"""How long the bundled model's query embedding takes on a helper thread while the calling thread
works, as a search's keyword side does (search/ahead.py): alone; beside a thread that waits; beside
a GIL-free C loop (SHA-256 of a large buffer); beside pure-Python loops that let go of the GIL
often, with and without allocating. Separates the GIL's share of a slower embedding inside a search
from the other core's (memory traffic: the model streams ~42 MB of weights a query).

    python benchmarks/embedding_contention.py --runs 50

Medians of ``--runs`` embeddings each, wall clock on the helper thread. Results and their reading:
docs/benchmarks.md, "Not done (issue 27)".
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import threading
import time
from collections.abc import Callable

QUERY = "what did Caroline say about the adoption agency?"


def _alone(embed: Callable[[str], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        embed(QUERY)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _helper(embed: Callable[[str], object], took: list[float], done: threading.Event) -> None:
    started = time.perf_counter()
    embed(QUERY)
    took.append(time.perf_counter() - started)
    done.set()


def _beside(embed: Callable[[str], object], busy: Callable[[threading.Event], None], runs: int) -> float:
    times: list[float] = []
    for _ in range(runs):
        done = threading.Event()
        thread = threading.Thread(target=_helper, args=(embed, times, done))
        thread.start()
        busy(done)
        thread.join()
    return statistics.median(times)


def _waits(done: threading.Event) -> None:
    done.wait()


def _c_loop(done: threading.Event) -> None:
    block = b"x" * 200_000
    while not done.is_set():
        hashlib.sha256(block).digest()  # releases the GIL for large inputs


def _python_loop(done: threading.Event) -> None:
    total = 0
    while not done.is_set():
        for i in range(300):
            total += i
        time.sleep(0)  # lets go of the GIL about every 10 µs


def _python_allocating(done: threading.Event) -> None:
    while not done.is_set():
        {i: str(i) for i in range(200)}
        time.sleep(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    from mdrecall.embeddings.local import LocalEmbeddingProvider

    provider = LocalEmbeddingProvider()
    for _ in range(20):  # warm: the session, the arena, the caches
        provider.embed_query(QUERY)
    rows = {
        "alone, on the calling thread": _alone(provider.embed_query, args.runs),
        "helper thread, caller waits": _beside(provider.embed_query, _waits, args.runs),
        "helper thread, caller in a GIL-free C loop": _beside(provider.embed_query, _c_loop, args.runs),
        "helper thread, caller in Python, no allocation": _beside(provider.embed_query, _python_loop, args.runs),
        "helper thread, caller in Python, allocating": _beside(provider.embed_query, _python_allocating, args.runs),
    }
    for label, seconds in rows.items():
        print(f"{label:48s} {seconds * 1000:6.2f} ms median")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
