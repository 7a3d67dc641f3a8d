"""Retrieval quality on ../shared/bench: LoCoMo (daily + transcripts), LongMemEval dev (transcripts +
daily), CMRC 2018 (Chinese), and an off-topic query set of our own.

For each dataset, provider and mode (hybrid, keyword-only, vector-only) the workspaces are indexed
with mdrecall, every query is asked as of its ``as_of`` time with default settings, and the bench's
own scorer reports recall@1/5/10, MRR@10 and recall@budget (4,000 characters), overall and per
category (with n). A plain BM25 baseline over ~1,600-char line-aligned chunks is computed in the
same run. The off-topic row asks ``benchmarks/data/offtopic.jsonl`` (questions from unrelated
domains) over every workspace of a dataset and reports the share that returns nothing.

    python benchmarks/quality.py --keep /work/bench-data/work        # reuse indexes across runs
    python benchmarks/quality.py --datasets locomo-daily --modes keyword
    python benchmarks/quality.py --providers local e5 --modes hybrid vector
    python benchmarks/quality.py --set query.minScore=0 --sample 3

LongMemEval dev workspaces are built on demand (see the bench README); point ``--lme`` (or
``MDRECALL_LME_DIR``) at the folder they were built into when the bench folder is read-only.
"""

from __future__ import annotations

import argparse
import os

# One BLAS/OpenMP thread per process: NumPy's BLAS threads spin against each other (and against
# other work) on a loaded machine; a MiniLM query embedding measured 12 ms alone and 4 s under load
# with the default thread pool, 20 ms with one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mdrecall import open_manager
from mdrecall.cli import parse_overrides
from mdrecall.config import MemoryConfig
from mdrecall.index.chunking import chunk_markdown
from mdrecall.store.db import IndexDB, StoreOptions

# name: (queries file, workspaces root, sources, which base folder: "bench" or "lme")
DATASETS: dict[str, tuple[str, str, list[str], str]] = {
    "locomo-daily": ("locomo/daily/queries.jsonl", "locomo/daily/workspaces", ["memory"], "bench"),
    "locomo-transcripts": ("locomo/transcripts/queries.jsonl", "locomo/transcripts/workspaces", ["memory", "sessions"], "bench"),
    "lme-transcripts": ("transcripts/queries.jsonl", "transcripts/workspaces", ["memory", "sessions"], "lme"),
    "lme-daily": ("daily/queries.jsonl", "daily/workspaces", ["memory"], "lme"),
    "cmrc": ("cmrc2018_zh/queries.jsonl", "cmrc2018_zh/workspace", ["memory"], "bench"),
}
MODES = {
    "hybrid": {},
    "keyword": {"provider": "none"},
    # The vectors alone, also where the product would skip them (an English-only model, CJK queries).
    "vector": {"query": {"hybrid": {"enabled": False}, "languageCheck": False}},
}
PROVIDERS = {"local": {"provider": "local"}, "e5": {"provider": "e5"}, "auto": {}}
OFFTOPIC = ROOT / "benchmarks" / "data" / "offtopic.jsonl"


class Paths:
    def __init__(self, bench: Path, lme: Path) -> None:
        self.bench, self.lme = bench, lme

    def base(self, dataset: str) -> Path:
        return self.lme if DATASETS[dataset][3] == "lme" else self.bench

    def queries(self, dataset: str) -> Path:
        return self.base(dataset) / DATASETS[dataset][0]

    def ws_root(self, dataset: str) -> Path:
        return self.base(dataset) / DATASETS[dataset][1]

    def workspace(self, dataset: str, query: dict[str, Any]) -> Path:
        if dataset == "cmrc":
            return self.ws_root(dataset)
        return self.ws_root(dataset) / query["workspace"]

    def score_root(self, dataset: str) -> Path:
        return self.ws_root(dataset)


def default_bench_dir() -> Path:
    return Path(os.environ.get("MDRECALL_BENCH_DIR", ROOT.parent / "shared" / "bench"))


def default_lme_dir(bench: Path) -> Path:
    env = os.environ.get("MDRECALL_LME_DIR")
    if env:
        return Path(env)
    built = bench / "longmemeval_dev"
    if (built / "transcripts" / "workspaces").is_dir():
        return built
    return Path("/work/bench-data/longmemeval_dev")


def load_queries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


