"""``backend: qmd``: searches answered by the external QMD tool, kept warm, with a builtin fallback.

Process model (docs/qmd.md): one ``qmd mcp`` child per manager, spoken to over stdio, started in
the background (:mod:`mdrecall.backends.qmd.supervisor`: never on a search's thread, never under a
lock a search needs) and kept for the manager's life, so a search costs a few pipe round trips and no
process.
``qmd update`` (and ``qmd embed`` when the mode needs vectors and the model is present) run as
short-lived commands on ``sync()``.

Freshness is the builtin's :class:`~mdrecall.freshness.monitor.FreshnessMonitor`, with this manager
as its target: the watcher (``sync.watch``) and interval syncs call :meth:`run_sync`, a search
re-checks the files when the monitor says so. A file walk (mtime+size against what the last
successful ``qmd update`` saw) decides whether ``qmd update`` must run, so a search over unchanged
files starts no process.

Failures: a search that QMD cannot answer within ``qmd.timeoutMs`` (no binary, a crash, a timeout, a
process found dead, a start still under way or failed) is answered by the builtin engine
(``backend: builtin`` on the same workspace and config), with the reason first in ``warnings`` and in
``status()``; QMD is retried after a backoff (:mod:`mdrecall.backends.qmd.health`), forever. A failed
start counts as a failure too.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mdrecall.backends.qmd import results
from mdrecall.backends.qmd.files import FileStamps, indexed_stamps, pending_changes, stat_files
from mdrecall.backends.qmd.health import Backoff, iso
from mdrecall.backends.qmd.layout import INDEX_NAME, Collection, QmdLayout, find_binary
from mdrecall.backends.qmd.process import QmdError, QmdProcess, run_command
from mdrecall.backends.qmd.query import Ranked, merge_keyword, merge_ranked, parse_hits, plan_keywords
from mdrecall.backends.qmd.sessions import TranscriptMirror
from mdrecall.backends.qmd.supervisor import BoundedSync, Supervisor, Unavailable
from mdrecall.config import MemoryConfig
from mdrecall.contract import AS_OF_UNSUPPORTED, ManagerBase, MemorySearchManager, search_memory
from mdrecall.errors import MdrecallError
from mdrecall.freshness.monitor import BUSY_OTHER_THREAD, Comparison, FreshnessMonitor
from mdrecall.freshness.snapshot import scan_dirs
from mdrecall.freshness.watcher import MemoryWatcher
from mdrecall.index.changes import Observed
from mdrecall.index.syncing import SyncRun
from mdrecall.search.pipeline import cut_off
from mdrecall.search.scope import scope_for
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.reading import read_memory_lines
from mdrecall.sources.sessions import SessionSource
from mdrecall.types import (
    ProbeResult,
    ProgressCallback,
    ReadResult,
    SearchRequest,
    SearchResponse,
    Status,
    SyncProgress,
    SyncReport,
)

log = logging.getLogger(__name__)

_INDEXED = re.compile(r"Indexed: (\d+) new, (\d+) updated, (\d+) unchanged, (\d+) removed")
_NO_BINARY = "no qmd binary: run scripts/install-qmd.sh, put qmd on PATH or set qmd.binary"
#: The share of ``qmd.timeoutMs`` a search may spend waiting for a start: the rest is for the question.
_START_WAIT_SHARE = 0.75

class QmdMemoryManager(ManagerBase):
    backend = "qmd"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        super().__init__(workspace, config)
        self.settings = config.qmd
        self.layout = QmdLayout(workspace, config)
        self.layout.prepare()
        self.binary = find_binary(self.settings)
        sessions = "sessions" in config.sources
        self.mirror = TranscriptMirror(workspace, config, self.layout.sessions_dir) if sessions else None
        self.adapters: list[SourceAdapter] = [SessionSource(workspace, config)] if sessions else []
        self.monitor = FreshnessMonitor(self)
        self.collections: dict[str, Collection] = {}
        self.backoff = Backoff(self.settings.retryInitialMs, self.settings.retryMaxMs)
        #: What QMD's ``status`` tool said last (document counts, vectors).
        self.qmd_status: dict[str, Any] = {}
        self.version: str | None = None
        #: Who answered the last search (``qmd`` | ``builtin``), and why QMD did not.
        self.answered_by: str | None = None
        self.fallback_state: dict[str, Any] | None = None
        self.last_sync_at: float | None = None
        self.last_sync_error: str | None = None
        self.last_update: dict[str, Any] | None = None
        self.builtin_error: str | None = None
        self._env = self.layout.env()
        self.supervisor = Supervisor(lambda: QmdProcess(self._argv("mcp"), self._env, self.layout.root),
                                     self.settings.startTimeoutMs / 1000.0, self.backoff, self._started)  # fmt: skip
        self._lock = threading.Lock()  # the answer bookkeeping (who answered, the fallback's reason)
        self._sync_lock = threading.Lock()
        self._builtin_lock = threading.Lock()
        self._builtin: MemorySearchManager | None = None
        #: The files as the last successful ``qmd update`` saw them; None before the first.
        self._indexed: FileStamps | None = None
        self._background: threading.Thread | None = None
        self._bounded_sync = BoundedSync()
        self._cancel = threading.Event()  # set on close: a running qmd update is killed
        self._first_sync = threading.Event()  # the warm-up's first sync finished (or failed)
        self._closed = False
        self._write_config()

    # -- lifecycle -------------------------------------------------------------------------------
    def start_background(self) -> None:
        """Index, start the warm process, the watcher and interval syncs, off the caller's thread."""
        if self._background is None:
            self._background = threading.Thread(target=self._warm_up, name="mdrecall-qmd-warm", daemon=True)
            self._background.start()

    def _warm_up(self) -> None:
        try:
            self.sync()
        except Exception as exc:  # searches report it; the fallback answers meanwhile
            log.warning("mdrecall: QMD warm-up failed: %s", exc)
        finally:
            self._first_sync.set()
        # The process starts on its own thread (a failed start is recorded in the backoff); the
        # fallback opens meanwhile, so it is ready if QMD is slow to start or never does.
        self.supervisor.start()
        if self.settings.fallback == "builtin" and self.settings.warmFallback and not self._closed:
            builtin = self._builtin_manager()
            try:
                if builtin is not None:
                    builtin.sync()
            except Exception as exc:
                log.warning("mdrecall: builtin fallback index could not sync: %s", exc)
        if not self._closed:
            self.monitor.start()
        self.supervisor.wait_started(self.settings.startTimeoutMs / 1000.0 + 5.0)

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`start_background`'s first sync, process start and watcher (True: done)."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @property
    def watcher(self) -> MemoryWatcher | None:
        return self.monitor.watcher

    @property
    def process(self) -> QmdProcess | None:
        """The warm ``qmd mcp`` process (None before the first start or after a failure)."""
        return self.supervisor.process

    @property
    def starts(self) -> int:
        """Processes started successfully over the manager's life."""
        return self.supervisor.starts

    @property
    def builtin(self) -> MemorySearchManager | None:
        """The builtin engine answering in QMD's place, once opened."""
        return self._builtin

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel.set()
        self._run_close_hooks()  # background writers (recall tracking) drain first
        self.monitor.stop()
        self.supervisor.close()  # first: the warm-up may be waiting for a start
        if self._background is not None and self._background is not threading.current_thread():
            self._background.join(10.0)
        with self._builtin_lock:
            builtin, self._builtin = self._builtin, None
        if builtin is not None:
            builtin.close()

    # -- the QMD process -------------------------------------------------------------------------
    def _argv(self, *command: str) -> list[str]:
        if self.binary is None:
            raise QmdError("spawn", _NO_BINARY)
        return [str(self.binary), "--index", INDEX_NAME, *command, *self.settings.extraArgs]

    def _started(self, proc: QmdProcess) -> None:
        """A new process, before any search gets it (on the start's thread)."""
        self.version = str(proc.server_info.get("version") or "") or self.version
        self._refresh_qmd_status(proc)

    def _refresh_qmd_status(self, proc: QmdProcess) -> None:
        self.qmd_status = proc.call_tool("status", {}, self.settings.timeoutMs / 1000.0)

    def _acquire(self, deadline: float) -> QmdProcess:
        """The process for one request, waiting for a start at most a share of the time left."""
        budget = max(0.0, deadline - time.monotonic())
        return self.supervisor.acquire(budget * _START_WAIT_SHARE)

    def _run_cli(self, args: Sequence[str], timeout_ms: int) -> str:
        """One QMD command to completion (``update``, ``embed``); its output, or QmdError."""
        return run_command(self._argv(*args), self._env, self.layout.root, timeout_ms, self._cancel)

    # -- configuration and models ---------------------------------------------------------------
    def _write_config(self) -> bool:
        changed = self.layout.write_config()
        self.collections = {c.name: c for c in self.layout.collections()}
        return changed

    def effective_mode(self) -> tuple[results.QmdMode, list[str]]:
        """The QMD mode searches use now, and why it differs from ``qmd.mode``."""
        mode = self.settings.mode
        missing = self.layout.missing_models(mode)
        if missing:
            reasons = "; ".join(m.problem or m.role for m in missing)
            return "search", [
                f"qmd.mode {mode} needs QMD's {', '.join(m.role for m in missing)} model(s), absent ({reasons}); "
                "mdrecall never downloads models: answered by QMD's BM25 search instead"
            ]
        if mode != "search" and self.qmd_status and not self.qmd_status.get("hasVectorIndex"):
            return "search", [f"qmd.mode {mode}: QMD has no vectors yet (sync runs `qmd embed`); answered by BM25 search"]
        return mode, []

    def model_name(self, mode: str) -> str:
        return "bm25" if mode == "search" else self.layout.models()["embed"].path.name

    # -- freshness (the monitor's target) --------------------------------------------------------
    def mark_dirty(self, paths: Sequence[str] | None = None) -> None:
        self.monitor.mark_dirty()

    def compare_with_files(self) -> Comparison:
        """The files on disk against what the last successful ``qmd update`` saw (a walk, no process)."""
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)  # before the files are listed
        observed: dict[str, Observed] = {}
        on_disk = stat_files(self.workspace, self.config, self.adapters, observed)
        pending = pending_changes(on_disk, self._indexed or {}, self.adapters)
        return Comparison(pending, None, self._indexed is not None, dirs, dirs_racy, observed)

    def index_last_sync_at(self) -> float | None:
        return self.last_sync_at

    def run_sync(self, *, lock_timeout: float | None, defer_sessions: bool) -> SyncReport:
        """An automatic sync (search, watcher, interval): ``qmd update`` only when the files moved.

        A ``qmd update`` process costs 0.2-0.4 s, the walk a few milliseconds; ``defer_sessions`` lets
        small transcript appends wait for their delta thresholds, as in the builtin."""
        generation = self.monitor.generation
        if not self.monitor.dirty and self._indexed is not None:
            comparison = self.compare_with_files()
            pending = comparison.pending
            if (pending.outstanding if defer_sessions else pending.count) == 0:
                self.monitor.compared(comparison, generation)
                return SyncReport(files_scanned=pending.files_on_disk, files_unchanged=pending.files_on_disk)
        if lock_timeout is None:
            return self.sync()
        # A slow or stopped `qmd update` never holds a search past the wait: it carries on in the
        # background (bounded by updateTimeoutMs), and the answer is marked stale meanwhile.
        return self._bounded_sync.run(lambda: self.sync(lock_timeout=lock_timeout), lock_timeout)

    # -- sync ------------------------------------------------------------------------------------
    def sync(self, force: bool = False, progress: ProgressCallback | None = None, *, lock_timeout: float | None = None) -> SyncReport:
        """Re-index in QMD (and in the builtin fallback when it is open). QMD failing does not raise:
        the report's ``rebuild_reason`` and ``status()`` say so, and the fallback answers."""
        if self._closed:
            raise MdrecallError("manager is closed")
        if not self._sync_lock.acquire(timeout=-1 if lock_timeout is None else max(0.0, lock_timeout)):
            return SyncReport(rebuild_reason=BUSY_OTHER_THREAD)
        try:
            return self._sync_locked(force, progress)
        finally:
            self._sync_lock.release()

    def _sync_locked(self, force: bool, progress: ProgressCallback | None) -> SyncReport:
        started = time.monotonic()
        generation = self.monitor.generation
        report = SyncReport()
        dirs = scan_dirs(self.workspace, self.config)  # before the files are listed
        if self.mirror is not None:
            self.mirror.export()
        if self._write_config():
            self.supervisor.restart()  # the running server read the old collections
        observed: dict[str, Observed] = {}
        on_disk = stat_files(self.workspace, self.config, self.adapters, observed)
        try:
            output = self._run_cli(["update"], self.settings.updateTimeoutMs)
            counts = [tuple(map(int, m)) for m in _INDEXED.findall(output)]
            new, updated, unchanged, removed = (sum(c[i] for c in counts) for i in range(4))
            report.files_indexed, report.files_unchanged, report.files_removed = new + updated, unchanged, removed
            report.files_scanned = new + updated + unchanged
            if self.settings.mode != "search" and not self.layout.missing_models("vsearch"):
                self._run_cli(["embed"], self.settings.embedTimeoutMs)
            self.last_update = {"at": iso(time.time()), "new": new, "updated": updated, "unchanged": unchanged, "removed": removed}
            self.last_sync_error = None
            self._indexed = indexed_stamps(on_disk)
            self.last_sync_at = time.time()
            self.monitor.synced(SyncRun(report, observed), dirs, generation, report.files_scanned)
            proc = self.supervisor.current()
            if proc is not None:
                try:
                    self._refresh_qmd_status(proc)
                except QmdError:
                    pass  # the next search finds out
        except QmdError as exc:
            self.last_sync_error = f"{exc.kind}: {exc}"
            report.rebuild_reason = f"QMD could not index ({exc}); the builtin engine answers meanwhile"
            if exc.kind != "cancelled":
                self.supervisor.fail(None, exc)
        if progress is not None:
            progress(SyncProgress(1, 1, "qmd update"))
        builtin = self._builtin
        if builtin is not None:
            try:
                builtin.sync(force=force)
            except Exception as exc:
                log.warning("mdrecall: builtin fallback index could not sync: %s", exc)
        report.seconds = time.monotonic() - started
        return report

    # -- search ----------------------------------------------------------------------------------
    def run_search(self, request: SearchRequest) -> SearchResponse:
        if self._closed:
            raise MdrecallError("manager is closed")
        if request.as_of is not None:
            # QMD ranks with its own index, which keeps no dates: answered as of now, and said so.
            response = self.run_search(replace(request, as_of=None, now=request.now or request.as_of))
            response.warnings.append(AS_OF_UNSUPPORTED.format(backend=self.backend))
            return response
        query, max_results, min_score, session_key, sources, now = (
            request.query, request.max_results, request.min_score, request.session_key, request.sources, request.now
        )
        when = now or datetime.now(UTC)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        text = (query or "").strip()
        configured = list(self.config.sources)
        wanted = [s for s in sources if s in configured] if sources else configured
        mode, mode_notes = self.effective_mode()
        if not text or not wanted:
            return results.qmd_response([], mode, self.model_name(mode), warnings=[], degraded=False, stale=False,
                                        freshness=self.monitor.freshness(False))  # fmt: skip
        limit = max_results or self.config.query.maxResults
        # Keyword scores are the builtin's calibrated ones: the same cut-off rule as its keyword-only search.
        floor = cut_off(self.config, mode == "search", min_score)
        # While QMD is backing off, not even its index is touched: the builtin keeps itself fresh.
        stale, notes = self.monitor.before_search(session_key) if self.backoff.ready() else (False, [])
        # QMD's share of this search, waiting for a start included: past it the fallback answers.
        deadline = time.monotonic() + self.settings.timeoutMs / 1000.0
        reason: str | None = None
        ranked: list[Ranked] = []
        try:
            proc = self._acquire(deadline)
        except Unavailable as exc:
            reason = self._unavailable(exc)
        else:
            try:
                ranked = self._ask(proc, mode, text, wanted, max(0.0, deadline - time.monotonic()))
                self.supervisor.succeed()
                with self._lock:
                    self.answered_by, self.fallback_state = "qmd", None
            except QmdError as exc:
                delay = self.supervisor.fail(proc, exc)
                reason = f"QMD failed ({exc.kind}: {exc}); answered by the builtin engine; QMD is retried in {delay:.1f} s"
        if reason is not None:
            response = self._fall_back(reason, request)
        else:
            mapped = results.map_hits(
                [r for r in ranked if r.score >= floor], workspace=self.workspace, config=self.config,
                collections=self.collections, mirror=self.mirror, scope=scope_for(self.config, wanted, session_key),
                limit=limit, mode=mode,
            )  # fmt: skip
            if mapped.behind:
                self.monitor.mark_dirty()
                stale = True
                notes.append(f"QMD's index is behind the files for {', '.join(sorted(mapped.behind)[:3])}; the next search re-indexes")
            response = results.qmd_response(
                results.fit_budget(mapped.hits, limit, self.config.query.maxInjectedChars, mode), mode, self.model_name(mode),
                warnings=mode_notes + notes, degraded=bool(mode_notes), stale=stale, freshness=self.monitor.freshness(stale),
            )  # fmt: skip
        self._notify_search(text, response, session_key, when)
        return response

    def _unavailable(self, exc: Unavailable) -> str:
        """Why QMD did not answer, for ``warnings`` and ``status()``."""
        if exc.kind in ("starting", "closed"):
            return f"{exc}; answered by the builtin engine meanwhile"
        if exc.kind == "backoff":
            return (f"QMD unavailable ({self.backoff.last_kind}: {self.backoff.last_error}); answered by the builtin engine; "
                    f"QMD is retried after {iso(self.backoff.retry_at)}")  # fmt: skip
        delay = max(0.0, self.backoff.retry_at - time.time())
        return f"QMD failed ({exc.kind}: {exc}); answered by the builtin engine; QMD is retried in {delay:.1f} s"

    def _ask(self, proc: QmdProcess, mode: str, text: str, wanted: Sequence[str], timeout: float) -> list[Ranked]:
        names = sorted(c.name for c in self.collections.values() if c.source in wanted)
        if not names:
            return []
        # QMD's lex sub-query returns at most 20 documents per collection; ask for all of them.
        base: dict[str, Any] = {"limit": 20 * len(names), "collections": names}
        if mode == "search":
            plan = plan_keywords(text, self.settings.keywordMatch, self.settings.maxTerms)
            if not plan.lex:
                return []
            calls = [("query", {**base, "searches": [{"type": "lex", "query": q}], "rerank": False}) for q in plan.lex]
            answers = [parse_hits(a) for a in proc.call_tools(calls, timeout)]
            total = int(self.qmd_status.get("totalDocuments") or 0)
            return merge_keyword(plan, answers, total, self.settings.keywordMatch)
        if mode == "vsearch":
            args = {**base, "searches": [{"type": "vec", "query": text}], "rerank": False}
        else:
            args = {**base, "query": text, "rerank": True}
        return merge_ranked(parse_hits(proc.call_tool("query", args, timeout)))

    def _fall_back(self, reason: str, request: SearchRequest) -> SearchResponse:
        """The builtin engine's answer in QMD's place (or none, with ``qmd.fallback: none``)."""
        builtin_answers = self.settings.fallback == "builtin"
        with self._lock:
            self.answered_by = "builtin" if builtin_answers else None
            self.fallback_state = {"from": "qmd", "to": "builtin" if builtin_answers else None, "reason": reason, "at": iso(time.time())}
        mode, _ = self.effective_mode()

        def nothing(*warnings: str) -> SearchResponse:
            return results.qmd_response([], mode, self.model_name(mode), warnings=list(warnings), degraded=True, stale=True,
                                        freshness=self.monitor.freshness(True))  # fmt: skip

        if not builtin_answers:
            return nothing(reason.replace("answered by the builtin engine", "no answer (qmd.fallback: none)"))
        builtin = self._builtin_manager()
        if builtin is None:
            return nothing(reason, f"the builtin engine failed too: {self.builtin_error}")
        try:
            response = search_memory(builtin, request)
        except Exception as exc:
            return nothing(reason, f"the builtin engine failed too: {type(exc).__name__}: {exc}")
        return results.fallback_response(response, reason)

    def _builtin_manager(self) -> MemorySearchManager | None:
        """The builtin engine on the same workspace and config, opened once (None if it cannot open).

        Opened through the backend registry, not ``open_manager``: the features ``open_manager``
        attaches (recall tracking) are attached to this manager already, and its answers pass
        through this manager's listeners; attaching them twice would record every fallback twice.
        """
        with self._builtin_lock:
            if self._builtin is None and not self._closed:
                from mdrecall.backends import get_backend_factory

                # This manager's watcher syncs it (sync() follows QMD's with the builtin's); without
                # one, its own search-time check keeps it fresh.
                cfg = self.config.model_copy(update={"backend": "builtin", "sync": self.config.sync.model_copy(update={"watch": False})})
                try:
                    self._builtin = get_backend_factory("builtin")(self.workspace, cfg)
                    self.builtin_error = None
                except Exception as exc:
                    self.builtin_error = f"{type(exc).__name__}: {exc}"
            return self._builtin

    # -- read, status, probes --------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        result = read_memory_lines(self.workspace, self.config, rel_path, from_line, lines)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now(UTC))
        return result

    def status(self) -> Status:
        from mdrecall.backends.qmd.status import build_status

        if self._background is not None:
            # What QMD indexed is known once this process synced: a status right after opening
            # (`mdrecall status`) waits a moment for the warm-up's first sync rather than report
            # every file as pending.
            self._first_sync.wait(self.config.sync.searchWaitMs / 1000.0)
        if self.backoff.ready() and not self._closed:
            try:
                proc = self._acquire(time.monotonic() + self.settings.timeoutMs / 1000.0)
            except Unavailable:
                pass  # starting, or the failure is recorded: build_status says which
            else:
                try:
                    self._refresh_qmd_status(proc)
                    self.supervisor.succeed()
                except QmdError as exc:
                    self.supervisor.fail(proc, exc)
        return build_status(self)

    def probe_embedding_availability(self) -> ProbeResult:
        embed = self.layout.models()["embed"]
        if not embed.present:
            return ProbeResult(False, f"{embed.problem}; mdrecall never downloads QMD's models", "qmd", embed.path.name)
        return ProbeResult(True, None, "qmd", embed.path.name)

    def probe_vector_availability(self) -> bool:
        return self.layout.models()["embed"].present and bool(self.qmd_status.get("hasVectorIndex"))
