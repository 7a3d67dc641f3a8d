"""``LanceMemoryManager``: long-term memories in LanceDB behind the ``MemorySearchManager`` contract.

Besides the contract (search, read_file, status, sync, probes, close) it offers what the agent
tools, auto-capture and auto-recall need (all registered by :mod:`mdrecall.backends.lancedb.plugin`):
:meth:`store_memory`/:meth:`store_many`, :meth:`recall`, :meth:`recall_memories`, :meth:`forget`
and :meth:`capture_turn`.

Scores are cosine similarities of unit vectors in [0, 1] (negative cosines count as 0), whatever
the provider; the duplicate check (``duplicateThreshold``) and the recall cutoff
(``recallMinScore``) are defined on that scale (docs/lancedb.md, "Scores and cutoffs").

Every search-like call (``search``, ``memory_recall``, auto-recall) tells the search listeners, so
dreaming's recall tracking counts recalled entries and frequently recalled ones can be proposed for
MEMORY.md (promotion.py). A forgotten entry is announced through the ``entries_forgotten`` hook, so
dreaming drops its copies too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from mdrecall import plugins
from mdrecall.backends.lancedb import results
from mdrecall.backends.lancedb.capture import normalized_key, plan_capture
from mdrecall.backends.lancedb.categories import detect_category, parse_category
from mdrecall.backends.lancedb.maintenance import Maintainer
from mdrecall.backends.lancedb.records import Row, new_record, text_hash, unit_rows
from mdrecall.backends.lancedb.store import LanceStore
from mdrecall.config import MemoryConfig, mdrecall_home
from mdrecall.contract import ManagerBase
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.embeddings.registry import ProviderSelection, select_provider
from mdrecall.errors import MdrecallError, PathError, ProviderUnavailableError
from mdrecall.search.asof import search_times
from mdrecall.sources.reading import window_lines
from mdrecall.sources.redact import redact_secrets
from mdrecall.text import cjk_share, query_terms
from mdrecall.types import (
    Freshness,
    ProbeResult,
    ProgressCallback,
    ReadResult,
    SearchMode,
    SearchRequest,
    SearchResponse,
    Status,
    SyncReport,
)

log = logging.getLogger("mdrecall.lancedb")

#: Longest memory ``memory_store``/import accept (capture has its own, smaller bound).
MAX_MEMORY_CHARS = 10_000
#: ``memory_forget {query}``: hits at or above this are candidates; exactly one candidate at or
#: above FORGET_MATCH_SCORE is deleted, anything else is listed for the model to choose by id.
FORGET_CANDIDATE_SCORE = 0.5
FORGET_MATCH_SCORE = 0.75

Scored = list[tuple[Row, float]]

#: Open managers by workspace, so dreaming's reader of ``ltm:`` entries uses a live table.
_OPEN: dict[str, list[LanceMemoryManager]] = {}
_OPEN_LOCK = threading.Lock()


def open_managers_for(workspace: Path) -> list[LanceMemoryManager]:
    with _OPEN_LOCK:
        return list(_OPEN.get(str(Path(workspace).resolve()), ()))


def _reads_cjk(provider: EmbeddingProvider) -> bool:
    languages = provider.languages
    return languages is None or any(lang in ("zh", "ja", "ko", "multilingual") for lang in languages)


def language_ok(provider: EmbeddingProvider, query: str, text: str) -> bool:
    """Whether a cosine score between ``query`` and ``text`` means anything for this provider.

    An English-only model (the bundled MiniLM) maps all CJK text to nearby noise vectors (an
    unrelated Chinese question scored 0.41 against a Chinese memory): when either side is mostly
    CJK, such a model's match also needs a shared term (a word or a CJK bigram).
    """
    if _reads_cjk(provider) or (cjk_share(query) < 0.5 and cjk_share(text) < 0.5):
        return True
    lower = text.lower()
    return any(term in lower for term in query_terms(query))


class LanceMemoryManager(ManagerBase):
    backend = "lancedb"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        super().__init__(Path(workspace), config)
        self.settings = config.lancedb
        self.db_uri = self.settings.db_uri(self.workspace, mdrecall_home())
        self.store = LanceStore(self.db_uri, storage_options=self.settings.storage_options(),
                                prefix=self.settings.tableName, retries=self.settings.writeRetries)  # fmt: skip
        self.agent_id = self.settings.agentId
        self.maintainer = Maintainer(self.store, self.settings.maintenance)
        self.last_capture: dict[str, Any] | None = None
        self._selection: ProviderSelection | None = None
        self._open_lock = threading.Lock()
        self._last_error: str | None = None
        self._last_sync_at: float | None = None
        self._closed = False
        with _OPEN_LOCK:
            _OPEN.setdefault(str(self.workspace.resolve()), []).append(self)

    # -- provider and table ------------------------------------------------------------------------

    def _provider_selection(self) -> ProviderSelection:
        if self._selection is None:
            self._selection = select_provider(self.config)
        return self._selection

    @property
    def provider(self) -> EmbeddingProvider | None:
        return self._provider_selection().provider

    def _require_provider(self) -> EmbeddingProvider:
        selection = self._provider_selection()
        if selection.provider is None:
            raise ProviderUnavailableError(f"long-term memory needs an embedding provider: {selection.unavailable_reason}")
        return selection.provider

    def _table(self, *, need_vectors: bool = True) -> LanceStore:
        """The store with its table open: the current model's (migrating others), or any for keyword reads."""
        if self._closed:
            raise MdrecallError("manager is closed")
        if self.store.table is None:
            with self._open_lock:
                self._open_table(need_vectors)
        return self.store

    def _open_table(self, need_vectors: bool) -> None:
        if self.store.table is not None:  # another thread opened it meanwhile
            return
        provider = self.provider
        if provider is None:
            if need_vectors:
                self._require_provider()
            self.store.open_any()
            return
        dims = provider.resolve_dims() or len(provider.embed_query("dimensions"))
        self.store.open(provider.identity, int(dims), provider.embed_documents)

    def _embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return unit_rows(self._require_provider().embed_documents(list(texts)))

    def _embed_query(self, text: str) -> np.ndarray:
        return unit_rows([self._require_provider().embed_query(text)])[0]

    # -- searching ----------------------------------------------------------------------------------

    def scored(self, query: str, limit: int, min_score: float) -> tuple[Scored, SearchMode, list[str]]:
        """``(row, score)`` best first, the search mode, and notes. Cosine with a provider, else keywords."""
        text = (query or "").strip()
        provider = self.provider
        if provider is None:
            store = self._table(need_vectors=False)
            notes = [f"keyword-only: {self._provider_selection().unavailable_reason}"]
            if not text:
                return [], "keyword-only", notes
            # BM25 is unbounded: s/(1+s) maps it into [0, 1) for display; the cosine cutoffs do not apply.
            return [(row, s / (1.0 + s)) for row, s in store.keyword(text, self.agent_id, limit)], "keyword-only", notes
        if not text:
            return [], "vector-only", []
        rows = self._table().nearest(self._embed_query(text), self.agent_id, max(limit * 3, limit + 5))
        out = [(r, r.score or 0.0) for r in rows if (r.score or 0.0) >= min_score and language_ok(provider, text, r.text)]
        return out[:limit], "vector-only", []

    def _response(self, scored: Scored, mode: SearchMode, notes: list[str]) -> SearchResponse:
        provider = self.provider
        return SearchResponse(
            results=[results.search_hit(row, score) for row, score in scored],
            mode=mode,
            provider=provider.id if provider else "none",
            model=provider.model if provider else "fts-only",
            degraded=mode == "keyword-only",
            warnings=notes,
            # Entries are written straight into the table: an answer is always as fresh as it.
            freshness=Freshness(checked_at=datetime.now(UTC).isoformat()),
        )

    def _searched(self, query: str, scored: Scored, mode: SearchMode, notes: list[str], session_key: str | None,
                  now: datetime | None) -> SearchResponse:  # fmt: skip
        response = self._response(scored, mode, notes)
        if query.strip():
            self._notify_search(query.strip(), response, session_key, now or datetime.now(UTC))
        return response

    def run_search(self, request: SearchRequest) -> SearchResponse:
        query, max_results, min_score, session_key, sources, now, as_of = (
            request.query, request.max_results, request.min_score, request.session_key, request.sources, request.now,
            request.as_of,
        )  # fmt: skip
        if sources is not None and "memory" not in sources:
            return self._response([], "vector-only" if self.provider else "keyword-only", [])
        limit = max_results or self.config.query.maxResults
        cutoff = self.settings.searchMinScore if min_score is None else min_score
        if as_of is None:
            scored, mode, notes = self.scored(query, limit, cutoff)
            return self._searched(query, scored, mode, notes, session_key, now)
        # "As known then": the entries stored by then (createdAt), from a longer list.
        now, when = search_times(now, as_of)
        assert when is not None
        scored, mode, notes = self.scored(query, limit * 4, cutoff)
        known = [(row, score) for row, score in scored if row.created_at <= when.timestamp() * 1000]
        if len(known) < len(scored):
            later = len(scored) - len(known)
            notes.append(f"as of {when.isoformat(timespec='minutes')}: {later} later entr{'y' if later == 1 else 'ies'} left out")
        return self._searched(query, known[:limit], mode, notes, session_key, now)

    def recall(self, query: str, limit: int = 5, min_score: float | None = None, session_key: str | None = None) -> Scored:
        """``memory_recall``: the best memories for ``query`` (recorded as recalls for promotion)."""
        cutoff = self.settings.searchMinScore if min_score is None else min_score
        scored, mode, notes = self.scored(query, limit, cutoff)
        self._searched(query, scored, mode, notes, session_key, None)
        return scored

    def recall_memories(self, prompt: str, *, session_key: str | None = None) -> list[dict[str, str]]:
        """What auto-recall injects before ``prompt``: the ``recallLimit`` best memories scoring at
        least ``recallMinScore``, as ``{text, category}`` (rendered by the agent's block builder
        within ``recallMaxChars``). Nothing for a prompt under 5 characters or without vectors: the
        cutoff is a cosine, which keyword scores are not."""
        if len((prompt or "").strip()) < 5 or self.provider is None:
            return []
        hits = self.recall(prompt, self.settings.recallLimit, self.settings.recallMinScore, session_key)
        return [{"text": row.text, "category": row.category} for row, _ in hits]

    # -- writing ------------------------------------------------------------------------------------

    @staticmethod
    def _check_text(text: object) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is required: the memory to store, as a non-empty string")
        clean = redact_secrets(text.strip())
        if len(clean) > MAX_MEMORY_CHARS:
            raise ValueError(f"text is {len(clean)} characters; a memory holds at most {MAX_MEMORY_CHARS}")
        return clean

    def _duplicate_of(self, store: LanceStore, text: str, vector: np.ndarray,
                      accepted: list[tuple[dict[str, Any], np.ndarray]]) -> Row | None:  # fmt: skip
        """The stored memory (or earlier item of this batch) that ``text`` repeats, if any."""
        threshold = self.settings.duplicateThreshold
        existing = store.by_hash(text_hash(text), self.agent_id)
        if existing is not None:
            return existing
        near = store.nearest(vector, self.agent_id, 1)
        if near and (near[0].score or 0.0) >= threshold:
            return near[0]
        for record, other in accepted:
            similarity = float(other @ vector)
            if similarity >= threshold or normalized_key(record["text"]) == normalized_key(text):
                return Row.from_record({**record, "_distance": 1.0 - similarity})
        return None

    def store_many(self, items: Sequence[Mapping[str, Any]], *, source: str, session_key: str | None = None) -> list[dict[str, Any]]:
        """Store memories (``{text, importance?, category?, provenance?, id?, createdAt?}``), skipping duplicates.

        A memory is a duplicate when its normalised text is already stored, or its nearest stored
        neighbour (or an earlier item of this call) scores at least ``duplicateThreshold``.
        Returns one outcome per item: ``{action: created|duplicate, id, text, ...}``.
        """
        if not items:
            return []
        texts = [self._check_text(item.get("text")) for item in items]
        categories = [parse_category(item["category"]) if item.get("category") else detect_category(t) for item, t in zip(items, texts)]
        store = self._table()
        vectors = self._embed_documents(texts)
        outcomes: list[dict[str, Any]] = []
        accepted: list[tuple[dict[str, Any], np.ndarray]] = []
        with store.write_lock():
            for item, text, category, vector in zip(items, texts, categories, vectors):
                existing = self._duplicate_of(store, text, vector, accepted)
                if existing is not None:
                    outcomes.append({"action": "duplicate", "text": text, "existingId": existing.id,
                                     "existingText": existing.text, "score": round(existing.score or 1.0, 4)})  # fmt: skip
                    continue
                importance = item.get("importance")
                record = new_record(
                    text, vector,
                    importance=self.settings.defaultImportance if importance is None else float(importance),
                    category=category, agent_id=self.agent_id, source=source, session_key=session_key,
                    provenance=dict(item.get("provenance") or {}), memory_id=item.get("id"), created_at=item.get("createdAt"),
                )  # fmt: skip
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
    ) -> dict[str, Any]:  # fmt: skip
        item: dict[str, Any] = {"text": text, "importance": importance, "category": category, "provenance": dict(provenance or {})}
        return self.store_many([item], source=source, session_key=session_key)[0]

    def capture_turn(
        self, messages: Sequence[Mapping[str, Any]], *, session_key: str | None = None, success: bool = True, force: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Auto-capture from a finished turn (``autoCapture``; ``force`` ignores it, for the CLI)."""
        report: dict[str, Any] = {"captured": [], "duplicates": [], "skipped": []}
        if not (self.settings.autoCapture or force):
            return {**report, "disabled": "autoCapture is off"}
        if not success or not messages:
            return {**report, "disabled": "the turn did not succeed" if not success else "no messages"}
        s = self.settings
        plan = plan_capture(messages, roles=s.captureRoles, min_chars=s.captureMinChars, max_chars=s.captureMaxChars,
                            max_captures=s.maxCapturesPerTurn, custom_triggers=s.customTriggers)  # fmt: skip
        items = [
            {"text": c.text, "category": c.category,
             "provenance": {"role": c.role, "message": c.message_index, "redacted": c.redacted, "via": "auto-capture"}}
            for c in plan.candidates
        ]  # fmt: skip
        outcomes = self.store_many(items, source="capture", session_key=session_key) if items else []
        report["captured"] = [o for o in outcomes if o["action"] == "created"]
        report["duplicates"] = [o for o in outcomes if o["action"] == "duplicate"]
        report["skipped"] = [{"text": t, "reason": r} for t, r in plan.skipped]
        self.last_capture = {"at": time.time(), "captured": len(report["captured"]),
                             "duplicates": len(report["duplicates"]), "skipped": len(report["skipped"])}  # fmt: skip
        return report

    def forget(self, memory_id: str | None = None, query: str | None = None) -> dict[str, Any]:
        """Delete one memory for good; by query only when exactly one memory clearly matches."""
        if memory_id:
            memory_id = memory_id.strip().removeprefix(results.CITATION_PREFIX).split("#", 1)[0]
            if not results.is_memory_id(memory_id):
                return {"action": "error", "error": "invalid_id", "message": f"Invalid memory ID format: {memory_id!r}"}
            row = self.get_entry(memory_id)
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
                        "message": f'Forgotten: "{row.text}"'}  # fmt: skip
            candidates = [{"id": r.id, "text": r.text, "category": r.category, "score": round(s, 4)} for r, s in hits]
            listing = "\n".join(f"- [{c['id']}] {str(c['text'])[:80]}" for c in candidates)
            return {"action": "candidates", "candidates": candidates,
                    "message": f"Several memories may match; call memory_forget with the memoryId of the one to delete:\n{listing}"}  # fmt: skip
        return {"action": "error", "error": "missing_param", "message": "Provide query or memoryId."}

    def _purge(self, rows: Sequence[Row]) -> None:
        self._table(need_vectors=False).purge([r.id for r in rows])
        # The table is clean; features drop their copies (dreaming: recalls and queued candidates).
        # A plugin failing here is recorded (mdrecall plugins) and does not undo the forgetting.
        paths = [results.entry_path(r.id) for r in rows]
        for _name, _ in plugins.call_each("entries_forgotten", manager=self, paths=paths):
            pass

    # -- listing ------------------------------------------------------------------------------------

    def list_entries(self, *, category: str | None = None, limit: int | None = None, offset: int = 0) -> list[Row]:
        return self._table(need_vectors=False).rows(self.agent_id, category=category, limit=limit, offset=offset)

    def get_entry(self, memory_id: str) -> Row | None:
        return self._table(need_vectors=False).get(memory_id, self.agent_id)

    def count(self) -> int:
        return self._table(need_vectors=False).count(self.agent_id)

    # -- the rest of the contract ----------------------------------------------------------------------

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        memory_id = results.parse_path(rel_path)
        row = self.get_entry(memory_id)
        if row is None:
            raise PathError("not_found", f"no long-term memory {rel_path!r} (forgotten, or another agent's)")
        result = window_lines(row.text, results.entry_path(row.id), from_line, lines, self.config)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now(UTC))
        return result

    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport:
        """Nothing to index (memories are written directly): runs maintenance instead. Idempotent."""
        started = time.time()
        store = self._table(need_vectors=False)
        if store.table is not None and (force or self.maintainer.pending):
            self.maintainer.run()
        self._last_sync_at = time.time()
        return SyncReport(seconds=round(time.time() - started, 3))

    def status(self) -> Status:
        selection = self._provider_selection()
        provider = selection.provider
        reasons: list[str] = []
        warnings: list[str] = []
        entries = 0
        table: dict[str, Any] = {}
        try:
            store = self._table(need_vectors=False)
            entries = store.count(self.agent_id)
            table = store.stats()
        except Exception as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            warnings.append(self._last_error)
        if provider is None:
            reasons.append(f"no embedding provider: {selection.unavailable_reason}; keyword search only, nothing can be stored")
        s = self.settings
        details: dict[str, Any] = {
            "agentId": self.agent_id,
            "table": table,
            "migration": self.store.migration,
            "maintenance": self.maintainer.status(),
            "lastCapture": self.last_capture,
            "autoCapture": s.autoCapture,
            "autoRecall": s.autoRecall,
            "scores": "cosine similarity of unit vectors",
            "duplicateThreshold": s.duplicateThreshold,
            "recallMinScore": s.recallMinScore,
            "searchMinScore": s.searchMinScore,
            **self.extra_status(),
        }
        now = datetime.now(UTC).isoformat()
        last_sync = datetime.fromtimestamp(self._last_sync_at, UTC).isoformat() if self._last_sync_at else None
        return Status(
            backend=self.backend,
            workspace_dir=str(self.workspace),
            # Each entry is its own citable document (ltm:<id>) and its own chunk.
            files=entries,
            chunks=entries,
            provider=provider.id if provider else "none",
            model=provider.model if provider else "fts-only",
            search_mode="vector-only" if provider else "keyword-only",
            mode_reasons=reasons,
            clean=True,
            dims=self.store.dims or (provider.dims if provider else None),
            sources=["memory"],
            freshness=Freshness(checked_at=now, last_sync_at=last_sync, files_indexed=entries),
            last_sync_at=last_sync,
            last_error=self._last_error or self.maintainer.last_error,
            location=self.db_uri,
            warnings=warnings,
            details=details,
        )

    def probe_embedding_availability(self) -> ProbeResult:
        selection = self._provider_selection()
        provider = selection.provider
        if provider is None:
            return ProbeResult(False, selection.unavailable_reason or "no embedding provider")
        try:
            vector = provider.embed_query("ping")
        except Exception as exc:
            return ProbeResult(False, f"{type(exc).__name__}: {exc}", provider.id, provider.model)
        return ProbeResult(True, None, provider.id, provider.model, len(vector))

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
        self._run_close_hooks()
        if self.store.table is not None:
            self.maintainer.close()
        self._closed = True
        if self._selection is not None and self._selection.provider is not None:
            self._selection.provider.close()  # remote providers hold HTTP connection pools
        with _OPEN_LOCK:
            opened = _OPEN.get(str(self.workspace.resolve()), [])
            if self in opened:
                opened.remove(self)
            if not opened:
                _OPEN.pop(str(self.workspace.resolve()), None)