#: At most this many workspaces per dataset (0: all); set by --max-workspaces, for slow models.
MAX_WORKSPACES = 0
#: (work dir, provider): only workspaces whose kept index for that provider already exists (set by
#: --only-indexed: a partial run where embedding every workspace takes longer than the machine allows).
ONLY_INDEXED: tuple[Path, str] | None = None


def index_path(tmp: Path, dataset: str, ws_name: str, config: dict[str, Any]) -> Path:
    """Where the kept index of one workspace lives (shared by every mode with the same provider)."""
    chunking = config.get("chunking", {})
    # "auto" picks the bundled local model here: share its indexes (the embeddings are the expensive part).
    provider = config.get("provider", "auto")
    identity = f"{'local' if provider == 'auto' else provider}-{chunking.get('tokens', 'd')}-{chunking.get('overlap', 'd')}"
    return tmp / "idx" / f"{dataset}-{identity}-{ws_name}.sqlite"


def indexed(dataset: str, name: str) -> bool:
    if ONLY_INDEXED is None:
        return True
    work, provider = ONLY_INDEXED
    path = index_path(work, dataset, name, {"provider": provider})
    return path.is_file() and path.stat().st_size > 100_000


def sample_queries(dataset: str, queries: list[dict[str, Any]], sample: int) -> list[dict[str, Any]]:
    """Every ``sample``-th workspace (LongMemEval: one workspace per query) or query (the others),
    of the workspaces ``--only-indexed`` allows."""
    if ONLY_INDEXED is not None and dataset != "cmrc":
        queries = [q for q in queries if indexed(dataset, q["workspace"])]
    return _sampled(dataset, queries, sample)


def _sampled(dataset: str, queries: list[dict[str, Any]], sample: int) -> list[dict[str, Any]]:
    if MAX_WORKSPACES and dataset != "cmrc":
        names = sorted({q["workspace"] for q in queries})[:: max(1, sample) if DATASETS[dataset][3] == "lme" else 1][:MAX_WORKSPACES]
        queries = [q for q in queries if q["workspace"] in set(names)]
        if DATASETS[dataset][3] == "lme":
            return queries
    if sample <= 1:
        return queries
    if DATASETS[dataset][3] == "lme":
        names = sorted({q["workspace"] for q in queries})[::sample]
        return [q for q in queries if q["workspace"] in set(names)]
    return queries[::sample]


def config_for(dataset: str, mode: str, provider: str, overrides: dict[str, Any]) -> dict[str, Any]:
    sources = DATASETS[dataset][2]
    base = {"sources": sources, "dreaming": {"enabled": False}, "sync": {"watch": False}}
    config = _merge(base, PROVIDERS[provider] if mode != "keyword" else {})
    return _merge(_merge(config, MODES[mode]), overrides)


#: A file of vectors shared by every workspace's first index (set by --shared-cache): benchmark only.
SHARED_CACHE: Path | None = None


def _seed_from_shared(store: Path) -> bool:
    """Before a workspace's first index: copy every vector of the shared file into its (new) cache,
    so that text embedded for an earlier workspace (LongMemEval's filler sessions recur across
    haystacks) is found by mdrecall's own cache lookup (same embedding space, same text hash)."""
    if SHARED_CACHE is None or store.exists() or not SHARED_CACHE.exists():
        return False
    db = IndexDB(store, StoreOptions())
    try:
        db.seed_cache_from(SHARED_CACHE)
    finally:
        db.close()
    return True


def _settle_shared(store: Path, seeded: bool) -> None:
    """After the first index: drop the seeded vectors no chunk uses (the index then holds what an
    unseeded first index holds, and no more bytes), and add this workspace's vectors to the shared file."""
    if seeded:
        db = IndexDB(store, StoreOptions())
        try:
            db.cache_prune(0)
            db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.conn.execute("VACUUM")  # keeps embedding_cache rowids (INTEGER PRIMARY KEY): chunks still point right
        finally:
            db.close()
    assert SHARED_CACHE is not None
    shared = IndexDB(SHARED_CACHE, StoreOptions())
    try:
        shared.seed_cache_from(store)
        shared.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        shared.close()


