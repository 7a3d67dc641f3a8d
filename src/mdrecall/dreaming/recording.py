"""Recording recalls: every search's hits on short-term material go into the recall store.

``install_recall_tracking(manager)`` registers :func:`record_recalls` as a search listener, so every
``memory_search`` (agent tool, MCP, CLI) is recorded in one place. A listener must never break a
search: failures are logged and swallowed.

Per search, each hit on a daily note or a transcript is narrowed to the fact(s) the query was about
(blocks.py), and each fact's entry gets one signal: ``recallCount`` +1, its raw score added to
``totalScore``, its score relative to the search's best hit added to ``totalRelevance``, the query hash
and the day added to ``queryHashes``/``recallDays``. A fact seen in two overlapping chunks of one search
counts once; the same query surfacing the same fact again on the same day counts once
(``dedupeByQueryPerDay``). Contaminated text and text already promoted are never recorded.

Why this module is long: narrowing hits to facts, the background writer and grounding all update the
same entries under the same rules; one module keeps those rules in one place.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall.config import default_config
from mdrecall.dreaming.blocks import (
    Block,
    blocks_in_range,
    markdown_blocks,
    normalize,
    overlap,
    query_hash,
    text_hash,
    transcript_blocks,
)
from mdrecall.dreaming.clock import day_bucket, ensure_aware, from_iso, to_iso
from mdrecall.dreaming.config import dreaming_config, sessions_dir
from mdrecall.dreaming.contamination import is_contaminated, is_dreaming_output_file
from mdrecall.dreaming.entry import MAX_QUERY_HASHES, MAX_RECALL_DAYS, RecallEntry
from mdrecall.dreaming.paths import is_short_term, normalize_path
from mdrecall.dreaming.scoring import clamp01
from mdrecall.dreaming.store import RecallStore
from mdrecall.errors import PathError
from mdrecall.sources.redact import redact_markdown
from mdrecall.sources.workspace import read_memory_bytes, resolve_memory_path
from mdrecall.types import SearchHit, SearchResponse

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager

log = logging.getLogger(__name__)

SIGNALS = ("recall", "daily", "grounded")
_INTERNAL_QUERY_PREFIX = "__dreaming"


@dataclass
class Hit:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str


@dataclass
class Fact:
    source: str
    path: str
    start_line: int
    end_line: int
    text: str
    heading: str | None
    passage: bool
    score: float
    relevance: float
    context: str = ""  # the enclosing list item / paragraph, for contamination checks


@dataclass
class RecordSummary:
    hits: int = 0  # short-term hits seen
    recorded: int = 0  # entry updates written
    skipped: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _as_hit(result: SearchHit | Mapping[str, Any]) -> Hit | None:
    """A search hit, or its JSON shape (snake_case or camelCase keys, as tools and replays give it)."""
    if isinstance(result, SearchHit):
        # Read directly: ``to_dict`` deep-copies the explanation tree, which was half of what
        # recording a search cost.
        if not result.path:
            return None
        start = int(result.start_line or 1)
        return Hit(normalize_path(result.path), start, max(start, int(result.end_line or start)), float(result.score or 0.0),
                   result.snippet or "", result.source or "memory")
    data: Mapping[str, Any] = result

    def get(*names: str) -> Any:
        return next((data[name] for name in names if name in data), None)

    path = get("path")
    if not isinstance(path, str) or not path:
        return None
    try:
        start = int(get("start_line", "startLine") or 1)
        end = int(get("end_line", "endLine") or start)
        score = float(get("score") or 0.0)
    except (TypeError, ValueError):
        return None
    return Hit(normalize_path(path), start, max(start, end), score, str(get("snippet") or ""), str(get("source") or "memory"))


class _SourceReader:
    """Reads each hit's live file once per search, so a hit can be narrowed to whole blocks.

    With ``cache`` (the background recorder's, kept across searches), a file whose size and mtime
    did not change is not read and parsed again."""

    def __init__(self, workspace: Path, sessions_dir: str | None, cache: BlockCache | None = None) -> None:
        self.workspace = workspace
        self.sessions_dir = sessions_dir
        self._cache: dict[tuple[str, str], list[Block] | None] = {}
        self._shared = cache

    def blocks(self, source: str, path: str) -> list[Block] | None:
        key = (source, path)
        if key not in self._cache:
            shared = self._shared
            stamp = shared.stamp(self.workspace, path) if shared is not None else None
            hit = shared.get(key, stamp) if shared is not None and stamp is not None else None
            if hit is not None:
                self._cache[key] = hit[0]
            else:
                self._cache[key] = read_source_blocks(self.workspace, source, path, self.sessions_dir)
                if shared is not None and stamp is not None:
                    shared.put(key, stamp, self._cache[key])
        return self._cache[key]


class BlockCache:
    """Parsed blocks of recently recalled files, keyed by (source, path) and valid while the
    file's (mtime, size) stay the same. Bounded; oldest out first."""

    def __init__(self, max_files: int = 512) -> None:
        self.max_files = max_files
        self._items: dict[tuple[str, str], tuple[tuple[int, int], list[Block] | None]] = {}

    @staticmethod
    def stamp(workspace: Path, path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(workspace / path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def get(self, key: tuple[str, str], stamp: tuple[int, int]) -> tuple[list[Block] | None] | None:
        item = self._items.get(key)
        if item is None or item[0] != stamp:
            return None
        return (item[1],)

    def put(self, key: tuple[str, str], stamp: tuple[int, int], blocks: list[Block] | None) -> None:
        self._items.pop(key, None)
        self._items[key] = (stamp, blocks)
        while len(self._items) > self.max_files:
            self._items.pop(next(iter(self._items)))


#: Files larger than this are not re-parsed on every search; the hit's own snippet is used instead.
MAX_PARSE_BYTES = 512 * 1024
#: Short-term notes live under memory/ (paths.is_daily_note), so the default roots are the right ones.
_SHORT_TERM_CONFIG = default_config()
#: Characters of a block compared with the query; a giant pasted message costs no more than this.
MAX_MATCH_CHARS = 4000


def read_source_blocks(workspace: Path, source: str, path: str, sessions_dir: str | None = None) -> list[Block] | None:
    """Blocks of a short-term file as it is now; None when it cannot be read (moved, deleted)."""
    from mdrecall.dreaming.sources import is_entry_path, read_entry_blocks

    if is_entry_path(path):  # an entry of a registered source, e.g. "ltm:<id>" (sources.py)
        return read_entry_blocks(workspace, path)
    try:
        if (workspace / path).stat().st_size > MAX_PARSE_BYTES:
            return None  # recording must stay cheap: fall back to the hit's snippet
    except OSError:
        pass
    if source == "sessions":
        return _transcript_blocks(workspace, path, sessions_dir)
    # Read as memory_get reads (no link out of memory/, no hard link to outside, secrets redacted):
    # what is recorded here can end up in the recall store, the review queue and MEMORY.md.
    try:
        real, _ = resolve_memory_path(workspace, _SHORT_TERM_CONFIG, path)
        raw = read_memory_bytes(workspace, _SHORT_TERM_CONFIG, real, MAX_PARSE_BYTES)
    except (PathError, OSError):
        return None
    text = redact_markdown(raw.decode("utf-8", errors="replace"))
    if is_dreaming_output_file(text):
        return []  # a dream report or queue saved under memory/: nothing in it is a recall
    return markdown_blocks(text)


def _real(workspace: Path) -> Path:
    return Path(os.path.realpath(workspace))


def _transcript_blocks(workspace: Path, path: str, sessions_dir: str | None) -> list[Block] | None:
    """A transcript's rendered lines (``User: …``), cited by JSONL line as the index cites them."""
    from mdrecall.sources.transcripts import DEFAULT_SESSIONS_DIR, render_transcript, sessions_root

    file = Path(path) if Path(path).is_absolute() else workspace / path
    parts = path.split("/")
    if not file.is_file() and len(parts) == 3 and parts[0] == "sessions":
        # The workspace-independent form "sessions/<sessionKey>/<file>.jsonl".
        file = sessions_root(workspace, sessions_dir or DEFAULT_SESSIONS_DIR) / parts[1] / "transcripts" / parts[2]
    try:
        raw = file.read_bytes()
    except OSError:
        return None
    rendered = render_transcript(raw)
    return transcript_blocks(rendered.lines, rendered.line_map)


def _snippet_blocks(hit: Hit) -> list[Block]:
    if hit.source == "sessions":
        lines = hit.snippet.split("\n")
        return transcript_blocks(lines, [hit.start_line + i for i in range(len(lines))])
    shifted = []
    for b in markdown_blocks(hit.snippet):
        shifted.append(Block(b.start_line + hit.start_line - 1, b.end_line + hit.start_line - 1, b.text, b.heading, b.group))
    return shifted


MAX_FACTS_PER_HIT = 3


def extract_facts(query: str, hits: Iterable[Hit], reader: _SourceReader, top_score: float) -> list[Fact]:
    """The facts one search recalled (see "What counts as a recall" in docs/dreaming.md).

    Every block of every short-term hit is matched against the query's terms. The facts recalled are
    the blocks that match as many terms as the best block of the whole search does: a fact that only
    shares a generic word ("port", "budget") with the query while another fact matches the name in it
    was merely surfaced alongside, not recalled. When no block shares a term with the query (a purely
    semantic match), the search's best short-term hit is recorded, as one passage.
    """
    prepared: list[tuple[Hit, list[tuple[int, Block]]]] = []
    best = 0
    for hit in hits:
        live = reader.blocks(hit.source, hit.path)
        if live == []:
            continue  # readable but holds nothing to record (dreaming output)
        candidates = blocks_in_range(live, hit.start_line, hit.end_line) if live is not None else []
        if not candidates:
            candidates = _snippet_blocks(hit)
        scored = [(overlap(query, b.text[:MAX_MATCH_CHARS] + " " + (b.heading or "")), b) for b in candidates]
        if scored:
            best = max(best, max(n for n, _ in scored))
            prepared.append((hit, scored))

    chosen: list[tuple[Hit, list[list[Block]], bool]] = []
    if best > 0:
        for hit, scored in prepared:
            winners = [b for n, b in scored if n == best][:MAX_FACTS_PER_HIT]
            if winners:
                chosen.append((hit, [[b] for b in winners], False))
    elif prepared:
        hit, scored = max(prepared, key=lambda p: p[0].score)
        blocks = [b for _, b in scored]
        chosen.append((hit, [blocks], len(blocks) > 1))

    facts: dict[tuple[str, str, str], Fact] = {}
    for hit, groups, passage in chosen:
        relevance = clamp01(hit.score / top_score) if top_score > 0 else 0.0
        for group in groups:
            text = "\n".join(b.text for b in group)
            fact = Fact(
                source=hit.source,
                path=hit.path,
                start_line=min(b.start_line for b in group),
                end_line=max(b.end_line for b in group),
                text=text,
                heading=group[0].heading,
                passage=passage,
                score=hit.score,
                relevance=relevance,
                context=" ".join(dict.fromkeys(b.group or b.text for b in group)),
            )
            ident = (fact.source, fact.path, text_hash(text))
            previous = facts.get(ident)
            # Overlapping chunks of one search can both contain a fact: count it once, at its best.
            if previous is None or (fact.score, fact.relevance) > (previous.score, previous.relevance):
                facts[ident] = fact
    return list(facts.values())


def entry_key(source: str, path: str, claim_hash: str) -> str:
    return f"{source}:{path}#{claim_hash}"


def _apply_signal(entry: RecallEntry, fact: Fact, qhash: str, day: str, stamp: str, now: datetime, signal: str) -> None:
    if signal == "daily":
        entry.daily_count += 1
    elif signal == "grounded":
        entry.grounded_count += 1
    else:
        entry.recall_count += 1
    entry.total_score += clamp01(fact.score)
    entry.max_score = max(entry.max_score, fact.score)
    entry.total_relevance += fact.relevance
    if qhash not in entry.query_hashes:
        entry.query_hashes = (entry.query_hashes + [qhash])[-MAX_QUERY_HASHES:]
    if day not in entry.recall_days:
        entry.recall_days = sorted(entry.recall_days + [day])[-MAX_RECALL_DAYS:]
    if entry.last_day != day:
        entry.last_day, entry.last_day_queries = day, []
    if qhash not in entry.last_day_queries:
        entry.last_day_queries = (entry.last_day_queries + [qhash])[-MAX_QUERY_HASHES:]
    first_signal = entry.recall_count + entry.daily_count + entry.grounded_count == 1
    if first_signal or fact.text != entry.snippet:
        # The same fact's text gives the same tags (none, for many facts): computed on the entry's
        # first signal and again only when the text changes. Imported here, so that a search
        # recalling only facts already tagged (a one-shot command asking again) does not load the tagger.
        from mdrecall.dreaming.concepts import concept_tags

        entry.concept_tags = concept_tags(fact.path, fact.text) or entry.concept_tags
    first = from_iso(entry.first_recalled_at)
    if first is None or now < first:
        entry.first_recalled_at = stamp
    last = from_iso(entry.last_recalled_at)
    if last is None or now >= last:
        entry.last_recalled_at = stamp
        entry.snippet, entry.heading = fact.text, fact.heading
        entry.start_line, entry.end_line = fact.start_line, fact.end_line


@dataclass
class _PreparedRecall:
    """One search's facts, extracted and ready to apply to the store."""

    summary: RecordSummary
    facts: list[Fact]
    qhash: str = ""
    day: str = ""
    stamp: str = ""
    now: datetime | None = None
    signal: str = "recall"


def _prepare_recall(
    workspace: Path, query: str, results: Iterable[Any], now: datetime | None, config: Any, cfg: Any, signal: str,
    cache: BlockCache | None = None,
) -> _PreparedRecall:
    """Everything that does not need the store: the facts a search recalled (reads the live files)."""
    summary = RecordSummary()
    clean_query = normalize(query or "")
    if not clean_query or clean_query.startswith(_INTERNAL_QUERY_PREFIX):
        return _PreparedRecall(summary, [])
    all_hits = [h for h in (_as_hit(r) for r in (results or [])) if h is not None]
    hits = [h for h in all_hits if is_short_term(h.path, h.source, track_sessions=cfg.trackSessions)]
    summary.hits = len(hits)
    if not hits:
        return _PreparedRecall(summary, [])
    now = ensure_aware(now)
    top = max(h.score for h in all_hits)
    facts = []
    for fact in extract_facts(clean_query, hits, _SourceReader(workspace, sessions_dir(config), cache), top):
        if is_contaminated(fact.text) or is_contaminated(fact.context):
            summary.skip("contaminated")
        else:
            facts.append(fact)
    return _PreparedRecall(summary, facts, query_hash(clean_query), day_bucket(now, cfg.tz()), to_iso(now), now, signal)


def _apply_recall(state: Any, prepared: _PreparedRecall, cfg: Any) -> None:
    summary, day, qhash = prepared.summary, prepared.day, prepared.qhash
    for fact in prepared.facts:
        claim = text_hash(fact.text)
        if claim in state.promoted_hashes:
            summary.skip("already promoted")
            continue
        key = entry_key(fact.source, fact.path, claim)
        entry = state.entries.get(key)
        if entry is None:
            entry = RecallEntry(
                key=key, path=fact.path, source=fact.source, start_line=fact.start_line,
                end_line=fact.end_line, snippet=fact.text, heading=fact.heading,
                passage=fact.passage, claim_hash=claim,
            )
            state.entries[key] = entry
        elif entry.promoted_at:
            summary.skip("already promoted")
            continue
        if cfg.dedupeByQueryPerDay and entry.last_day == day and qhash in entry.last_day_queries:
            summary.skip("same query today")
            continue
        _apply_signal(entry, fact, qhash, day, prepared.stamp, prepared.now, prepared.signal)  # type: ignore[arg-type]
        summary.recorded += 1
        summary.keys.append(key)


def record_recalls(
    workspace: Path | str,
    query: str,
    results: Iterable[Any],
    now: datetime | None = None,
    *,
    config: Any = None,
    session_key: str | None = None,
    signal: str = "recall",
) -> RecordSummary:
    """Record one search's short-term hits. ``config``: a MemoryConfig, DreamingConfig or mapping."""
    del session_key  # recalls are per workspace; the searching session does not change what was recalled
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    cfg = dreaming_config(config)
    if not (cfg.enabled and cfg.tracking):
        return RecordSummary()
    return record_recalls_batch(Path(workspace), [("recall", query, results, now, signal)], config=config)[0]


#: A queued signal: ("recall", query, results, now, signal) or ("grounding", path, from_line, lines, now).
RecallJob = tuple[Any, ...]


@dataclass
class _Grounding:
    """One ``memory_get`` read, ready to apply to the store."""

    rel: str
    start: int
    end: int
    day: str
    now: datetime


def record_recalls_batch(
    workspace: Path, jobs: Sequence[RecallJob], *, config: Any = None, store: RecallStore | None = None,
    cache: BlockCache | None = None,
) -> list[RecordSummary]:
    """Record searches and reads, in order, with one store update; one summary per search.
    ``store`` and ``cache``: the background recorder's, kept between batches."""
    cfg = dreaming_config(config)
    steps: list[_PreparedRecall | _Grounding] = []
    for job in jobs:
        if job[0] == "grounding":
            _, path, from_line, lines, now = job
            now = ensure_aware(now)
            steps.append(_Grounding(*_grounding_range(path, from_line, lines), day_bucket(now, cfg.tz()), now))
        else:
            _, query, results, now, signal = job
            steps.append(_prepare_recall(workspace, query, results, now, config, cfg, signal, cache))
    work = [s for s in steps if isinstance(s, _Grounding) or s.facts]
    store = store or RecallStore(workspace, cfg)
    # Reads only touch entries already recalled: with no store yet there is nothing to ground.
    if work and (any(isinstance(s, _PreparedRecall) for s in work) or store.exists()):
        with store.update(max(s.now for s in work if s.now is not None)) as state:
            for step in work:
                if isinstance(step, _Grounding):
                    _apply_grounding(state, step.rel, step.start, step.end, step.day)
                else:
                    _apply_recall(state, step, cfg)
    return [s.summary for s in steps if isinstance(s, _PreparedRecall)]


class RecallWriter:
    """Records searches on a background thread, so recall tracking adds nothing to search latency.

    Searches queue up and are recorded together, in order, with one store update (one locked
    read-modify-write instead of one per search), once searches pause for ``idle_s``, or when
    ``max_batch`` are waiting, or when the oldest has waited ``max_wait_s``: a burst of searches is
    not slowed by recording competing for the interpreter. ``flush()`` records everything queued
    now; the manager flushes on ``close()``. A crash can lose at most the searches still queued:
    recall counts are evidence for promotion, never the memory itself.
    """

    def __init__(
        self, workspace: Path, config: Any, *, idle_s: float = 0.25, max_batch: int = 256, max_wait_s: float = 5.0
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.idle_s, self.max_batch, self.max_wait_s = idle_s, max_batch, max_wait_s
        self._queue: list[RecallJob] = []
        self._first_at = self._last_at = 0.0
        self._busy = False
        self._closed = False
        self._flushing = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.batches = 0  # store updates made (observability, tests)
        self.recorded = 0  # searches and reads recorded
        self.seconds = 0.0  # time spent recording (benchmarks)
        self.cpu_seconds = 0.0  # CPU time of the recording thread (benchmarks)
        self.store_seconds = 0.0  # of which in the store (lock, read, write, commit)
        self.last_error: str | None = None
        self._store: _TimedStore | None = None
        self._cache = BlockCache()

    def submit(self, query: str, results: Any, now: datetime | None) -> None:
        self._put(("recall", query, list(results or []), now, "recall"))

    def submit_grounding(self, path: str, from_line: int | None, lines: int | None, now: datetime | None) -> None:
        # Queued behind the searches before it: a read of a fact just recalled must find its entry.
        self._put(("grounding", path, from_line, lines, now))

    def _put(self, job: RecallJob) -> None:
        with self._cond:
            if self._closed:
                return
            now = time.monotonic()
            if not self._queue:
                self._first_at = now
            self._last_at = now
            self._queue.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mdrecall-recall-writer", daemon=True)
                self._thread.start()
            # Woken only when this job changes what it waits for: the first job (it waits for any)
            # or a full batch (due now). A later job only moves the idle deadline later, which the
            # writer reads when its wait ends. Woken on every search, it took the interpreter at
            # the start of the next one, beside the query embedding's helper.
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify_all()

    def _due_in(self) -> float:
        """Seconds until the queued batch should be written (0: now)."""
        if self._closed or self._flushing or len(self._queue) >= self.max_batch:
            return 0.0
        now = time.monotonic()
        return max(0.0, min(self._last_at + self.idle_s - now, self._first_at + self.max_wait_s - now))

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if not self._queue:
                    return
                while (delay := self._due_in()) > 0:
                    self._cond.wait(delay)
                batch, self._queue = self._queue, []
                self._busy = True
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                if self._store is None:
                    self._store = _TimedStore(self.workspace, dreaming_config(self.config), keep_open=True)
                record_recalls_batch(self.workspace, batch, config=self.config, store=self._store, cache=self._cache)
                self.batches += 1
                self.recorded += len(batch)
            except Exception as exc:  # never let one bad batch stop recording
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("recall tracking failed for %s: %s", self.workspace, exc)
                if self._store is not None:
                    self._store.close()  # reopened (and checked) by the next batch
            finally:
                self.seconds += time.perf_counter() - started
                self.cpu_seconds += time.thread_time() - cpu
                if self._store is not None:
                    self.store_seconds = self._store.seconds
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        with self._cond:
            queued = len(self._queue)
        searches = max(1, self.recorded)
        return {
            "queued": queued,
            "recorded": self.recorded,
            "storeUpdates": self.batches,
            # CPU of the recording thread per recorded search or read, and of its store updates alone.
            "cpuMsPerSearch": round(self.cpu_seconds / searches * 1000, 3),
            "storeCpuMsPerSearch": round(self.store_seconds / searches * 1000, 3),
            "lastError": self.last_error,
        }

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Record everything queued now and wait for it; False if ``timeout`` passed first."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = 30.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._store is not None:
            self._store.close()


class _TimedStore(RecallStore):
    """The recorder's store, timing its updates (CPU of the recording thread)."""

    seconds = 0.0

    @contextmanager
    def update(self, now: datetime | None = None, *, dry_run: bool = False) -> Iterator[Any]:
        cpu = time.thread_time()
        with super().update(now, dry_run=dry_run) as state:
            paused = time.thread_time()
            yield state
            cpu += time.thread_time() - paused  # the caller's work on the state is not the store's
        self.seconds += time.thread_time() - cpu


def record_grounding(
    workspace: Path | str,
    path: str,
    from_line: int | None,
    lines: int | None,
    now: datetime | None = None,
    *,
    config: Any = None,
) -> int:
    """Count a ``memory_get`` read of recalled lines as a grounded signal (at most once a day per entry).

    Only entries already recalled are touched: reading a note is evidence that a surfaced fact was
    used, not a recall by itself. Returns the number of entries updated.
    """
    cfg = dreaming_config(config)
    if not (cfg.enabled and cfg.tracking):
        return 0
    rel, start, end = _grounding_range(path, from_line, lines)
    now = ensure_aware(now)
    day = day_bucket(now, cfg.tz())
    store = RecallStore(Path(workspace), cfg)
    if not store.exists():
        return 0
    with store.update(now) as state:
        return _apply_grounding(state, rel, start, end, day)


def _grounding_range(path: str, from_line: int | None, lines: int | None) -> tuple[str, int, int]:
    start = max(1, from_line or 1)
    return normalize_path(path), start, start + lines - 1 if lines else 10**9


def _apply_grounding(state: Any, rel: str, start: int, end: int, day: str) -> int:
    updated = 0
    # Only this note's entries (keys are "<source>:<path>#<claim>"): the others stay unparsed text.
    prefix = entry_key("memory", rel, "")
    for key in state.entries.keys_with_prefix(prefix):
        entry = state.entries.get(key)
        if entry is None or entry.path != rel or entry.promoted_at or entry.last_grounded_day == day:
            continue
        if entry.start_line <= end and entry.end_line >= start:
            entry.grounded_count += 1
            entry.total_relevance += 1.0
            entry.last_grounded_day = day
            updated += 1
    return updated


def install_recall_tracking(manager: MemorySearchManager) -> bool:
    """Record recalls of a manager's searches and reads; False when tracking is switched off."""
    cfg = manager.config.dreaming
    if not (cfg.enabled and cfg.tracking):
        return False
    workspace = Path(manager.workspace)
    writer = RecallWriter(workspace, manager.config)

    def on_search(query: str, response: SearchResponse, session_key: str | None, now: datetime | None) -> None:
        del session_key  # recalls are per workspace
        if query and response.results:
            writer.submit(query, response.results, now)

    def on_read(path: str, from_line: int | None, lines: int | None, now: datetime | None = None) -> None:
        try:
            if is_short_term(normalize_path(path), "memory", track_sessions=cfg.trackSessions):
                writer.submit_grounding(path, from_line, lines, now)
        except Exception as exc:
            log.warning("recall grounding failed for %s: %s", workspace, exc)

    manager.add_search_listener(on_search)
    manager.add_read_listener(on_read)
    manager.add_flush_hook(writer.flush)
    manager.add_close_hook(writer.close)
    # Recall tracking for promotion (dreaming), recorded on a background thread.
    manager.add_status_section("recallTracking", writer.status)
    return True
