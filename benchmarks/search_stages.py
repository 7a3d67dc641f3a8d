"""Where a warm hybrid ``manager.search`` spends its main thread's CPU, stage by stage, on a
workspace and index that ``benchmarks/speed.py --phases model`` built (``ws-N``, ``model-N.sqlite``).

A few top-level functions of search/pipeline.py are wrapped with a thread-CPU clock (a handful of
calls a search: the clocks cost far less than the stages), the bench questions speed.py asks are
searched back to back after 5 warm-up searches, and each stage's mean per search is printed with
its share. Nested stages are indented under score_candidates. ``--dump FILE`` instead writes every
question's results (path, lines, score, vector and text scores, source, snippet digest,
supersession, citation, the explanation with its debug scores) and the search's warnings and
reason at a fixed ``now``, to show that a change leaves the results identical (compare two dumps
byte for byte). The index is copied to a temporary folder first: recall tracking writes to
it, and the reused index must stay as speed.py left it.

    python benchmarks/search_stages.py --workdir DIR --size 1000
    python benchmarks/search_stages.py --workdir DIR --size 1000 --dump before-1000.json
    python benchmarks/search_stages.py --workdir DIR --size 200 --stats   # also os.stat calls a search
    python benchmarks/search_stages.py --workdir DIR --size 1000 --passes 3
    python benchmarks/search_stages.py --workdir DIR --size 1000 --timeline [--passes 2] [--switch-interval 0.0005]

``--passes N`` asks the questions N times over in the same process. The first pass is what speed.py
times (each question once); a chunk's derived data (its keyword profile, its file's lines, its
sentences) is made the first time a search sees it and kept, so later passes show a process whose
caches hold the workspace. Each pass also gives the thread CPU of the ONNX run inside the searches
(on the embedding's helper thread), against the same run alone after the passes, and Python's
garbage collections by generation, inside the searches and between them (src/mdrecall/gcpause.py).

``--timeline`` instead prints when each step begins and ends, wall clock from the start of the
manager's search (medians over the searches), the query embedding's helper thread included: which
step the answer waits on.

Results and their reading: docs/benchmarks.md, "Warm hybrid search beside memweave (same run)".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed

STAGES = [
    ("retrieve", "retrieve (older codes: FTS, query embedding, KNN)"),
    ("Retrieval.__init__", "keyword search (the query embedding started)"),
    ("keyword_side", "keyword candidates' evidence (while embedding)"),
    ("Retrieval.finish", "wait for the query embedding, KNN"),
    ("score_candidates", "score_candidates"),
    ("_candidate_files", "  candidate files (line cache)"),
    ("_people", "  people"),
    ("_speakers", "  named speaker"),
    ("_asking", "  named speaker"),
    ("_speak", "  named speaker"),
    ("_speaker", "  named speaker, per hit (also in supersede, pack)"),
    ("supersede", "supersede"),
    ("pack", "pack"),
    ("explain", "explain"),
]
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True, help="speed.py's --workdir")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dump", type=Path, help="write the results instead of timing")
    ap.add_argument("--stats", action="store_true", help="also count os.stat calls a search (all threads)")
    ap.add_argument("--passes", type=int, default=1, help="ask the questions this many times over (first: speed.py's)")
    ap.add_argument("--timeline", action="store_true", help="when each step begins and ends (wall clock) instead")
    ap.add_argument("--switch-interval", type=float, help="sys.setswitchinterval for the run (seconds)")
    args = ap.parse_args(argv)
    if args.passes < 1:
        ap.error("--passes must be at least 1")
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.timeline:
        return _timeline(args)
    import mdrecall.search.pipeline as pipeline

    spent: dict[str, float] = defaultdict(float)
    for name, label in STAGES:
        owner_name, _, attr = name.rpartition(".")
        owner = getattr(pipeline, owner_name, None) if owner_name else pipeline  # older codes lack some
        if owner is not None and hasattr(owner, attr):
            setattr(owner, attr, _clocked(getattr(owner, attr), label, spent))
    # (a dump compares the explanations' logits too)
    with _warm_manager(args, {"query": {"debugScores": True}} if args.dump else {}) as (m, queries):
        if args.dump:
            args.dump.write_text(json.dumps([_results(m, q) for q in queries], indent=0) + "\n", encoding="utf-8")
            return 0
        timed = queries[5:]
        onnx = _onnx_clock()
        passes = []
        for _ in range(args.passes):
            spent.clear()
            onnx.clear()
            m.flush()
            stat_calls = _counting_stats() if args.stats else None
            with _collections() as collected:
                t0, c0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
                for q in timed:
                    collected.searching = True
                    m.search(q)
                    collected.searching = False
                main_cpu, cpu, wall = time.thread_time() - t0, time.process_time() - c0, time.perf_counter() - w0
            if stat_calls is not None:
                os.stat = stat_calls.real  # type: ignore[assignment]
            passes.append((main_cpu, cpu, wall, dict(spent), list(onnx), stat_calls.count if stat_calls else None, collected))
        onnx.clear()
        e0 = time.thread_time()
        for q in timed:
            m.provider.embed_query(q)
        embed = time.thread_time() - e0
        onnx_alone = list(onnx)
        m.flush()
    n = len(timed)
    for number, (main_cpu, cpu, wall, stages, onnx_runs, stats, collected) in enumerate(passes, 1):
        label = f"pass {number} of {len(passes)}: " if len(passes) > 1 else ""
        print(f"{label}{args.size} chunks, {n} searches: main thread {main_cpu / n * 1000:.1f} ms CPU a search (process "
              f"{cpu / n * 1000:.1f} ms, wall {wall / n * 1000:.1f} ms); query embedding alone {embed / n * 1000:.1f} ms")
        if onnx_runs and onnx_alone:
            print(f"  ONNX run, thread CPU (median): {_median_ms(onnx_runs):.2f} ms inside the searches, "
                  f"{_median_ms(onnx_alone):.2f} ms alone")
        if stats is not None:
            print(f"  os.stat calls a search (all threads): {stats / n:.1f}")
        print(f"  garbage collections, inside the searches / between them: {collected.summary()}")
        for label in dict.fromkeys(label for _, label in STAGES):
            if label in stages:
                print(f"  {label:40s} {stages[label] / n * 1000:6.2f} ms  {stages[label] / main_cpu * 100:5.1f} %")
    return 0


@dataclass
class _Collections:
    """Python's garbage collections (gc.callbacks) by generation: count and ms, inside a search
    or between searches (src/mdrecall/gcpause.py holds them off while a search runs)."""

    searching: bool = False
    inside: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    between: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            (self.inside if self.searching else self.between)[info["generation"]].append(time.perf_counter() - self._started)

    def summary(self) -> str:
        def one(found: dict[int, list[float]]) -> str:
            return ", ".join(f"gen{g} {len(found[g])} ({sum(found[g]) * 1000:.1f} ms)" for g in range(3)) or "none"

        return f"{one(self.inside)} / {one(self.between)}"


@contextmanager
def _collections() -> Iterator[_Collections]:
    import gc

    collected = _Collections()
    gc.callbacks.append(collected)
    try:
        yield collected
    finally:
        gc.callbacks.remove(collected)


def _onnx_clock() -> list[float]:
    """The thread CPU of each ONNX run from now on (onnxruntime's encoder; none with another runtime)."""
    runs: list[float] = []
    try:
        from mdrecall.embeddings.bert_onnx import OnnxBertEncoder
    except ImportError:
        return runs
    real = OnnxBertEncoder.run

    def run(self: Any, sequences: Any) -> Any:
        start = time.thread_time()
        try:
            return real(self, sequences)
        finally:
            runs.append(time.thread_time() - start)

    OnnxBertEncoder.run = run  # type: ignore[method-assign]
    return runs


def _median_ms(seconds: list[float]) -> float:
    import statistics

    return statistics.median(seconds) * 1000


class _StatCounter:
    """``os.stat`` wrapped to count its calls (the freshness check's, the line and date caches')."""

    def __init__(self) -> None:
        self.real, self.count = os.stat, 0

    def __call__(self, *args: Any, **kwargs: Any) -> os.stat_result:
        self.count += 1
        return self.real(*args, **kwargs)


def _counting_stats() -> _StatCounter:
    counter = _StatCounter()
    os.stat = counter  # type: ignore[assignment]
    return counter


def _clocked(fn: Any, label: str, spent: dict[str, float]) -> Any:
    def clocked(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - start

    return clocked


@contextmanager
def _warm_manager(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Iterator[tuple[Any, list[str]]]:
    """A manager on a copy of speed.py's index (recall tracking writes to it), current and warmed by
    the first 5 bench questions; and the questions."""
    from mdrecall import open_manager

    ws = args.workdir / f"ws-{args.size}"
    built = args.workdir / f"model-{args.size}.sqlite"
    if not (ws.is_dir() and built.is_file()):
        raise SystemExit(f"no {ws.name}/ and {built.name} in {args.workdir}: build them first with `python "
                         f"benchmarks/speed.py --sizes {args.size} --model-sizes {args.size} --peer-sizes --cold-size 0 "
                         f"--phases model --workdir {args.workdir}`")  # fmt: skip
    queries = speed.make_queries(ws, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        store = speed.copy_model_index(args.workdir, args.size, Path(tmp))
        with open_manager(ws, {**speed._config(str(store), "local"), **(extra or {})}, use_global_config=False) as m:
            if m.sync().chunks_embedded:
                raise SystemExit("the index was not current: build it with speed.py first")
            for q in queries[:5]:
                m.search(q)
            yield m, queries


#: (module, owner or "", function, label): the steps ``--timeline`` marks.
TIMELINE = [
    ("mdrecall.builtin.manager", "BuiltinMemoryManager", "_search", "search"),
    ("mdrecall.freshness.monitor", "FreshnessMonitor", "before_search", "freshness check"),
    ("mdrecall.search.ahead", "QueryEmbedding", "compute", "query embedding (helper thread)"),
    ("mdrecall.embeddings.bert_onnx", "OnnxBertEncoder", "run", "ONNX run (helper thread)"),
    ("mdrecall.search.pipeline", "Retrieval", "__init__", "keyword search"),
    ("mdrecall.search.pipeline", "", "keyword_side", "keyword side (evidence, work ahead)"),
    ("mdrecall.search.pipeline", "Retrieval", "finish", "wait for the vector, KNN"),
    ("mdrecall.search.vector", "InProcessVectors", "search", "vector search (KNN, candidate rows)"),
    ("mdrecall.search.pipeline", "", "rank_candidates", "rank (score, supersede, pack, explain)"),
    ("mdrecall.search.pipeline", "", "score_candidates", "score"),
]


def _timeline(args: argparse.Namespace) -> int:
    import importlib
    import statistics

    marks: dict[str, float] = {}

    def marked(fn: Any, label: str) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            marks.setdefault(f"{label}: begins", time.perf_counter())
            try:
                return fn(*a, **k)
            finally:
                marks[f"{label}: ends"] = time.perf_counter()

        return wrapper

    for module_name, owner_name, attr, label in TIMELINE:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is not None and hasattr(owner, attr):  # older codes lack some
            setattr(owner, attr, marked(getattr(owner, attr), label))
    passes: list[list[dict[str, float]]] = []
    with _warm_manager(args) as (m, queries):
        for _ in range(args.passes):
            rows: list[dict[str, float]] = []
            for q in queries[5:]:
                marks.clear()
                m.search(q)
                start = marks["search: begins"]
                rows.append({label: (at - start) * 1000 for label, at in marks.items()})
            passes.append(rows)
    for number, rows in enumerate(passes, 1):
        labels = {label for row in rows for label in row}
        medians = {label: statistics.median(row[label] for row in rows if label in row) for label in labels}
        label = f"pass {number} of {len(passes)}: " if len(passes) > 1 else ""
        print(f"{label}{args.size} chunks, {len(rows)} searches, switch interval {sys.getswitchinterval() * 1000:g} "
              "ms: ms from the start of the search (medians)")
        for name, at in sorted(medians.items(), key=lambda item: item[1]):
            print(f"  {at:7.2f}  {name}")
    return 0


def _results(m: Any, query: str) -> dict[str, Any]:
    r = m.search(query, now=NOW)
    hits = [[h.path, h.start_line, h.end_line, h.score, h.vector_score, h.text_score, h.source,
             hashlib.sha1(h.snippet.encode()).hexdigest(), h.superseded_by, h.citation,
             json.dumps(h.explanation, sort_keys=True)] for h in r.results]  # fmt: skip
    return {"q": query, "mode": r.mode, "warnings": r.warnings, "reason": r.reason, "hits": hits}


if __name__ == "__main__":
    import interruptible

    interruptible.run(main)