def open_indexed(dataset: str, ws: Path, config: dict[str, Any], tmp: Path, timings: dict[str, float]):  # type: ignore[no-untyped-def]
    # Index a private copy: the bench tree is read-only and must stay untouched.
    copy = tmp / "ws" / f"{dataset}-{ws.name}"
    if not copy.exists():
        shutil.copytree(ws, copy)
    store = index_path(tmp, dataset, ws.name, config)
    cfg = _merge(config, {"store": {"path": str(store)}})
    shared = SHARED_CACHE is not None and config.get("provider") != "none"
    first = not store.exists()
    t0, c0 = time.perf_counter(), time.process_time()
    seeded = shared and _seed_from_shared(store)
    manager = open_manager(copy, cfg, use_global_config=False)
    report = manager.sync()
    if shared and first:
        manager.close()
        _settle_shared(store, seeded)
        manager = open_manager(copy, cfg, use_global_config=False)
        manager.sync()  # nothing changed: a no-op that opens the index as a search would
    timings["index_s"] += time.perf_counter() - t0
    timings["index_cpu_s"] += time.process_time() - c0
    timings["chunks_embedded"] += report.chunks_embedded
    timings["cache_hits"] = timings.get("cache_hits", 0) + report.cache_hits
    return manager


def run_mdrecall(
    dataset: str, mode: str, provider: str, paths: Paths, overrides: dict[str, Any], tmp: Path, sample: int,
    offtopic: list[dict[str, Any]] | None,
) -> tuple[Path, dict[str, Any], dict[str, Any] | None]:
    queries = sample_queries(dataset, load_queries(paths.queries(dataset)), sample)
    by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_ws[paths.workspace(dataset, q)].append(q)
    out_path = tmp / f"{dataset}-{provider}-{mode}-{os.getpid()}.jsonl"  # concurrent runs may share tmp
    timings: dict[str, Any] = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0, "cache_hits": 0, "search_s": 0.0,
                               "queries": 0, "workspaces": len(by_ws)}
    config = config_for(dataset, mode, provider, overrides)
    empty = asked = 0
    held_empty = held_asked = 0
    reasons: Counter[str] = Counter()
    with out_path.open("w", encoding="utf-8") as out:
        for ws, items in sorted(by_ws.items()):
            with open_indexed(dataset, ws, config, tmp, timings) as manager:
                t0 = time.perf_counter()
                for q in items:
                    now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00")) if q.get("as_of") else None
                    response = manager.search(q["query"], session_key="main", now=now)
                    results = [
                        {"path": r.path, "startLine": r.start_line, "endLine": r.end_line, "score": r.score}
                        for r in response.results
                    ]
                    out.write(json.dumps({"id": q["id"], "results": results}) + "\n")
                timings["search_s"] += time.perf_counter() - t0
                timings["queries"] += len(items)
                if offtopic:
                    now = datetime.fromisoformat(items[0]["as_of"].replace("Z", "+00:00")) if items[0].get("as_of") else None
                    for item in offtopic:
                        response = manager.search(item["query"], session_key="main", now=now)
                        asked += 1
                        # Off-topic ids ≡ 1 (mod 4) were used to fit the calibration; the rest are held out.
                        held = int(item["id"].rsplit("/", 1)[-1]) % 4 != 1
                        held_asked += held
                        if not response.results:
                            empty += 1
                            held_empty += held
                            reasons[str(getattr(response, "reason", None) or "")] += 1
    off = None
    if offtopic:
        off = {"asked": asked, "empty": empty, "empty_rate": round(empty / max(1, asked), 4),
               "held_out_asked": held_asked, "held_out_empty_rate": round(held_empty / max(1, held_asked), 4),
               "reasons": dict(reasons)}
    return out_path, timings, off


# -- plain BM25 baseline ----------------------------------------------------------------------------
_TOK = re.compile(r"\w+", re.UNICODE)


def _bm25_tokens(text: str) -> list[str]:
    out: list[str] = []
    for tok in _TOK.findall(text.lower()):
        if re.search(r"[\u4e00-\u9fff]", tok):
            out.extend(tok)  # character unigrams for Chinese
        else:
            out.append(tok)
    return out


