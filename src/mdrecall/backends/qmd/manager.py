"""``backend: qmd``: searches answered by the external QMD tool, kept warm, with a builtin fallback.

Process model (docs/qmd.md): one ``qmd mcp`` child per manager, spoken to over stdio, started on
first need and kept for the manager's life, so a search costs a few pipe round trips and no process.
``qmd update`` (and ``qmd embed`` when the mode needs vectors and the model is present) run as
short-lived commands on ``sync()``: after file changes (mdrecall's watcher drives ``sync``), and
when a search finds the files changed since the last sync.

Failures: a search that QMD cannot answer (no binary, a crash, a timeout, a process found dead) is
answered by the builtin engine (``backend: builtin`` on the same workspace and config), with the
reason first in ``warnings`` and in ``status()``. QMD is then left alone for ``retryInitialMs``,
doubling per consecutive failure up to ``retryMaxMs``, and tried again (a fresh process) by the
first search after that, forever: one success resets the backoff.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from mdrecall.config import MemoryConfig
from mdrecall.errors import MdrecallError, PathError
from mdrecall.freshness import Snapshot, make_snapshot, scan_dirs
from mdrecall.search.scope import Scope
from mdrecall.types import ProbeResult, SearchResponse, SearchResult, SyncReport
from mdrecall.workspace import discover_memory_files, rel_path_for, resolve_memory_path

from mdrecall.backends.qmd import contract
from mdrecall.backends.qmd.layout import INDEX_NAME, Collection, QmdLayout, find_binary
from mdrecall.backends.qmd.process import QmdError, QmdProcess
from mdrecall.backends.qmd.query import Ranked, best_window, merge_keyword, merge_ranked, parse_hits, plan_keywords
from mdrecall.backends.qmd.read import read_memory_file
from mdrecall.backends.qmd.sessions import TranscriptMirror
from mdrecall.backends.qmd.settings import QmdSettings

log = logging.getLogger(__name__)

_INDEXED = re.compile(r"Indexed: (\d+) new, (\d+) updated, (\d+) unchanged, (\d+) removed")
_OUTPUT_KEEP = 2000


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat() if epoch else None


class Backoff:
    """Consecutive failures and when QMD may be tried again (never "never")."""

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_s = initial_ms / 1000.0
        self.max_s = max_ms / 1000.0
        self.failures = 0
        self.last_error: str | None = None
        self.last_kind: str | None = None
        self.last_failure_at: float | None = None
        self.retry_at: float = 0.0  # wall clock

    def fail(self, kind: str, message: str) -> float:
        self.failures += 1
        self.last_kind, self.last_error = kind, message
        self.last_failure_at = time.time()
        delay = min(self.max_s, self.initial_s * 2 ** (self.failures - 1))
        self.retry_at = self.last_failure_at + delay
        return delay

    def succeed(self) -> None:
        self.failures = 0
        self.retry_at = 0.0

    def ready(self) -> bool:
        return time.time() >= self.retry_at

    def to_dict(self) -> dict[str, Any]:
        waiting = max(0.0, self.retry_at - time.time())
        return {
            "state": "backoff" if waiting > 0 else ("ok" if self.failures == 0 else "retrying"),
            "failures": self.failures,
            "lastError": self.last_error,
            "lastErrorKind": self.last_kind,
            "lastFailureAt": _iso(self.last_failure_at),
            "retryAt": _iso(self.retry_at) if self.failures else None,
            "retryInSeconds": round(waiting, 3) if self.failures else None,
        }


class QmdMemoryManager:
    backend = "qmd"

    def __init__(self, workspace: Path, config: MemoryConfig, settings: QmdSettings) -> None:
        self.workspace = workspace
        self.config = config
        self.settings = settings
        self.layout = QmdLayout(workspace, config, settings)
        self.layout.prepare()
        self.binary = find_binary(settings)
        self.mirror = TranscriptMirror(workspace, config, self.layout.sessions_dir) if "sessions" in config.sources else None
        self._env = self.layout.env()
        self._collections: dict[str, Collection] = {}
        self._lock = threading.RLock()  # the process, the backoff, the builtin fallback
        self._sync_lock = threading.Lock()
        self._proc: QmdProcess | None = None
        self._starts = 0
        self._restart_needed = False
        self._backoff = Backoff(settings.retryInitialMs, settings.retryMaxMs)
        self._builtin: Any = None
        self._builtin_error: str | None = None
        self._watcher: Any = None
        self._watcher_error: str | None = None
        self._background: threading.Thread | None = None
        self._closed = False
        self._dirty = True
        self._dirty_generation = 0
        self._snapshot: Snapshot | None = None
        self._last_sync_at: float | None = None
        self._last_sync_error: str | None = None
        self._last_update: dict[str, Any] | None = None
        self._qmd_status: dict[str, Any] = {}
        self._answered_by: str | None = None
        self._fallback: dict[str, Any] | None = None
        self._version: str | None = None
        self._write_config()

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "QmdMemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_background(self) -> None:
        """Index, start the warm process and the file watcher, off the caller's thread."""
        if self._background is None:
            self._background = threading.Thread(target=self._warm_up, name="mdrecall-qmd-warm", daemon=True)
            self._background.start()

    def _warm_up(self) -> None:
        try:
            if self.settings.fallback == "builtin" and self.settings.warmFallback:
                self._builtin_manager()
            self.sync()
            if not self._closed:
                with self._lock:
                    if self._backoff.ready():
                        self._ensure_process()
        except Exception as exc:  # searches report it; the fallback answers meanwhile
            log.warning("mdrecall: QMD warm-up failed: %s", exc)
        if self.config.sync.watch and not self._closed:
            try:
                from mdrecall.watch import attach_watcher

                self._watcher = attach_watcher(self)
            except Exception as exc:  # searches still compare the files with the last sync
                self._watcher_error = f"{type(exc).__name__}: {exc}"
                log.warning("mdrecall: file watcher not started (%s)", exc)

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`start_background`'s first sync, process start and watcher (True: done)."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @property
    def watcher(self) -> Any:
        return self._watcher

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.stop()
        if self._background is not None and self._background is not threading.current_thread():
            self._background.join(10.0)
        with self._lock:
            if self._proc is not None:
                self._proc.close()
                self._proc = None
            if self._builtin is not None:
                self._builtin.close()
                self._builtin = None

    @property
    def process(self) -> QmdProcess | None:
        """The warm ``qmd mcp`` process (None before the first start or after a failure)."""
        return self._proc

    # -- the QMD process -------------------------------------------------------------------------
    def _argv(self, *command: str) -> list[str]:
        assert self.binary is not None
        return [str(self.binary), "--index", INDEX_NAME, *command, *self.settings.extraArgs]

    def _ensure_process(self) -> QmdProcess:
        """The live process, started if there is none. Caller holds ``_lock``.

        A process found dead (killed, crashed) is a failure like any other: it is not restarted on
        the spot, so the answer falls back and the backoff decides when QMD runs again.
        """
        proc = self._proc
        if proc is not None and proc.alive and not self._restart_needed:
            return proc
        if proc is not None:
            self._proc = None
            proc.kill()
            if not self._restart_needed:
                raise QmdError("exited", proc.exit_message())
        self._restart_needed = False
        if self.binary is None:
            raise QmdError("spawn", "no qmd binary: run scripts/install-qmd.sh, put qmd on PATH or set qmd.binary")
        proc = QmdProcess(self._argv("mcp"), self._env, self.layout.root)
        proc.start(self.settings.startTimeoutMs / 1000.0)
        self._starts += 1
        self._version = str(proc.server_info.get("version") or "") or self._version
        self._proc = proc
        self._refresh_qmd_status(proc)
        return proc

    def _refresh_qmd_status(self, proc: QmdProcess) -> None:
        self._qmd_status = proc.call_tool("status", {}, self.settings.timeoutMs / 1000.0)

    def _on_failure(self, exc: QmdError) -> float:
        """Record a failure, drop the process; seconds until QMD is tried again. Caller holds ``_lock``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
        delay = self._backoff.fail(exc.kind, str(exc))
        log.warning("mdrecall: QMD failed (%s: %s); the fallback answers, QMD retried in %.1fs", exc.kind, exc, delay)
        return delay

    def _run_cli(self, args: Sequence[str], timeout_ms: int) -> str:
        """One QMD command to completion (``update``, ``embed``); its output, or QmdError."""
        if self.binary is None:
            raise QmdError("spawn", "no qmd binary: run scripts/install-qmd.sh, put qmd on PATH or set qmd.binary")
        try:
            proc = subprocess.Popen(
                self._argv(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=self._env, cwd=str(self.layout.root), start_new_session=True,
            )
        except OSError as exc:
            raise QmdError("spawn", f"cannot start {self.binary}: {exc}") from exc
        try:
            out, _ = proc.communicate(timeout=timeout_ms / 1000.0)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.communicate()
            raise QmdError("timeout", f"qmd {' '.join(args)} took longer than {timeout_ms} ms") from None
        text = out.decode("utf-8", "replace")
        if proc.returncode != 0:
            raise QmdError("exited", f"qmd {' '.join(args)} exited with code {proc.returncode}: {text.strip()[-_OUTPUT_KEEP:]}")
        return text

    # -- configuration and models ---------------------------------------------------------------
    def _write_config(self) -> bool:
        changed = self.layout.write_config()
        self._collections = {c.name: c for c in self.layout.collections()}
        return changed

    def _effective_mode(self) -> tuple[str, list[str]]:
        """The QMD mode searches use now, and why it differs from ``qmd.mode``."""
        mode = self.settings.mode
        missing = self.layout.missing_models(mode)
        if missing:
            reasons = "; ".join(m.problem or m.role for m in missing)
            return "search", [f"qmd.mode {mode} needs QMD's {', '.join(m.role for m in missing)} model(s), absent ({reasons}); "
                              "mdrecall never downloads models: answered by QMD's BM25 search instead"]
        if mode != "search" and self._qmd_status and not self._qmd_status.get("hasVectorIndex"):
            return "search", [f"qmd.mode {mode}: QMD has no vectors yet (sync runs `qmd embed`); answered by BM25 search"]
        return mode, []

    def _model_name(self, mode: str) -> str:
        if mode == "search":
            return "bm25"
        return self.layout.models()["embed"].path.name

    # -- sync ------------------------------------------------------------------------------------
    def mark_dirty(self, paths: Sequence[str] | None = None) -> None:
        self._dirty_generation += 1
        self._dirty = True

    def sync(self, force: bool = False, progress: Any = None, *, lock_timeout: float | None = None) -> SyncReport:
        """Re-index in QMD (and in the builtin fallback when it is open). QMD failing does not raise:
        the report's ``rebuild_reason`` and ``status()`` say so, and the fallback answers."""
        if self._closed:
            raise MdrecallError("manager is closed")
        if not self._sync_lock.acquire(timeout=-1 if lock_timeout is None else max(0.0, lock_timeout)):
            report = SyncReport()
            report.rebuild_reason = "another sync in this process is running"
            return report
        try:
            return self._sync_locked(force)
        finally:
            self._sync_lock.release()

    def _sync_locked(self, force: bool) -> SyncReport:
        started = time.monotonic()
        generation = self._dirty_generation
        report = SyncReport()
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)  # before the files are listed
        if self.mirror is not None:
            self.mirror.export()
        if self._write_config():
            self._restart_needed = self._proc is not None  # the running server read the old collections
        observed = self._observe_files()
        try:
            output = self._run_cli(["update"], self.settings.updateTimeoutMs)
            counts = [tuple(map(int, m)) for m in _INDEXED.findall(output)]
            new, updated, unchanged, removed = (sum(c[i] for c in counts) for i in range(4))
            report.files_indexed, report.files_unchanged, report.files_removed = new + updated, unchanged, removed
            report.files_scanned = new + updated + unchanged
            if self.settings.mode != "search" and not self.layout.missing_models("vsearch"):
                self._run_cli(["embed"], self.settings.embedTimeoutMs)
            self._last_update = {"at": _iso(time.time()), "new": new, "updated": updated, "unchanged": unchanged, "removed": removed}
            self._last_sync_error = None
            self._snapshot = make_snapshot(dirs, dirs_racy, observed)
            if self._dirty_generation == generation:
                self._dirty = False
            self._last_sync_at = time.time()
            with self._lock:
                if self._proc is not None and self._proc.alive and not self._restart_needed:
                    try:
                        self._refresh_qmd_status(self._proc)
                    except QmdError:
                        pass  # the next search finds out
        except QmdError as exc:
            self._last_sync_error = f"{exc.kind}: {exc}"
            report.rebuild_reason = f"QMD could not index ({exc}); the builtin engine answers meanwhile"
            with self._lock:
                self._on_failure(exc)
        builtin = self._builtin
        if builtin is not None:
            try:
                builtin.sync(force=force)
            except Exception as exc:
                log.warning("mdrecall: builtin fallback index could not sync: %s", exc)
        report.seconds = time.monotonic() - started
        return report

    def _observe_files(self) -> dict[str, tuple[int, int, int]]:
        """mtime+size of every indexed file now (the snapshot a search re-checks cheaply)."""
        paths = [f.abspath for f in discover_memory_files(self.workspace, self.config)] if "memory" in self.config.sources else []
        if self.mirror is not None:
            from mdrecall.transcripts import list_transcripts

            paths += [str(p) for _, p in list_transcripts(self.workspace, self.config.sessions.dir)]
        observed: dict[str, tuple[int, int, int]] = {}
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            observed[path] = (st.st_mtime_ns, st.st_size, time.time_ns())
        return observed

    def _needs_check(self) -> bool:
        if self._dirty or self._snapshot is None:
            return True
        watcher = self._watcher
        if watcher is not None and watcher.has_pending():
            return True
        if watcher is not None and watcher.running:
            return False  # events report changes; no stat per search
        return self._snapshot.changed()

    def _refresh_for_search(self) -> tuple[bool, list[str]]:
        """(stale, warnings): QMD's index brought up to date when the files changed."""
        if not self._needs_check():
            return False, []
        if not self.config.sync.onSearch:
            return True, ["automatic sync is off (sync.onSearch: false); files changed since the last sync"]
        report = self.sync(lock_timeout=self.config.sync.searchWaitMs / 1000.0)
        if report.rebuild_reason and self._last_sync_error is None:  # busy: another sync is running
            return True, [f"{report.rebuild_reason} (waited {self.config.sync.searchWaitMs} ms); results may miss recent changes"]
        if self._last_sync_error is not None:
            return True, [f"QMD could not index the latest changes ({self._last_sync_error})"]
        return False, []

    # -- search ----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        sources: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchResponse:
        if self._closed:
            raise MdrecallError("manager is closed")
        text = (query or "").strip()
        configured = list(self.config.sources)
        wanted = [s for s in sources if s in configured] if sources else configured
        mode, mode_notes = self._effective_mode()
        if not text or not wanted:
            return contract.empty_response(mode, self._model_name(mode), [], self._freshness(False))
        limit = max_results or self.config.query.maxResults
        floor = self.config.query.minScore if min_score is None else min_score
        # While QMD is backing off, not even its index is touched: the builtin keeps itself fresh.
        stale, notes = self._refresh_for_search() if self._backoff.ready() else (False, [])
        with self._lock:
            if not self._backoff.ready():
                reason = (f"QMD unavailable ({self._backoff.last_kind}: {self._backoff.last_error}); answered by the builtin engine; "
                          f"QMD is retried after {_iso(self._backoff.retry_at)}")
                return self._fall_back(reason, text, max_results, min_score, session_key, sources, now)
            try:
                proc = self._ensure_process()
                ranked = self._ask(proc, mode, text, wanted)
                self._backoff.succeed()
            except QmdError as exc:
                delay = self._on_failure(exc)
                reason = f"QMD failed ({exc.kind}: {exc}); answered by the builtin engine; QMD is retried in {delay:.1f} s"
                return self._fall_back(reason, text, max_results, min_score, session_key, sources, now)
            self._answered_by = "qmd"
            self._fallback = None
        passing, behind = self._to_results([r for r in ranked if r.score >= floor], wanted, session_key, limit)
        if behind:
            self.mark_dirty()
            stale = True
            notes.append(f"QMD's index is behind the files for {', '.join(sorted(behind)[:3])}; the next search re-indexes")
        response = contract.qmd_response(
            contract.fit_budget(passing, limit, self.config.query.maxInjectedChars), mode, self._model_name(mode),
            warnings=mode_notes + notes, degraded=bool(mode_notes), stale=stale, freshness=self._freshness(stale),
        )
        return response

    def _ask(self, proc: QmdProcess, mode: str, text: str, wanted: list[str]) -> list[Ranked]:
        names = sorted(c.name for c in self._collections.values() if c.source in wanted)
        if not names:
            return []
        timeout = self.settings.timeoutMs / 1000.0
        # QMD's lex sub-query returns at most 20 documents per collection; ask for all of them.
        base = {"limit": 20 * len(names), "collections": names}
        if mode == "search":
            plan = plan_keywords(text, self.settings.keywordMatch, self.settings.maxTerms)
            if not plan.lex:
                return []
            calls = [("query", {**base, "searches": [{"type": "lex", "query": q}], "rerank": False}) for q in plan.lex]
            answers = [parse_hits(a) for a in proc.call_tools(calls, timeout)]
            total = int(self._qmd_status.get("totalDocuments") or 0)
            return merge_keyword(plan, answers, total, self.settings.keywordMatch)
        if mode == "vsearch":
            args = {**base, "searches": [{"type": "vec", "query": text}], "rerank": False}
        else:
            args = {**base, "query": text, "rerank": True}
        return merge_ranked(parse_hits(proc.call_tool("query", args, timeout)))

    def _to_results(self, ranked: list[Ranked], wanted: list[str], session_key: str | None,
                    limit: int) -> tuple[list[SearchResult], set[str]]:
        """The first ``limit`` QMD hits that map to mdrecall results: workspace paths, JSONL lines for
        transcripts, the scope; each read from disk to place its lines (only these are read)."""
        scope = Scope(tuple(wanted), self._transcripts_prefix(session_key))
        results: list[SearchResult] = []
        behind: set[str] = set()
        seen: set[str] = set()
        for item in ranked:
            if len(results) >= limit:
                break
            hit = item.hit
            collection = self._collections.get(hit.collection)
            if collection is None:
                continue
            mirrored = None
            if collection.source == "sessions":
                mirrored = self.mirror.lookup(hit.rel) if self.mirror is not None else None
                if mirrored is None:
                    continue
                path = mirrored.rel_path
                start, end = mirrored.jsonl_lines(hit.start_line, hit.end_line)
                disk = self.layout.sessions_dir / hit.rel
            else:
                try:
                    disk, path = resolve_memory_path(self.workspace, self.config, rel_path_for(self.workspace, collection.root / hit.rel))
                except PathError:
                    continue  # not something read_file may open: never cite it
                start, end = hit.start_line, hit.end_line
            if path in seen or not scope.allows(collection.source, path):
                continue
            seen.add(path)
            text = hit.text
            lines = _current_lines(disk, hit.docid)
            if lines is None:
                behind.add(path)  # QMD indexed other text: keep its lines, say the index is behind
            else:
                window = best_window(lines, item.weights)
                if window is not None:
                    first, last, _ = window
                    text = "\n".join(lines[first - 1 : last])
                    if mirrored is not None:
                        start, end = mirrored.jsonl_lines(first, last)
                    else:
                        start, end = first, last
            results.append(contract.make_result(path, start, end, item.score, text, collection.source))
        return results, behind

    def _transcripts_prefix(self, session_key: str | None) -> str | None:
        """Whose transcripts a search may see: the builtin's rule (``sessions.visibility``)."""
        if "sessions" not in self.config.sources:
            return None
        from mdrecall.sessions import transcripts_prefix

        policy = self.config.sessions
        shared = session_key is not None and any(marker in session_key for marker in policy.sharedKeyMarkers)
        if policy.visibility == "all" and not shared:
            return None
        return transcripts_prefix(session_key or "", self.config)

    def _fall_back(self, reason: str, query: str, max_results: int | None, min_score: float | None,
                   session_key: str | None, sources: Sequence[str] | None, now: datetime | None) -> SearchResponse:
        """Caller holds ``_lock``."""
        self._answered_by = "builtin"
        self._fallback = {"from": "qmd", "to": "builtin" if self.settings.fallback == "builtin" else None,
                          "reason": reason, "at": _iso(time.time())}
        if self.settings.fallback == "none":
            mode, _ = self._effective_mode()
            self._answered_by = None
            return contract.empty_response(mode, self._model_name(mode), [reason.replace(
                "answered by the builtin engine", "no answer (qmd.fallback: none)")], self._freshness(True))
        builtin = self._builtin_manager()
        if builtin is None:
            mode, _ = self._effective_mode()
            return contract.empty_response(mode, self._model_name(mode), [reason, f"the builtin engine failed too: {self._builtin_error}"],
                                           self._freshness(True))
        response = builtin.search(query, max_results=max_results, min_score=min_score, session_key=session_key,
                                  sources=sources, now=now)
        return contract.fallback_response(response, reason)

    def _builtin_manager(self) -> Any:
        """The builtin engine on the same workspace and config, opened once (None if it cannot open)."""
        with self._lock:
            if self._builtin is None and not self._closed:
                from mdrecall.manager import BuiltinMemoryManager

                # Our watcher syncs it (sync() follows QMD's with the builtin's); without one, its
                # own search-time check keeps it fresh.
                cfg = self.config.model_copy(update={"backend": "builtin", "sync": self.config.sync.model_copy(update={"watch": False})})
                try:
                    manager = BuiltinMemoryManager(self.workspace, cfg)
                    manager.start_background()
                    self._builtin = manager
                    self._builtin_error = None
                except Exception as exc:
                    self._builtin_error = f"{type(exc).__name__}: {exc}"
            return self._builtin

    def _freshness(self, stale: bool) -> dict[str, Any]:
        watcher = self._watcher
        return {
            "stale": stale,
            "checkedAt": _iso(time.time()),
            "lastSyncAt": _iso(self._last_sync_at),
            "dirty": self._dirty,
            "watcher": "off" if watcher is None else ("running" if watcher.running else "stopped"),
            "answeredBy": "qmd",
        }

    # -- read, status, probes --------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        return read_memory_file(self.workspace, self.config, rel_path, from_line, lines)

    def status(self, deep: bool = False) -> dict[str, Any]:
        with self._lock:
            if self._backoff.ready() and not self._closed:
                try:
                    self._refresh_qmd_status(self._ensure_process())
                    self._backoff.succeed()
                except QmdError as exc:
                    self._on_failure(exc)
            process = self._proc
            qmd = dict(self._qmd_status)
            health = self._backoff.to_dict()
            fallback = dict(self._fallback) if self._fallback else None
            builtin = self._builtin
        mode, mode_notes = self._effective_mode()
        snapshot = self._snapshot
        clean = not self._dirty and snapshot is not None and not snapshot.changed() and self._last_sync_error is None
        documents = {c.get("name"): c.get("documents") for c in qmd.get("collections") or []}
        reasons = list(mode_notes)
        if health["failures"]:
            reasons.append(f"QMD failing ({health['lastError']}); the builtin engine answers until {health['retryAt']}")
        common = {
            "workspaceDir": str(self.workspace),
            "dbPath": str(self.layout.db_path),
            "files": int(qmd.get("totalDocuments") or 0),
            "chunks": int(qmd.get("totalDocuments") or 0),  # QMD's unit is the document
            "sources": list(self.config.sources),
            "extraPaths": list(self.config.extraPaths),
            "provider": "qmd",
            "model": self._model_name(mode),
            "searchMode": contract.SEARCH_MODES[mode],
            "modeReasons": reasons,
            "clean": clean,
            "dirty": not clean,
            "lastSyncAt": _iso(self._last_sync_at),
            "lastError": self._last_sync_error or health["lastError"],
            "freshness": self._freshness(not clean),
            "answeredBy": self._answered_by,
            "fallback": fallback,
            "watcher": self._watcher.status() if self._watcher is not None else (
                {"running": False, "error": self._watcher_error} if self._watcher_error else None),
        }
        details = {
            "binary": str(self.binary) if self.binary else None,
            "version": self._version,
            "indexDir": str(self.layout.root),
            "configPath": str(self.layout.config_path),
            "mode": self.settings.mode,
            "effectiveMode": mode,
            "keywordMatch": self.settings.keywordMatch,
            "timeoutMs": self.settings.timeoutMs,
            "models": {r: {"path": str(m.path), "present": m.present, "problem": m.problem} for r, m in self.layout.models().items()},
            "collections": [{"name": c.name, "path": str(c.root), "pattern": c.pattern, "source": c.source,
                             "documents": documents.get(c.name)} for c in self._collections.values()],
            "vectorIndex": bool(qmd.get("hasVectorIndex")),
            "needsEmbedding": qmd.get("needsEmbedding"),
            "process": {"transport": "mcp-stdio", "running": bool(process and process.alive), "pid": process.pid if process else None,
                        "startedAt": _iso(process.started_at) if process else None, "starts": self._starts,
                        "requests": process.requests if process else 0},
            "health": health,
            "lastUpdate": self._last_update,
            "fallbackEngine": None if builtin is None else {"opened": True, "dbPath": str(builtin.db_path)},
        }
        return contract.status_mapping(common, details)

    def probe_embedding_availability(self) -> ProbeResult:
        embed = self.layout.models()["embed"]
        if not embed.present:
            return ProbeResult(False, f"{embed.problem}; mdrecall never downloads QMD's models", "qmd", embed.path.name)
        return ProbeResult(True, None, "qmd", embed.path.name)

    def probe_vector_availability(self) -> bool:
        return self.layout.models()["embed"].present and bool(self._qmd_status.get("hasVectorIndex"))


def _current_lines(path: Path, docid: str) -> list[str] | None:
    """The lines of ``path`` if it still holds the text QMD indexed (the docid is a sha256 prefix of
    it), else None."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if docid and not hashlib.sha256(raw).hexdigest().startswith(docid.lower()):
        return None
    lines = raw.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
