"""Approximate nearest-neighbour libraries compared for the builtin engine's vectors past the memory budget.

Vectors: real all-MiniLM-L6-v2 embeddings read from existing indexes (``--from``, float16 as stored),
then ``--size`` synthetic ones made from them: each is a random mix of two real vectors (weights
0.2-0.8) plus a little Gaussian noise, normalised, so the set spreads over the region real
embeddings occupy instead of forming artificial clusters (**synthetic, derived from real
embeddings**: 1M chunks cannot be embedded on this machine). Queries: real questions of the bench
(LoCoMo, LongMemEval) embedded with the bundled model. Ground truth: exact cosine top 10.

Per library: build (wall, CPU, all usable cores), recall@10 against exact, query latency (one
thread), memory (RSS growth; file size), incremental insert and delete of 1 %, and what loading a
truncated file does (in a child process: an exception, or a crash).

    python benchmarks/ann.py --from '/path/to/indexes/*.sqlite' --size 200000 --libraries usearch faiss hnswlib
    python benchmarks/ann.py --from '/path/to/indexes/*.sqlite' --size 1000000 --libraries usearch

``--dev-sets`` asks the development sets' questions (benchmarks/quality.py, hybrid, the kept indexes
of ``--keep``) twice: as shipped (every dev-set index is below the memory budget: exact KNN), and
with ``store.vector.memoryCacheMiB`` 0 so that the approximate index answers, built before the first
question and checked to have answered every search; reports recall@budget of both and how many
queries got the same results:

    python benchmarks/ann.py --dev-sets locomo-daily locomo-transcripts --keep /work/bench-data/ann-dev --out ann-devsets.json

Results: docs/benchmarks.md, "Approximate vector index".
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import _percentiles, make_queries


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def real_vectors(pattern: str) -> np.ndarray:
    import apsw

    out = []
    for path in sorted(glob.glob(pattern)):
        conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        dtype = np.float16 if meta.get("vector_encoding") == "float16" else np.float32
        blobs = [r[0] for r in conn.execute("SELECT embedding FROM embedding_cache")]
        conn.close()
        if blobs:
            out.append(np.frombuffer(b"".join(blobs), dtype=dtype).reshape(-1, 384).astype(np.float32))
    if not out:
        raise SystemExit(f"no vectors in {pattern!r}")
    vectors = np.unique(np.concatenate(out).astype(np.float16), axis=0).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def synthesise(real: np.ndarray, size: int, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((size, real.shape[1]), dtype=np.float32)
    for start in range(0, size, 65536):
        n = min(65536, size - start)
        i, j = rng.integers(0, len(real), n), rng.integers(0, len(real), n)
        w = rng.uniform(0.2, 0.8, (n, 1)).astype(np.float32)
        block = w * real[i] + (1 - w) * real[j] + rng.normal(0, 0.1 / np.sqrt(real.shape[1]), (n, real.shape[1])).astype(np.float32)
        out[start : start + n] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    out = np.empty((len(queries), k), dtype=np.int64)
    for qi, q in enumerate(queries):
        sims = vectors @ q
        top = np.argpartition(-sims, k)[:k]
        out[qi] = top[np.argsort(-sims[top])]
    return out


def recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[:10].tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth)]))


class Usearch:
    def __init__(self, dims: int, dtype: str) -> None:
        from usearch.index import Index

        self.dtype = dtype
        self.index = Index(ndim=dims, metric="ip", dtype=dtype, connectivity=16, expansion_add=128, expansion_search=96)

    def add(self, keys: np.ndarray, vectors: np.ndarray, threads: int) -> None:
        self.index.add(keys, vectors, threads=threads)

    def remove(self, keys: np.ndarray) -> None:
        self.index.remove(keys)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.index.search(q, k, threads=1).keys)

    def save(self, path: str) -> None:
        self.index.save(path)

    @staticmethod
    def load_code(path: str) -> str:
        return f"from usearch.index import Index\nIndex.restore({path!r})\n"


class Faiss:
    def __init__(self, dims: int, dtype: str) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        self.faiss = faiss
        if dtype == "f32":
            inner = faiss.IndexHNSWFlat(dims, 16, faiss.METRIC_INNER_PRODUCT)
        else:
            kind = faiss.ScalarQuantizer.QT_fp16 if dtype == "f16" else faiss.ScalarQuantizer.QT_8bit
            inner = faiss.IndexHNSWSQ(dims, kind, 16, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = 128
        self.trained = dtype == "f32"
        self.index = faiss.IndexIDMap2(inner)

    def add(self, keys: np.ndarray, vectors: np.ndarray, threads: int) -> None:
        self.faiss.omp_set_num_threads(threads)
        if not self.trained:
            self.index.train(vectors[:100_000])
            self.trained = True
        self.index.add_with_ids(vectors, keys)
        self.faiss.omp_set_num_threads(1)

    def remove(self, keys: np.ndarray) -> None:
        self.index.remove_ids(keys)  # HNSW cannot delete: raises

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        self.faiss.downcast_index(self.index.index).hnsw.efSearch = max(96, k)  # as search/ann.py
        return self.index.search(q.reshape(1, -1), k)[1][0]

    def save(self, path: str) -> None:
        self.faiss.write_index(self.index, path)

    @staticmethod
    def load_code(path: str) -> str:
        return f"import faiss\nfaiss.read_index({path!r})\n"


class Hnswlib:
    def __init__(self, dims: int, dtype: str) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dims)
        self.capacity = 0

    def add(self, keys: np.ndarray, vectors: np.ndarray, threads: int) -> None:
        need = self.index.get_current_count() + len(keys)
        if self.capacity == 0:
            self.capacity = need + need // 10
            self.index.init_index(max_elements=self.capacity, M=16, ef_construction=128)
            self.index.set_ef(96)
        elif need > self.capacity:
            self.capacity = need + need // 10
            self.index.resize_index(self.capacity)
        self.index.add_items(vectors, keys, num_threads=threads)

    def remove(self, keys: np.ndarray) -> None:
        for key in keys:
            self.index.mark_deleted(int(key))

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        self.index.set_ef(max(96, k))
        return self.index.knn_query(q, k=k, num_threads=1)[0][0]

    def save(self, path: str) -> None:
        self.index.save_index(path)

    @staticmethod
    def load_code(path: str) -> str:
        return f"import hnswlib\ni = hnswlib.Index(space='ip', dim=384)\ni.load_index({path!r})\n"


LIBRARIES: dict[str, Any] = {"usearch": lambda d: Usearch(d, "f16"), "usearch-i8": lambda d: Usearch(d, "i8"), "faiss": lambda d: Faiss(d, "f32"),
                             "faiss-fp16": lambda d: Faiss(d, "f16"), "faiss-sq8": lambda d: Faiss(d, "sq8"), "hnswlib": lambda d: Hnswlib(d, "f32")}


def version_of(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    dist = {"usearch": "usearch", "usearch-i8": "usearch", "faiss": "faiss-cpu", "faiss-fp16": "faiss-cpu", "faiss-sq8": "faiss-cpu",
            "hnswlib": "hnswlib"}[name]
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def bench(name: str, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, work: Path, threads: int) -> dict[str, Any]:
    keys = np.arange(len(vectors), dtype=np.int64)
    rss0 = _rss_mib()
    lib = LIBRARIES[name](vectors.shape[1])
    t0, c0 = time.perf_counter(), time.process_time()
    lib.add(keys, vectors, threads)
    out: dict[str, Any] = {"version": version_of(name), "build_s": round(time.perf_counter() - t0, 1), "build_cpu_s": round(time.process_time() - c0, 1)}
    out["rss_growth_mib"] = round(_rss_mib() - rss0, 1)
    # top 10 as the graph ranks them; top 240 re-scored exactly: what the engine asks for a KNN of
    # 60 candidates (search/ann.py OVERSAMPLE 4)
    for k in (10, 240):
        found, samples = [], []
        for q in queries:
            t = time.perf_counter()
            found.append(lib.search(q, k))
            samples.append(time.perf_counter() - t)
        out[f"recall_at_10_of_top{k}_rescored" if k > 10 else "recall_at_10"] = round(
            recall(found, truth) if k == 10 else _rerank_recall(found, vectors, queries, truth), 4)
        out[f"search_top{k}"] = _percentiles(samples)
    path = str(work / f"{name}.index")
    t0 = time.perf_counter()
    lib.save(path)
    out["save_s"] = round(time.perf_counter() - t0, 2)
    out["file_mib"] = round(os.path.getsize(path) / 2**20, 1)
    # incremental: 1 % new vectors, then 1 % removed
    extra = len(vectors) // 100
    new = synthesise(vectors[:1000], extra, seed=9)
    t0 = time.perf_counter()
    lib.add(np.arange(len(vectors), len(vectors) + extra, dtype=np.int64), new, 1)
    out["insert_1pct_ms_per_vector"] = round((time.perf_counter() - t0) / extra * 1000, 3)
    try:
        t0 = time.perf_counter()
        lib.remove(keys[:extra])
        out["delete_1pct_ms_per_vector"] = round((time.perf_counter() - t0) / extra * 1000, 4)
    except Exception as exc:
        out["delete_1pct_ms_per_vector"] = f"unsupported: {type(exc).__name__}: {str(exc)[:120]}"
    # a damaged file: the first half of it
    broken = work / f"{name}.broken"
    broken.write_bytes(Path(path).read_bytes()[: os.path.getsize(path) // 2])
    proc = subprocess.run([sys.executable, "-c", lib.load_code(str(broken))], capture_output=True, text=True, timeout=600)
    out["truncated_file_load"] = (
        "loads without error (!)" if proc.returncode == 0
        else f"exception: {proc.stderr.strip().splitlines()[-1][:160]}" if proc.returncode == 1
        else f"process died (exit {proc.returncode})"
    )
    os.unlink(broken)
    os.unlink(path)
    return out


def _rerank_recall(found: list[np.ndarray], vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray) -> float:
    """recall@10 after re-scoring the candidates exactly (what the engine does with them)."""
    reranked = []
    for cand, q in zip(found, queries):
        cand = np.asarray([c for c in cand if 0 <= c < len(vectors)], dtype=np.int64)
        sims = vectors[cand] @ q
        reranked.append(cand[np.argsort(-sims)][:10])
    return recall(reranked, truth)


def dev_sets(datasets: list[str], keep: Path) -> dict[str, Any]:
    """The dev sets' hybrid results with exact KNN (as shipped) and with the approximate index."""
    import quality

    paths = quality.Paths(quality.default_bench_dir(), quality.default_lme_dir(quality.default_bench_dir()))
    answered = {"approximate": 0, "searches": 0}
    plain_open = quality.open_indexed

    def open_ready(dataset: str, ws: Path, config: dict[str, Any], tmp: Path, timings: dict[str, float]) -> Any:
        manager = plain_open(dataset, ws, config, tmp, timings)
        if config.get("store", {}).get("vector", {}).get("memoryCacheMiB") == 0:
            if manager.ann is None:
                raise SystemExit("the approximate index is off or unavailable (pip install 'mdrecall[ann]')")
            manager.ann.update()  # built (or brought up to date) before the first question
            before = manager.ann.searches
            search = manager.search

            def counted(*args: Any, **kwargs: Any) -> Any:
                answered["searches"] += 1
                found = search(*args, **kwargs)
                answered["approximate"] += manager.ann.searches - counted.seen  # type: ignore[attr-defined]
                counted.seen = manager.ann.searches  # type: ignore[attr-defined]
                return found

            counted.seen = before  # type: ignore[attr-defined]
            manager.search = counted
        return manager

    quality.open_indexed = open_ready
    out: dict[str, Any] = {}
    for dataset in datasets:
        runs = {}
        for label, overrides in (("exact", {}), ("approximate", {"store": {"vector": {"memoryCacheMiB": 0}}})):
            t0 = time.perf_counter()
            found, _timings, _off = quality.run_mdrecall(dataset, "hybrid", "auto", paths, overrides, keep, 1, None)
            path = found.rename(found.with_name(f"{found.stem}-{label}.jsonl"))  # both runs write one name
            runs[label] = {"path": path, "figures": quality.headline(quality.score(dataset, paths, path, 1, keep)),
                           "wall_s": round(time.perf_counter() - t0, 1)}
        exact = [json.loads(line) for line in runs["exact"]["path"].read_text().splitlines() if line.strip()]
        approx = [json.loads(line) for line in runs["approximate"]["path"].read_text().splitlines() if line.strip()]

        def cited(row: dict[str, Any]) -> list[tuple[str, int, int]]:
            return [(r["path"], r["startLine"], r["endLine"]) for r in row["results"]]

        out[dataset] = {
            "queries": len(exact),
            "recall@budget": {k: runs[k]["figures"]["recall@budget"] for k in runs},
            "recall@10": {k: runs[k]["figures"]["recall@10"] for k in runs},
            "recall@budget_difference": round(runs["approximate"]["figures"]["recall@budget"] - runs["exact"]["figures"]["recall@budget"], 4),
            "same_citations_in_same_order": round(sum(cited(a) == cited(b) for a, b in zip(exact, approx)) / max(1, len(exact)), 4),
            "identical_results_with_scores": round(sum(a == b for a, b in zip(exact, approx)) / max(1, len(exact)), 4),
            "wall_s": {k: runs[k]["wall_s"] for k in runs},
        }
        print(dataset, json.dumps(out[dataset]), file=sys.stderr, flush=True)
    out["searches_with_memoryCacheMiB_0"] = answered["searches"]
    out["answered_by_the_approximate_index"] = answered["approximate"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", default=None, help="glob of mdrecall indexes whose stored vectors seed the set")
    parser.add_argument("--dev-sets", nargs="+", default=None, metavar="DATASET", help="see the module docstring")
    parser.add_argument("--keep", type=Path, default=None, help="quality.py's work directory (with --dev-sets)")
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--libraries", nargs="+", default=["usearch", "faiss", "hnswlib"], choices=sorted(LIBRARIES))
    parser.add_argument("--threads", type=int, default=None, help="build threads (default: the usable cores)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.dev_sets:
        if args.keep is None:
            parser.error("--dev-sets needs --keep (quality.py's work directory)")
        started = time.perf_counter()
        found = {"machine": {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in os.getloadavg()]},
                 "dev_sets": dev_sets(args.dev_sets, args.keep)}
        found["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        found["wall_s"] = round(time.perf_counter() - started, 1)
        text = json.dumps(found, indent=2)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0
    if not args.source:
        parser.error("--from is needed (or --dev-sets)")

    from mdrecall import threads as mdthreads
    from mdrecall.embeddings.local import LocalEmbeddingProvider

    mdthreads.configure()
    threads = args.threads or mdthreads.usable_cores()
    real = real_vectors(args.source)
    vectors = synthesise(real, args.size)
    provider = LocalEmbeddingProvider()
    texts = make_queries(Path("."), args.queries)
    queries = np.asarray([provider.embed_query(t) for t in texts], dtype=np.float32)
    t0 = time.perf_counter()
    truth = exact_top(vectors, queries)
    exact_ms = (time.perf_counter() - t0) / len(queries) * 1000
    results: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_start": [round(x, 2) for x in os.getloadavg()]},
        "vectors": {"real_seed_vectors": len(real), "size": args.size, "synthetic": "mix of two real vectors + noise (see docstring)",
                    "queries": len(queries), "exact_search_ms_per_query": round(exact_ms, 1)},
        "libraries": {},
    }
    with tempfile.TemporaryDirectory(prefix="mdrecall-ann-") as tmp:
        for name in args.libraries:
            if version_of(name) == "not installed":
                results["libraries"][name] = "not installed"
                continue
            results["libraries"][name] = bench(name, vectors, queries, truth, Path(tmp), threads)
            print(name, json.dumps(results["libraries"][name]), file=sys.stderr, flush=True)
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results["machine"]["rss_peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