def run_bm25_baseline(dataset: str, paths: Paths, tmp: Path, sample: int) -> Path:
    """Okapi BM25 (k1 1.2, b 0.75) over line-aligned ~1,600-char chunks, no stop words or stemming."""
    sources = DATASETS[dataset][2]
    queries = sample_queries(dataset, load_queries(paths.queries(dataset)), sample)
    by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_ws[paths.workspace(dataset, q)].append(q)
    out_path = tmp / f"{dataset}-bm25-{os.getpid()}.jsonl"
    with out_path.open("w", encoding="utf-8") as out:
        for ws, items in sorted(by_ws.items()):
            docs: list[tuple[str, int, int, list[str]]] = []
            for path in sorted(ws.rglob("*")):
                if not path.is_file():
                    continue
                rel = path.relative_to(ws).as_posix()
                if path.suffix == ".md":
                    text = path.read_text(encoding="utf-8")
                    for c in chunk_markdown(text, 400, 0):
                        docs.append((rel, c.start_line, c.end_line, _bm25_tokens(c.text)))
                elif path.suffix == ".jsonl" and "sessions" in sources:
                    lines = path.read_text(encoding="utf-8").split("\n")
                    contents = [str(json.loads(l).get("content", "")) for l in lines if l.strip()]
                    start, buf, size = 1, [], 0
                    for i, c in enumerate(contents, 1):
                        if buf and size + len(c) > 1600:
                            docs.append((rel, start, i - 1, _bm25_tokens(" ".join(buf))))
                            start, buf, size = i, [], 0
                        buf.append(c)
                        size += len(c)
                    if buf:
                        docs.append((rel, start, len(contents), _bm25_tokens(" ".join(buf))))
            n = len(docs)
            avgdl = sum(len(d[3]) for d in docs) / max(1, n)
            df: Counter[str] = Counter()
            tfs = []
            for d in docs:
                tf = Counter(d[3])
                tfs.append(tf)
                df.update(tf.keys())
            for q in items:
                terms = set(_bm25_tokens(q["query"]))
                scores = []
                for i, d in enumerate(docs):
                    tf = tfs[i]
                    s = 0.0
                    for t in terms:
                        f = tf.get(t)
                        if not f:
                            continue
                        idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                        s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(d[3]) / avgdl))
                    if s > 0:
                        scores.append((s, i))
                scores.sort(reverse=True)
                results = [
                    {"path": docs[i][0], "startLine": docs[i][1], "endLine": docs[i][2], "score": s} for s, i in scores[:10]
                ]
                out.write(json.dumps({"id": q["id"], "results": results}) + "\n")
    return out_path


