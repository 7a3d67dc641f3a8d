"""What reading ahead while the query is embedded does to a warm hybrid search (search/ahead.py,
``pipeline.keyword_side``), on a workspace and index that ``benchmarks/speed.py --phases model``
built (``ws-N``, ``model-N.sqlite``).

Per search, from the bench questions speed.py asks (95 timed after 5 warm-up): when the main thread
reached the vector side, when the helper had the vector (``computed``), when the search saw it
(``hand-over`` = the difference: the helper needs the GIL back to hand the vector over), and when
the search ended; p50 (and p90 of the hand-over). ``--stop-at ready`` keeps reading ahead until the
vector is there instead of stopping when it is due (``QueryEmbedding.due``): run both, in turn, to
see what stopping early is worth.

``--statements`` instead times supersession's reading of statements never read before
(``restatement.statement`` on made-up chat lines, µs a statement, the minimum of 7 rounds): run it
with ``PYTHONPATH`` on an older tree to compare.

    python benchmarks/read_ahead.py --workdir DIR --size 1000
    python benchmarks/read_ahead.py --workdir DIR --size 1000 --stop-at ready
    python benchmarks/read_ahead.py --statements

Results and their reading: docs/benchmarks.md, "Reading ahead until the embedding is due".
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, help="speed.py's --workdir")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--stop-at", choices=["due", "ready"], default="due")
    ap.add_argument("--statements", action="store_true", help="time first-time statement reading instead")
    args = ap.parse_args(argv)
    if args.statements:
        print(f"statement read for the first time: {_statement_us():.1f} µs (min of 7 rounds)")
        return 0
    if args.workdir is None:
        ap.error("--workdir is needed (or --statements)")
    rows = _searches(args.workdir, args.size, args.queries, args.stop_at)
    ms = {k: [r[k] * 1000 for r in rows] for k in rows[0]}
    handover = sorted(ms["seen"][i] - ms["computed"][i] for i in range(len(rows)))
    print(f"{args.size} chunks, {len(rows)} searches, reading ahead until the embedding is {args.stop_at}:")
    print(f"  main thread at the vector side  p50 {statistics.median(ms['at_vector']):6.2f} ms")
    print(f"  vector computed (helper)        p50 {statistics.median(ms['computed']):6.2f} ms")
    print(f"  hand-over                       p50 {statistics.median(handover):6.3f} ms, p90 {handover[int(len(handover) * 0.9)]:.3f} ms")
    print(f"  search ended                    p50 {statistics.median(ms['end']):6.2f} ms")
    return 0


def _searches(workdir: Path, size: int, queries: int, stop_at: str) -> list[dict[str, float]]:
    import mdrecall.search.ahead as ahead
    import mdrecall.search.pipeline as pipeline
    from mdrecall import open_manager

    if stop_at == "ready":
        ahead.QueryEmbedding.due = ahead.QueryEmbedding.ready  # type: ignore[method-assign]
    marks: dict[str, float] = {}
    compute, finish = ahead.QueryEmbedding.compute, pipeline.Retrieval.finish

    def timed_compute(self: Any) -> None:
        compute(self)
        marks["computed"] = time.perf_counter()

    def timed_finish(self: Any) -> Any:
        marks["at_vector"] = time.perf_counter()
        if self.pending is not None:
            self.pending.result()
        marks["seen"] = time.perf_counter()
        return finish(self)

    ahead.QueryEmbedding.compute = timed_compute  # type: ignore[method-assign]
    pipeline.Retrieval.finish = timed_finish  # type: ignore[method-assign]
    ws = workdir / f"ws-{size}"
    if not ws.is_dir() or not (workdir / f"model-{size}.sqlite").is_file():
        raise SystemExit(f"no ws-{size} and model-{size}.sqlite in {workdir}: build them with "
                         f"benchmarks/speed.py --model-sizes {size} --phases model --workdir {workdir}")  # fmt: skip
    asked = speed.make_queries(ws, queries)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = speed.copy_model_index(workdir, size, Path(tmp))
        m = open_manager(ws, speed._config(str(store), "local"), use_global_config=False)
        try:
            if m.sync().chunks_embedded:
                raise SystemExit("the index was not current: build it with speed.py first")
            for q in asked[:5]:
                m.search(q)
            for q in asked[5:]:
                marks.clear()
                t0 = time.perf_counter()
                m.search(q)
                end = time.perf_counter()
                if "computed" in marks:  # a hybrid search, embedded on the helper
                    rows.append({k: marks[k] - t0 for k in ("at_vector", "computed", "seen")} | {"end": end - t0})
        finally:
            m.close()
    if not rows:
        raise SystemExit("no search embedded its query on a helper thread (one usable core?)")
    return rows


def _statement_us() -> float:
    from mdrecall.search import restatement
    from mdrecall.search.corpus import PorterTokens
    from mdrecall.search.relevance import query_stats

    tokens = PorterTokens()

    class Flat:  # every term equally rare
        def tokens(self, text: str) -> list[str]:
            return tokens.tokens(text)

        def chunk_count(self) -> int:
            return 100

        def doc_freqs(self, terms: object, forms: object, cjk: list[bool]) -> list[int]:
            return [5] * len(cjk)

    words = "support group meeting really great moving transition journey honestly painting beach kids camping hike".split()
    rnd = random.Random(1)
    stats = query_stats("When did Caroline go to the LGBTQ support group meeting?", Flat())
    best = float("inf")
    for _ in range(7):
        lines = [f"- [D{i}:{j}] Caroline: I went to the support group {' '.join(rnd.sample(words, 6))}."
                 + (f" It was on 7 May {2020 + i % 4}." if j % 2 else " It was lovely!")
                 for i in range(40) for j in range(5)]  # fmt: skip
        restatement._PARSED.clear()  # never read before
        start = time.perf_counter()
        for line in lines:
            restatement.statement(line, stats, tokens.tokens)
        best = min(best, (time.perf_counter() - start) / len(lines))
    return best * 1e6


if __name__ == "__main__":
    raise SystemExit(main())
