"""``LanceMemoryManager``: long-term memories in LanceDB behind the ``MemorySearchManager`` contract.

Besides the contract (search, read_file, status, sync, probes, close; mapped in contract.py) it
offers what the agent tools, auto-capture and auto-recall need: :meth:`store_memory`,
:meth:`recall`, :meth:`forget`, :meth:`capture_turn` and :meth:`recall_block`.

Scores are cosine similarities of unit vectors in [0, 1] (negative cosines count as 0), whatever
the provider; the duplicate check (``duplicateThreshold``) and the recall cutoff
(``recallMinScore``) are defined on that scale (docs/lancedb.md, "Scores and cutoffs").

Every search-like call (``search``, ``memory_recall``, auto-recall) tells the search listeners, so
dreaming's recall tracking counts recalled entries and frequently recalled ones can be proposed for
MEMORY.md (promotion.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mdrecall.agent.prompts import InjectedMemory, format_relevant_memories
from mdrecall.backends.lancedb import contract
from mdrecall.backends.lancedb.capture import normalized_key, plan_capture
from mdrecall.backends.lancedb.categories import detect_category, parse_category
from mdrecall.backends.lancedb.settings import LanceDBSettings, load_settings
from mdrecall.backends.lancedb.store import LanceStore, Row, is_memory_id, new_record, text_hash, unit_rows
from mdrecall.config import MemoryConfig
from mdrecall.embeddings.registry import ProviderSelection, select_provider
from mdrecall.errors import MdrecallError, PathError, ProviderUnavailableError
from mdrecall.redact import redact_secrets
from mdrecall.text import cjk_share, query_terms
from mdrecall.types import ProbeResult, SearchResponse, SyncReport

log = logging.getLogger("mdrecall.lancedb")

#: Longest memory ``memory_store``/import accept (capture has its own, smaller bound).
MAX_MEMORY_CHARS = 10_000
#: ``memory_forget {query}``: hits at or above this are candidates; exactly one candidate at or
#: above FORGET_MATCH_SCORE is deleted, anything else is listed for the model to choose by id.
FORGET_CANDIDATE_SCORE = 0.5
FORGET_MATCH_SCORE = 0.75

SearchListener = Callable[[str, SearchResponse, "str | None", datetime], None]

#: Open managers by workspace, so dreaming's reader of ``ltm:`` entries uses the live table.
_OPEN: dict[str, "LanceMemoryManager"] = {}
_OPEN_LOCK = threading.Lock()


def open_manager_for(workspace: Path) -> "LanceMemoryManager | None":
    with _OPEN_LOCK:
        return _OPEN.get(str(Path(workspace).resolve()))


def _reads_cjk(provider: Any) -> bool:
    languages = getattr(provider, "languages", None)
    return languages is None or any(lang in ("zh", "ja", "ko", "multilingual") for lang in languages)


def _shares_term(query: str, text: str) -> bool:
    terms = set(query_terms(query))
    lower = text.lower()
    return any(term in lower for term in terms)


def language_ok(provider: Any, query: str, text: str) -> bool:
    """Whether a cosine score between ``query`` and ``text`` means anything for this provider.

    An English-only model (the bundled MiniLM) maps all CJK text to nearby noise vectors (an
    unrelated Chinese question scored 0.41 against a Chinese memory): when either side is mostly
    CJK, such a model's match also needs a shared term (a word or a CJK bigram).
    """
    if _reads_cjk(provider):
        return True
    if cjk_share(query) < 0.5 and cjk_share(text) < 0.5:
        return True
    return _shares_term(query, text)


class Maintainer:
    """Compaction, full-text index refresh and version cleanup off the write path.

    Writes are counted; after ``everyWrites`` of them, or ``afterSeconds`` after the first one, a
    background thread runs :meth:`LanceStore.maintain`. ``close()`` runs what is still pending, so a
    short-lived CLI process leaves a compact table behind too.
    """

    def __init__(self, store: LanceStore, settings: LanceDBSettings) -> None:
        self.store = store
        self.cfg = settings.maintenance
        self.pending = 0
        self.first_at = 0.0
        self.runs = 0
        self.last: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.last_at: float | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def note_write(self, count: int = 1) -> None:
        if not self.cfg.enabled:
            return
        with self._cond:
            if not self.pending:
                self.first_at = time.monotonic()
            self.pending += count
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="mdrecall-ltm-maintenance", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _due_in(self) -> float | None:
        if not self.pending:
            return None
        if self.pending >= self.cfg.everyWrites:
            return 0.0
        return max(0.0, self.first_at + self.cfg.afterSeconds - time.monotonic())

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._due_in() is None or self._due_in() > 0):  # type: ignore[operator]
                    self._cond.wait(self._due_in())
                if self._closed:
                    return
            self.run()

    def run(self) -> dict[str, Any] | None:
        with self._cond:
            self.pending = 0
        try:
            self.last = self.store.maintain(timedelta(minutes=self.cfg.keepVersionsMinutes))
            self.last_error = None
        except Exception as exc:  # maintenance is retried on the next writes; never fail a write for it
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("lancedb maintenance failed: %s", exc)
        self.runs += 1
        self.last_at = time.time()
        return self.last

    def status(self) -> dict[str, Any]:
        return {"enabled": self.cfg.enabled, "pendingWrites": self.pending, "runs": self.runs, "last": self.last,
                "lastError": self.last_error, "keepVersionsMinutes": self.cfg.keepVersionsMinutes}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = self.pending
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if pending and self.cfg.enabled:
            self.run()


class LanceMemoryManager:
    backend = "lancedb"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        self.workspace = Path(workspace)
        self.config = config
        self.settings = load_settings(config.lancedb)
        self.db_uri = self.settings.db_uri(self.workspace)
        self.store = LanceStore(self.db_uri, storage_options=self.settings.storage_options(),
                                prefix=self.settings.tableName, retries=self.settings.writeRetries)
        self.agent_id = self.settings.agentId
        self._selection: ProviderSelection | None = None
        self._open_lock = threading.Lock()
        self._listeners: list[SearchListener] = []
        self._read_listeners: list[Callable[..., None]] = []
        self._flush_hooks: list[Callable[[], object]] = []
        self._close_hooks: list[Callable[[], object]] = []
        self.maintainer = Maintainer(self.store, self.settings)
        #: Set by dreaming's install_recall_tracking (a RecallWriter), else None.
        self.recall_writer: Any = None
        self.last_capture: dict[str, Any] | None = None
        self._last_error: str | None = None
        self._last_sync_at: float | None = None
        self._closed = False
        with _OPEN_LOCK:
            _OPEN[str(self.workspace.resolve())] = self

    # -- provider and table ------------------------------------------------------------------------

    def _provider_selection(self) -> ProviderSelection:
        if self._selection is None:
            self._selection = select_provider(self.config)
        return self._selection

    @property
    def provider(self) -> Any:
        return self._provider_selection().provider

    def _require_provider(self) -> Any:
        selection = self._provider_selection()
        if selection.provider is None:
            raise ProviderUnavailableError(
                f"long-term memory needs an embedding provider: {selection.unavailable_reason}"
            )
        return selection.provider

    def _table(self, *, need_vectors: bool = True) -> LanceStore:
        """The store with its table open: the current model's (migrating others), or any for keyword reads."""
        if self._closed:
            raise MdrecallError("manager is closed")
        if self.store.table is not None:
            return self.store
        with self._open_lock:
            if self.store.table is not None:
                return self.store
            provider = self.provider
            if provider is None:
                if need_vectors:
                    self._require_provider()
                names = self.store.table_names()
                if names:
                    self.store.table = self.store.db.open_table(names[0])
                    self.store.name = names[0]
                return self.store
            dims = provider.dims or len(provider.embed_query("dimensions"))
            self.store.open(provider.identity, int(dims), provider.embed_documents)
        return self.store

    def _embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return unit_rows(self._require_provider().embed_documents(list(texts)))

    def _embed_query(self, text: str) -> np.ndarray:
        return unit_rows([self._require_provider().embed_query(text)])[0]

    # -- listeners (dreaming's recall tracking) --------------------------------------------------------

    def add_search_listener(self, listener: SearchListener) -> None:
        self._listeners.append(listener)

    def add_read_listener(self, listener: Callable[..., None]) -> None:
        self._read_listeners.append(listener)

    def add_flush_hook(self, hook: Callable[[], object]) -> None:
        self._flush_hooks.append(hook)

    def add_close_hook(self, hook: Callable[[], object]) -> None:
        self._close_hooks.append(hook)

    def flush(self) -> None:
        for hook in self._flush_hooks:
            hook()

    def _notify(self, query: str, response: SearchResponse, session_key: str | None, now: datetime | None = None) -> None:
        now = now or datetime.now(timezone.utc)
        for listener in list(self._listeners):
            try:
                listener(query, response, session_key, now)
            except Exception:
                pass  # recall tracking must never break a search

    # -- searching ----------------------------------------------------------------------------------

    def scored(self, query: str, limit: int, min_score: float) -> tuple[list[tuple[Row, float]], str, list[str]]:
        """``(row, score)`` best first, the search mode, and notes. Cosine with a provider, else keywords."""
        text = (query or "").strip()
        if not text:
            return [], "vector-only", []
        if self.provider is None:
            store = self._table(need_vectors=False)
            reason = self._provider_selection().unavailable_reason
            hits = store.keyword(text, self.agent_id, limit)
            # BM25 is unbounded: s/(1+s) maps it into [0, 1) for display; the cosine cutoffs do not apply.
            return [(row, s / (1.0 + s)) for row, s in hits], "keyword-only", [f"keyword-only: {reason}"]
        store = self._table()
        vector = self._embed_query(text)
        rows = store.nearest(vector, self.agent_id, max(limit * 3, limit + 5))
        out = [(r, float(r.score or 0.0)) for r in rows if (r.score or 0.0) >= min_score and language_ok(self.provider, text, r.text)]
        return out[:limit], "vector-only", []

    def _response(self, scored: list[tuple[Row, float]], mode: str, notes: list[str]) -> SearchResponse:
        provider = self.provider
        return contract.search_response(
            scored, mode=mode, provider=provider.id if provider else "none",
            model=provider.model if provider else "fts-only", degraded=mode == "keyword-only", warnings=notes,
        )

    def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        sources: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchResponse:
        if sources and "memory" not in sources:
            return self._response([], "vector-only", [])
        limit = max_results or self.config.query.maxResults
        cutoff = self.settings.searchMinScore if min_score is None else min_score
        scored, mode, notes = self.scored(query, limit, cutoff)
        response = self._response(scored, mode, notes)
        if scored:
            self._notify(query.strip(), response, session_key, now)
        return response

    def recall(self, query: str, limit: int = 5, min_score: float | None = None, session_key: str | None = None) -> list[tuple[Row, float]]:
        """``memory_recall``: the best memories for ``query`` (recorded as recalls for promotion)."""
        cutoff = self.settings.searchMinScore if min_score is None else min_score
        scored, mode, notes = self.scored(query, limit, cutoff)
        if scored:
            self._notify(query.strip(), self._response(scored, mode, notes), session_key)
        return scored

    def recall_block(
        self, prompt: str, *, session_key: str | None = None, limit: int | None = None,
        min_score: float | None = None, max_chars: int | None = None,
    ) -> str:
        """The ``<relevant-memories>`` block for a prompt ("" when nothing scores above the cutoff)."""
        if len((prompt or "").strip()) < 5 or self.provider is None:
            return ""
        cutoff = self.settings.recallMinScore if min_score is None else min_score
        hits = self.recall(prompt, limit or self.settings.recallLimit, cutoff, session_key)
        memories = [InjectedMemory(row.text, row.category) for row, _ in hits]
        return format_relevant_memories(memories, max_chars=max_chars or self.settings.recallMaxChars)

    def auto_recall(self, prompt: str, *, session_key: str | None = None) -> str:
        """Before a prompt is built: the block to prepend, when ``autoRecall`` is on."""
        if not self.settings.autoRecall:
            return ""
        return self.recall_block(prompt, session_key=session_key)

    # -- writing ------------------------------------------------------------------------------------

    def _check_text(self, text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is required: the memory to store, as a non-empty string")
        clean = redact_secrets(text.strip())
        if len(clean) > MAX_MEMORY_CHARS:
            raise ValueError(f"text is {len(clean)} characters; a memory holds at most {MAX_MEMORY_CHARS}")
        return clean

    def store_many(
        self, items: Sequence[Mapping[str, Any]], *, source: str, session_key: str | None = None,
    ) -> list[dict[str, Any]]:
        """Store memories (``{text, importance?, category?, provenance?, id?, createdAt?}``), skipping duplicates.

        A memory is a duplicate when its normalised text is already stored, or its nearest stored
        neighbour (or an earlier item of this call) scores at least ``duplicateThreshold``.
        Returns one outcome per item: ``{action: created|duplicate, id, text, ...}``.
        """
        if not items:
            return []
        texts = [self._check_text(item.get("text")) for item in items]
        store = self._table()
        vectors = self._embed_documents(texts)
        threshold = self.settings.duplicateThreshold
        outcomes: list[dict[str, Any]] = []
        accepted: list[tuple[dict[str, Any], np.ndarray]] = []
        with store.write_lock():
            for item, text, vector in zip(items, texts, vectors):
                existing = store.by_hash(text_hash(text), self.agent_id)
                if existing is None:
                    near = store.nearest(vector, self.agent_id, 1)
                    if near and (near[0].score or 0.0) >= threshold:
                        existing = near[0]
                if existing is None:
                    for record, other in accepted:
                        if float(other @ vector) >= threshold or normalized_key(record["text"]) == normalized_key(text):
                            existing = Row.from_record({**record, "_distance": 1.0 - float(other @ vector)})
                            break
                if existing is not None:
                    outcomes.append({"action": "duplicate", "text": text, "existingId": existing.id,
                                     "existingText": existing.text, "score": round(existing.score or 1.0, 4)})
                    continue
                category = parse_category(item["category"]) if item.get("category") else detect_category(text)
                importance = item.get("importance")
                record = new_record(
                    text, vector,
                    importance=self.settings.defaultImportance if importance is None else float(importance),
                    category=category, agent_id=self.agent_id, source=source, session_key=session_key,
                    provenance=dict(item.get("provenance") or {}), memory_id=item.get("id"), created_at=item.get("createdAt"),
                )
                accepted.append((record, vector))
                outcomes.append({"action": "created", "id": record["id"], "text": text, "category": category})
            # All of one call's memories in one commit: one version, not one per memory.
            store.add([record for record, _ in accepted])
        if accepted:
            self.maintainer.note_write(1)
        return outcomes

    def store_memory(
        self, text: str, *, importance: float | None = None, category: str | None = None, source: str = "tool",
        session_key: str | None = None, provenance: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        item: dict[str, Any] = {"text": text, "importance": importance, "category": category,
                                "provenance": dict(provenance or {})}
        return self.store_many([item], source=source, session_key=session_key)[0]

    def capture_turn(
        self, messages: Sequence[Mapping[str, Any]], *, session_key: str | None = None, success: bool = True,
        force: bool = False,
    ) -> dict[str, Any]:
        """Auto-capture from a finished turn (``autoCapture``; ``force`` ignores it, for the CLI)."""
        if not (self.settings.autoCapture or force):
            return {"captured": [], "duplicates": [], "skipped": [], "disabled": "autoCapture is off"}
        if not success or not messages:
            return {"captured": [], "duplicates": [], "skipped": [], "disabled": "turn did not succeed" if not success else None}
        s = self.settings
        plan = plan_capture(messages, roles=s.captureRoles, min_chars=s.captureMinChars, max_chars=s.captureMaxChars,
                            max_captures=s.maxCapturesPerTurn, custom_triggers=s.customTriggers)
        items = [
            {"text": c.text, "category": c.category,
             "provenance": {"role": c.role, "message": c.message_index, "redacted": c.redacted, "via": "auto-capture"}}
            for c in plan.candidates
        ]
        outcomes = self.store_many(items, source="capture", session_key=session_key) if items else []
        report = {
            "captured": [o for o in outcomes if o["action"] == "created"],
            "duplicates": [o for o in outcomes if o["action"] == "duplicate"],
            "skipped": [{"text": t, "reason": r} for t, r in plan.skipped],
        }
        self.last_capture = {"at": time.time(), "captured": len(report["captured"]),
                             "duplicates": len(report["duplicates"]), "skipped": len(report["skipped"])}
        return report

    def auto_capture(self, messages: Sequence[Mapping[str, Any]], *, session_key: str | None = None,
                     success: bool = True) -> dict[str, Any]:
        return self.capture_turn(messages, session_key=session_key, success=success)

    def forget(self, memory_id: str | None = None, query: str | None = None) -> dict[str, Any]:
        """Delete one memory for good; by query only when exactly one memory clearly matches."""
        if memory_id:
            memory_id = memory_id.strip().removeprefix(contract.CITATION_PREFIX)
            if not is_memory_id(memory_id):
                return {"action": "error", "error": "invalid_id", "message": f"Invalid memory ID format: {memory_id!r}"}
            row = self._table(need_vectors=False).get(memory_id, self.agent_id)
            if row is None:
                return {"action": "not_found", "id": memory_id, "message": f"No memory with id {memory_id}."}
            self._purge([row])
            return {"action": "deleted", "id": row.id, "text": row.text, "message": f'Forgotten: "{row.text}"'}
        if query and query.strip():
            hits = self.scored(query, 5, FORGET_CANDIDATE_SCORE)[0]
            if not hits:
                return {"action": "none", "candidates": [], "message": "No matching memories found."}
            if len(hits) == 1 and hits[0][1] >= FORGET_MATCH_SCORE:
                row = hits[0][0]
                self._purge([row])
                return {"action": "deleted", "id": row.id, "text": row.text, "score": round(hits[0][1], 4),
                        "message": f'Forgotten: "{row.text}"'}
            candidates = [{"id": r.id, "text": r.text, "category": r.category, "score": round(s, 4)} for r, s in hits]
            listing = "\n".join(f"- [{c['id']}] {c['text'][:80]}" for c in candidates)
            return {"action": "candidates", "candidates": candidates,
                    "message": f"Several memories may match; call memory_forget with the memoryId of the one to delete:\n{listing}"}
        return {"action": "error", "error": "missing_param", "message": "Provide query or memoryId."}

    def _purge(self, rows: Sequence[Row]) -> None:
        self._table(need_vectors=False).purge([r.id for r in rows])
        from mdrecall.backends.lancedb.promotion import forget_recalls

        self.flush()  # recalls still queued for recording would otherwise bring the text back
        try:
            forget_recalls(self.workspace, self.config, [r.id for r in rows])
        except Exception as exc:  # the table is already clean; report the leftover instead of failing
            self._last_error = f"could not remove forgotten memories from the recall store: {exc}"
            log.warning("%s", self._last_error)

    # -- listing ------------------------------------------------------------------------------------

    def list_entries(self, *, category: str | None = None, limit: int | None = None, offset: int = 0) -> list[Row]:
        return self._table(need_vectors=False).rows(self.agent_id, category=category, limit=limit, offset=offset)

    def get_entry(self, memory_id: str) -> Row | None:
        return self._table(need_vectors=False).get(memory_id, self.agent_id)

    def count(self) -> int:
        return self._table(need_vectors=False).count(self.agent_id)

    # -- the rest of the contract ----------------------------------------------------------------------

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        memory_id = contract.parse_citation(rel_path)
        row = self.get_entry(memory_id) if is_memory_id(memory_id) else None
        if row is None:
            raise PathError("not_found", f"no long-term memory {rel_path!r} (forgotten, or another agent's)")
        result = contract.read_result(row, from_line, lines, self.config.read.maxLines, self.config.read.maxChars)
        for listener in list(self._read_listeners):
            try:
                listener(result["path"], result["from"], result["lines"], datetime.now(timezone.utc))
            except Exception:
                pass
        return result

    def sync(self, force: bool = False, progress: Any = None) -> SyncReport:
        """Nothing to index (memories are written directly): runs maintenance instead. Idempotent."""
        started = time.time()
        self._table(need_vectors=False)
        if self.store.table is not None and (force or self.maintainer.pending):
            self.maintainer.run()
        self._last_sync_at = time.time()
        return SyncReport(seconds=round(time.time() - started, 3))

    def status(self, deep: bool = False) -> dict[str, Any]:
        selection = self._provider_selection()
        provider = selection.provider
        reasons: list[str] = []
        warnings: list[str] = []
        entries = 0
        store_stats: dict[str, Any] = {}
        try:
            store = self._table(need_vectors=False)
            entries = store.count(self.agent_id)
            store_stats = store.stats()
        except Exception as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            warnings.append(self._last_error)
        if provider is None:
            reasons.append(f"no embedding provider: {selection.unavailable_reason}; keyword search only, nothing can be stored")
        s = self.settings
        details = {
            "agentId": self.agent_id,
            "table": store_stats,
            "migration": self.store.migration,
            "maintenance": self.maintainer.status(),
            "lastCapture": self.last_capture,
            "autoCapture": s.autoCapture,
            "autoRecall": s.autoRecall,
            "scores": "cosine similarity of unit vectors",
            "duplicateThreshold": s.duplicateThreshold,
            "recallMinScore": s.recallMinScore,
            "searchMinScore": s.searchMinScore,
            "recallTracking": self.recall_writer.status() if self.recall_writer is not None else None,
        }
        return contract.status_dict(
            workspace=str(self.workspace), db_uri=self.db_uri, entries=entries,
            provider=provider.id if provider else "none", model=provider.model if provider else "fts-only",
            dims=self.store.dims or (provider.dims if provider else None),
            mode="vector-only" if provider else "keyword-only", reasons=reasons,
            last_sync_at=datetime.fromtimestamp(self._last_sync_at, timezone.utc).isoformat() if self._last_sync_at else None,
            last_error=self._last_error or self.maintainer.last_error, warnings=warnings, details=details,
        )

    def probe_embedding_availability(self) -> ProbeResult:
        selection = self._provider_selection()
        provider = selection.provider
        if provider is None:
            return ProbeResult(False, selection.unavailable_reason or "no embedding provider")
        try:
            vec = provider.embed_query("ping")
        except Exception as exc:
            return ProbeResult(False, f"{type(exc).__name__}: {exc}", provider.id, provider.model)
        return ProbeResult(True, None, provider.id, provider.model, len(vec))

    def probe_vector_availability(self) -> bool:
        if self.provider is None:
            return False
        try:
            return self._table().table is not None
        except Exception:
            return False

    def close(self) -> None:
        if self._closed:
            return
        for hook in self._close_hooks:
            try:
                hook()
            except Exception as exc:
                log.warning("close hook failed: %s", exc)
        if self.store.table is not None:
            self.maintainer.close()
        self._closed = True
        with _OPEN_LOCK:
            if _OPEN.get(str(self.workspace.resolve())) is self:
                del _OPEN[str(self.workspace.resolve())]

    def __enter__(self) -> "LanceMemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