def score(dataset: str, paths: Paths, results: Path, sample: int, tmp: Path, gold_key: str = "gold") -> dict[str, Any]:
    queries = paths.queries(dataset)
    if sample > 1 or MAX_WORKSPACES or ONLY_INDEXED:
        # The scorer averages over the queries file: give it only the sampled queries.
        picked = sample_queries(dataset, load_queries(queries), sample)
        queries = tmp / f"{dataset}-queries-sample{sample}-max{MAX_WORKSPACES}-{os.getpid()}.jsonl"
        queries.write_text("".join(json.dumps(q) + "\n" for q in picked), encoding="utf-8")
    cmd = [
        sys.executable, str(paths.bench / "score.py"), str(queries), str(results),
        "--budget-chars", "4000", "--root", str(paths.score_root(dataset)).rstrip("/"), "--gold-key", gold_key,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _command() -> str:
    """How this report was produced: the thread settings that change timings, and the arguments."""
    env = " ".join(f"{k}={os.environ[k]}" for k in ("MDRECALL_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                     "MDRECALL_BENCH_DIR", "MDRECALL_LME_DIR") if k in os.environ)
    return f"{env} python {' '.join(shlex.quote(a) for a in sys.argv)}".strip()


def _commit() -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return proc.stdout.strip() or None


KEYS = ["recall@1", "recall@5", "recall@10", "mrr@10", "recall@budget"]


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    overall = metrics.get("overall", metrics)
    out: dict[str, Any] = {k: round(float(overall[k]), 4) for k in KEYS if k in overall}
    out["n"] = metrics.get("n")
    out["by_category"] = {
        cat: {"n": m["n"], **{k: round(float(m[k]), 4) for k in KEYS if m.get(k) is not None}}
        for cat, m in (metrics.get("by_category") or {}).items()
    }
    return out


def mmr_cost(dataset: str, paths: Paths, tmp: Path, sample: int, provider: str, mode: str) -> dict[str, Any]:
    """CPU time per search with MMR off and on, same index, same queries, interleaved."""
    queries = sample_queries(dataset, load_queries(paths.queries(dataset)), sample)
    by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_ws[paths.workspace(dataset, q)].append(q)
    base = config_for(dataset, mode, provider, {})
    spent = {"off": 0.0, "on": 0.0}
    n = 0
    timings = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0}
    for ws, items in sorted(by_ws.items()):
        with open_indexed(dataset, ws, base, tmp, timings) as manager:
            for q in items:
                now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00")) if q.get("as_of") else None
                for label, enabled in (("off", False), ("on", True), ("off", False), ("on", True)):
                    manager.config.query.mmr.enabled = enabled
                    c0 = time.process_time()
                    manager.search(q["query"], session_key="main", now=now)
                    spent[label] += time.process_time() - c0
                n += 2
            manager.config.query.mmr.enabled = False
    return {"searches_each": n, "plain_ms": round(1000 * spent["off"] / n, 3), "mmr_ms": round(1000 * spent["on"] / n, 3),
            "ratio": round(spent["on"] / max(spent["off"], 1e-9), 3)}


def index_speed(paths: Paths, tmp: Path, chunks: int, providers: list[str]) -> dict[str, Any]:
    """First index of the same ~``chunks`` chunks (LongMemEval messages as dated notes) per provider,
    in one process, one after the other: wall and CPU seconds, and the ratio to the first provider."""
    source = paths.ws_root("lme-daily")
    files = sorted(source.glob("*/memory/*.md"))
    ws = tmp / f"speed-{chunks}"
    if ws.exists():
        shutil.rmtree(ws)
    (ws / "memory").mkdir(parents=True)
    size, budget = 0, chunks * 560  # ~560 characters per 200-token chunk of this text
    for i, f in enumerate(files):
        text = f.read_text(encoding="utf-8")
        (ws / "memory" / f"{i:05d}-{f.name}").write_text(text, encoding="utf-8")
        size += len(text)
        if size >= budget:
            break
    out: dict[str, Any] = {}
    for provider in providers:
        db = tmp / f"speed-{chunks}-{provider}.sqlite"
        for p in tmp.glob(db.name + "*"):
            p.unlink()
        cfg = {"provider": provider, "sources": ["memory"], "dreaming": {"enabled": False}, "sync": {"watch": False},
               "store": {"path": str(db)}, "cache": {"enabled": False}}
        if provider == "e5":  # the same thread count as torch gets here (OMP_NUM_THREADS)
            cfg["providers"] = {"e5": {"options": {"threads": int(os.environ.get("OMP_NUM_THREADS", "1"))}}}
        with open_manager(ws, cfg, use_global_config=False) as manager:
            t0, c0 = time.perf_counter(), time.process_time()
            report = manager.sync()
            out[provider] = {"chunks": report.chunks_written, "wall_s": round(time.perf_counter() - t0, 1),
                             "cpu_s": round(time.process_time() - c0, 1)}
        print(f"index speed {provider}: {out[provider]}", flush=True)
    first = out[providers[0]]
    for provider in providers[1:]:
        out[provider]["wall_ratio"] = round(out[provider]["wall_s"] / max(first["wall_s"], 1e-9), 2)
        out[provider]["cpu_ratio"] = round(out[provider]["cpu_s"] / max(first["cpu_s"], 1e-9), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=default_bench_dir())
    parser.add_argument("--lme", type=Path, default=None, help="folder the LongMemEval dev split was built into")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--modes", nargs="+", default=[*MODES, "bm25"], choices=[*MODES, "bm25"])
    parser.add_argument("--providers", nargs="+", default=["auto"], choices=list(PROVIDERS),
                        help="embedding providers for the hybrid and vector modes (auto: the default)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--sample", type=int, default=1, help="every N-th workspace (LongMemEval) or query")
    parser.add_argument("--max-workspaces", type=int, default=0, help="at most N workspaces per dataset (0: all)")
    parser.add_argument("--only-indexed", default=None, metavar="PROVIDER",
                        help="every mode only on the workspaces already indexed with PROVIDER in --keep (partial runs)")
    parser.add_argument("--offtopic", type=Path, default=OFFTOPIC, help="off-topic queries ('' to skip)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality.json")
    parser.add_argument("--keep", type=Path, default=None, help="work directory to keep (indexes, results)")
    parser.add_argument("--shared-cache", type=Path, default=None, metavar="FILE",
                        help="benchmark only: seed each workspace's first index with the vectors in FILE (an index "
                             "file, created if missing) and add its new vectors to FILE afterwards")
    parser.add_argument("--mmr-cost", action="store_true", help="also measure MMR's cost against a plain search")
    parser.add_argument("--index-speed", type=int, default=0, metavar="CHUNKS",
                        help="also time a first index of about CHUNKS chunks with each of --providers (local first)")
    args = parser.parse_args()
    global MAX_WORKSPACES, ONLY_INDEXED, SHARED_CACHE
    MAX_WORKSPACES = args.max_workspaces
    SHARED_CACHE = args.shared_cache
    if not (args.bench / "score.py").exists():
        print(f"bench data not found at {args.bench} (set MDRECALL_BENCH_DIR)", file=sys.stderr)
        return 2
    paths = Paths(args.bench, args.lme or default_lme_dir(args.bench))
    overrides = parse_overrides(args.set)
    MemoryConfig.model_validate(overrides)  # fail fast on a typo
    offtopic = load_queries(args.offtopic) if str(args.offtopic) and args.offtopic.is_file() else None
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="mdrecall-quality-"))
    tmp.mkdir(parents=True, exist_ok=True)
    if args.only_indexed:
        ONLY_INDEXED = (tmp, args.only_indexed)
    report: dict[str, Any] = {"command": _command(), "commit": _commit(), "overrides": overrides, "sample": args.sample,
                              "max_workspaces": args.max_workspaces, "only_indexed": args.only_indexed,
                              "shared_cache": str(args.shared_cache) if args.shared_cache else None, "results": {}}
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    for dataset in args.datasets:
        if not paths.queries(dataset).exists():
            print(f"{dataset}: not built at {paths.base(dataset)} (skipped)", file=sys.stderr)
            continue
        for mode in args.modes:
            for provider in (["-"] if mode in ("bm25", "keyword") else args.providers):
                if mode == "bm25":
                    t0 = time.perf_counter()
                    path = run_bm25_baseline(dataset, paths, tmp, args.sample)
                    timings: dict[str, Any] = {"total_s": round(time.perf_counter() - t0, 2), "workspaces": len(
                        {q.get("workspace") for q in sample_queries(dataset, load_queries(paths.queries(dataset)), args.sample)})}
                    off = None
                    name = f"{dataset}/bm25"
                else:
                    path, timings, off = run_mdrecall(
                        dataset, mode, "auto" if provider == "-" else provider, paths, overrides, tmp, args.sample,
                        offtopic,
                    )
                    name = f"{dataset}/{mode}" + ("" if provider in ("-", "auto") else f"/{provider}")
                figures = headline(score(dataset, paths, path, args.sample, tmp))
                entry: dict[str, Any] = {**figures, **{k: round(v, 2) for k, v in timings.items()}}
                if timings.get("cache_hits") or SHARED_CACHE is not None and "chunks_embedded" in timings:
                    looked_up = timings["cache_hits"] + timings["chunks_embedded"]
                    entry["cache_hit_rate"] = round(timings["cache_hits"] / looked_up, 4) if looked_up else None
                if dataset == "lme-transcripts":
                    entry["session_gold"] = headline(score(dataset, paths, path, args.sample, tmp, "gold_sessions"))
                if off is not None:
                    entry["offtopic"] = off
                report["results"][name] = entry
                line = "  ".join(f"{k}={figures[k]}" for k in KEYS if k in figures)
                extra = f"  offtopic_empty={off['empty_rate']} held_out={off['held_out_empty_rate']}" if off else ""
                print(f"{name:34s} {line}{extra}", flush=True)
    if args.index_speed:
        report["index_speed"] = index_speed(paths, tmp, args.index_speed, ["local", *[p for p in args.providers if p not in ("local", "auto")]])
    if args.mmr_cost:
        for dataset in args.datasets:
            for mode in [m for m in args.modes if m in ("keyword", "hybrid")]:
                provider = "auto" if mode == "keyword" else args.providers[0]
                cost = mmr_cost(dataset, paths, tmp, args.sample, provider, mode)
                report.setdefault("mmr_cost", {})[f"{dataset}/{mode}"] = cost
                print(f"mmr cost {dataset}/{mode}: {cost}", flush=True)
    report["wall_s"] = round(time.perf_counter() - started_wall, 1)
    report["cpu_s"] = round(time.process_time() - started_cpu, 1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    if args.keep is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
