"""File watching: mark the index dirty when memory files change, and ``mdrecall watch``.

The watcher is an optimisation, not the source of truth: the manager's reconciliation pass (a walk
with mtime+size) catches anything missed here. So the rules are "never die, never block, err towards
reporting": a directory event is always reported (files created in a brand-new subdirectory may race
the kernel watch being attached, and the directory event makes the next sync walk it), errors in the
callback are logged and the watcher keeps going, and a failing native watch falls back to polling.

Roots watched: ``MEMORY.md`` (through a non-recursive watch of the workspace directory), ``memory/``
recursively, each ``extraPaths`` entry (directories recursively, ``.md`` files through their parent),
and the sessions directory when ``"sessions"`` is a source. A root that does not exist yet is watched
through its nearest existing ancestor (non-recursively) until it appears, then the watch restarts.

Changes are debounced: the callback fires once ``sync.watchDebounceMs`` (1500 ms) passes without new
events, or at the latest after ``_MAX_WAIT_FACTOR`` times that while events keep arriving. Transcript
appends go through :class:`SessionDeltaTracker`, so a chatty session re-indexes every
``deltaBytes``/``deltaMessages`` rather than on every line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from mdrecall.config import MemoryConfig
from mdrecall.transcripts import is_transcript_file_name, sessions_root

if TYPE_CHECKING:
    import argparse

log = logging.getLogger(__name__)

ChangeCallback = Callable[[list[Path]], None]

IGNORED_SEGMENTS = frozenset(
    {".git", "node_modules", ".pnpm-store", ".venv", "venv", ".tox", "__pycache__", ".mypy_cache", ".pytest_cache"}
)
_MAX_WAIT_FACTOR = 5
# Newline counting reads appended bytes in blocks of this size (as OpenClaw does).
_COUNT_BLOCK = 64 * 1024


def is_ignored_name(name: str) -> bool:
    """Editor and tool temp files: vim swap/backup, emacs locks/backups, vim's 4913 probe, *.tmp."""
    return (
        name.endswith((".swp", ".swo", ".swx", "~", ".tmp", ".temp", ".part", ".crdownload"))
        or name.startswith((".#", "#"))
        or name == "4913"
        or name.startswith(".~lock.")
        or name in {".DS_Store", "Thumbs.db"}
    )


@dataclass(frozen=True, slots=True)
class WatchRoot:
    path: Path
    kind: str  # "memory" | "sessions"
    is_file: bool = False  # a single .md file (MEMORY.md, an extraPaths file)


def watch_roots(workspace: Path, config: MemoryConfig) -> list[WatchRoot]:
    """What the index covers, as watch roots (existing or not)."""
    from mdrecall.workspace import MEMORY_DIR, ROOT_MEMORY_FILE, extra_path_roots

    roots: list[WatchRoot] = []
    if "memory" in config.sources:
        roots.append(WatchRoot(workspace / ROOT_MEMORY_FILE, "memory", is_file=True))
        roots.append(WatchRoot(workspace / MEMORY_DIR, "memory"))
        for extra in extra_path_roots(workspace, config):
            roots.append(WatchRoot(extra, "memory", is_file=extra.name.endswith(".md") and not extra.is_dir()))
    if "sessions" in config.sources:
        roots.append(WatchRoot(sessions_root(workspace, config.sessions.dir), "sessions"))
    return roots


def _nearest_existing_dir(path: Path) -> Path | None:
    for candidate in [path, *path.parents]:
        if candidate.is_dir():
            return candidate
    return None


@dataclass
class WatchPlan:
    recursive: list[Path]
    shallow: list[Path]  # watched non-recursively: parents of file roots, ancestors of missing roots
    missing: list[Path]  # roots that do not exist yet; their creation restarts the watch


def plan_watch(roots: list[WatchRoot]) -> WatchPlan:
    recursive: list[Path] = []
    shallow: list[Path] = []
    missing: list[Path] = []
    for root in roots:
        if root.is_file:
            parent = _nearest_existing_dir(root.path.parent)
            if parent is not None and parent not in shallow:
                shallow.append(parent)
            if not root.path.parent.is_dir():
                missing.append(root.path.parent)
        elif root.path.is_dir():
            if root.path not in recursive:
                recursive.append(root.path)
        else:
            missing.append(root.path)
            ancestor = _nearest_existing_dir(root.path.parent)
            if ancestor is not None and ancestor not in shallow:
                shallow.append(ancestor)
    # A recursive watch already covers shallow dirs inside it.
    shallow = [s for s in shallow if not any(s == r or r in s.parents for r in recursive)]
    return WatchPlan(recursive, shallow, missing)


class RootFilter:
    """Decides which raw filesystem events matter to the index."""

    def __init__(self, roots: list[WatchRoot]):
        self.roots = roots

    def root_for(self, path: Path) -> WatchRoot | None:
        best: WatchRoot | None = None
        for root in self.roots:
            if path == root.path or root.path in path.parents:
                if best is None or len(root.path.parts) > len(best.path.parts):
                    best = root
        return best

    def accepts(self, path: Path) -> bool:
        root = self.root_for(path)
        if root is None:
            return False
        if root.is_file:
            return path == root.path
        rel_parts = path.relative_to(root.path).parts
        if any(part in IGNORED_SEGMENTS for part in rel_parts):
            return False
        if root.kind == "memory" and any(part.startswith(".") for part in rel_parts):
            return False  # memory/.dreams and other hidden state is not indexed (see workspace.py)
        if not rel_parts:
            return True  # the root directory itself (created or deleted)
        name = rel_parts[-1]
        if is_ignored_name(name):
            return False
        suffix = os.path.splitext(name)[1].lower()
        if suffix == "":
            return True  # a directory, or a deleted one we cannot stat any more
        if path.is_dir():
            return True
        if root.kind == "sessions":
            return is_transcript_file_name(name)
        return suffix == ".md"


# ---------------------------------------------------------------------------------------------
# Session transcript deltas


@dataclass
class DeltaState:
    last_size: int = 0
    pending_bytes: int = 0
    pending_messages: int = 0


class SessionDeltaTracker:
    """Decides when a growing transcript is worth re-indexing (OpenClaw's delta thresholds).

    ``observe(path)`` is called on every change; it returns True when the file should be re-indexed
    now: it is new to the tracker, it shrank or vanished (rewritten or deleted), or the bytes or
    messages appended since the last re-index reach ``delta_bytes`` / ``delta_messages``. A threshold
    of 0 means "any growth". After a sync the manager calls :meth:`mark_indexed`.
    """

    def __init__(self, delta_bytes: int = 100_000, delta_messages: int = 50):
        self.delta_bytes = delta_bytes
        self.delta_messages = delta_messages
        self._state: dict[Path, DeltaState] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: MemoryConfig) -> "SessionDeltaTracker":
        return cls(config.sync.sessions.deltaBytes, config.sync.sessions.deltaMessages)

    def prime(self, paths: Iterable[Path]) -> None:
        """Treat the current sizes as indexed (call right after a sync)."""
        for path in paths:
            self.mark_indexed(path)

    def mark_indexed(self, path: Path, size: int | None = None) -> None:
        if size is None:
            try:
                size = path.stat().st_size
            except OSError:
                self.forget(path)
                return
        with self._lock:
            self._state[path] = DeltaState(last_size=size)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._state.pop(path, None)

    def pending(self) -> dict[Path, DeltaState]:
        with self._lock:
            return {p: DeltaState(s.last_size, s.pending_bytes, s.pending_messages) for p, s in self._state.items()}

    def pending_files(self) -> list[Path]:
        """Files with un-indexed appended data (below the thresholds); a search-time sync may flush them."""
        with self._lock:
            return sorted(p for p, s in self._state.items() if s.pending_bytes > 0)

    def _reached(self, state: DeltaState) -> bool:
        bytes_hit = state.pending_bytes >= self.delta_bytes if self.delta_bytes > 0 else state.pending_bytes > 0
        msgs_hit = (
            state.pending_messages >= self.delta_messages if self.delta_messages > 0 else state.pending_messages > 0
        )
        return bytes_hit or msgs_hit

    def observe(self, path: Path) -> bool:
        try:
            size = path.stat().st_size
        except OSError:
            with self._lock:
                known = self._state.pop(path, None) is not None
            return known  # deleted: its rows must go
        with self._lock:
            state = self._state.get(path)
            if state is None:
                self._state[path] = DeltaState(last_size=size)
                return True  # a new transcript should become searchable now
            if size < state.last_size:
                self._state[path] = DeltaState(last_size=size)
                return True  # truncated or rewritten: the old rows are wrong
            if size == state.last_size:
                return False
            start = state.last_size
            state.last_size = size
            state.pending_bytes += size - start
            if state.pending_bytes < self.delta_bytes or self.delta_bytes <= 0:
                state.pending_messages += _count_newlines(path, start, size)
            if not self._reached(state):
                return False
            # The whole file is re-indexed, so nothing stays pending.
            state.pending_bytes = 0
            state.pending_messages = 0
            return True


def _count_newlines(path: Path, start: int, end: int) -> int:
    count = 0
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = end - start
            while remaining > 0:
                block = fh.read(min(_COUNT_BLOCK, remaining))
                if not block:
                    break
                count += block.count(b"\n")
                remaining -= len(block)
    except OSError:
        return 0
    return count


# ---------------------------------------------------------------------------------------------
# The watcher


class _Flag:
    """A stop signal watchfiles polls: set by stop() or by a restart request."""

    def __init__(self, *events: threading.Event):
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


@dataclass
class WatcherStats:
    started_at: float | None = None
    last_event_at: float | None = None
    last_callback_at: float | None = None
    events: int = 0
    callbacks: int = 0
    restarts: int = 0
    errors: int = 0
    last_error: str | None = None
    polling: bool = False
    roots: list[str] = field(default_factory=list)


class MemoryWatcher:
    """Watches the indexed roots in daemon threads and calls ``on_change(paths)`` after a quiet period.

    ``paths`` are absolute :class:`Path` objects (files or directories; deleted ones included).
    ``on_change`` runs on the watcher's dispatch thread, never concurrently with itself.
    """

    def __init__(
        self,
        workspace: Path | str,
        config: MemoryConfig,
        on_change: ChangeCallback,
        *,
        debounce_ms: int | None = None,
        session_tracker: SessionDeltaTracker | None = None,
        force_polling: bool | None = None,
    ):
        self.workspace = Path(workspace).expanduser().absolute()
        self.config = config
        self.on_change = on_change
        self.debounce_s = (config.sync.watchDebounceMs if debounce_ms is None else debounce_ms) / 1000
        self.sessions = session_tracker if session_tracker is not None else SessionDeltaTracker.from_config(config)
        self.force_polling = force_polling
        self.stats = WatcherStats()
        self._roots = watch_roots(self.workspace, config)
        self._filter = RootFilter(self._roots)
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._pending: set[Path] = set()
        self._first_pending_at: float | None = None
        self._last_pending_at: float | None = None
        self._threads: list[threading.Thread] = []
        self._ready = threading.Event()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._threads) and any(t.is_alive() for t in self._threads) and not self._stop.is_set()

    def start(self, wait_ready: float = 5.0) -> "MemoryWatcher":
        """Start the watch and dispatch threads; waits (bounded) until the first watch is attached."""
        if self._threads:
            return self
        try:
            import watchfiles  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("file watching needs watchfiles: pip install 'mdrecall[watch]'") from exc
        self._stop.clear()
        self.stats.started_at = time.time()
        if "sessions" in self.config.sources:
            from mdrecall.transcripts import list_transcripts

            self.sessions.prime(p for _, p in list_transcripts(self.workspace, self.config.sessions.dir))
        supervisor = threading.Thread(target=self._supervise, name="mdrecall-watch", daemon=True)
        dispatcher = threading.Thread(target=self._dispatch, name="mdrecall-watch-dispatch", daemon=True)
        self._threads = [supervisor, dispatcher]
        supervisor.start()
        dispatcher.start()
        self._ready.wait(wait_ready)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []

    def __enter__(self) -> "MemoryWatcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def has_pending(self) -> bool:
        """Events received but not yet handed to ``on_change`` (still inside the debounce window)."""
        with self._lock:
            return bool(self._pending)

    def status(self) -> dict[str, Any]:
        with self._lock:
            pending = len(self._pending)
        s = self.stats
        return {
            "running": self.running,
            "roots": list(s.roots),
            "polling": s.polling,
            "pending": pending,
            "events": s.events,
            "callbacks": s.callbacks,
            "restarts": s.restarts,
            "errors": s.errors,
            "lastError": s.last_error,
            "lastEventAt": s.last_event_at,
            "lastCallbackAt": s.last_callback_at,
            "debounceMs": int(self.debounce_s * 1000),
        }

    # -- event intake -------------------------------------------------------------------------

    def notify(self, paths: Iterable[Path | str]) -> None:
        """Feed raw changed paths (from the OS watch, or from an in-process transcript writer)."""
        accepted: list[Path] = []
        for raw in paths:
            path = Path(raw)
            if not self._filter.accepts(path):
                continue
            root = self._filter.root_for(path)
            if root is not None and root.kind == "sessions" and path.suffix == ".jsonl":
                if not self.sessions.observe(path):
                    continue
            accepted.append(path)
        if not accepted:
            return
        now = time.monotonic()
        with self._lock:
            self._pending.update(accepted)
            self._last_pending_at = now
            if self._first_pending_at is None:
                self._first_pending_at = now
            self.stats.events += len(accepted)
            self.stats.last_event_at = time.time()
        self._wake.set()

    # -- threads ------------------------------------------------------------------------------

    def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            plan = plan_watch(self._roots)
            self.stats.roots = [str(p) for p in plan.recursive] + [f"{p} (shallow)" for p in plan.shallow]
            self._restart.clear()
            polling = bool(self.force_polling) or failures >= 2
            self.stats.polling = polling
            errors: list[BaseException] = []
            workers: list[threading.Thread] = []
            attached: list[threading.Event] = []
            for paths, recursive in ((plan.recursive, True), (plan.shallow, False)):
                if not paths:
                    continue
                ready = threading.Event()
                attached.append(ready)
                workers.append(
                    threading.Thread(
                        target=self._watch_loop,
                        args=(paths, recursive, plan, polling, errors, ready),
                        name=f"mdrecall-watch-{'tree' if recursive else 'dir'}",
                        daemon=True,
                    )
                )
            for worker in workers:
                worker.start()
            for ready in attached:
                ready.wait(5.0)
            self._ready.set()
            while not self._stop.is_set() and not self._restart.is_set():
                if workers and not any(w.is_alive() for w in workers):
                    break
                # Nothing to watch at all (no roots exist, no ancestor either): re-plan now and then.
                self._restart.wait(0.2 if workers else 1.0)
                if not workers:
                    break
            self._restart.set()  # stop the sibling loop too
            for worker in workers:
                worker.join(5.0)
            if self._stop.is_set():
                break
            if errors:
                failures += 1
                self.stats.errors += len(errors)
                self.stats.last_error = repr(errors[-1])
                log.warning(
                    "mdrecall watcher error (%s), restarting%s", errors[-1], " with polling" if failures >= 2 else ""
                )
                self._stop.wait(min(5.0, 0.5 * failures))
            if workers:
                self.stats.restarts += 1
                # Anything created while no watch was attached is found by the reconciliation walk the
                # next sync runs; reporting the roots makes sure that sync happens.
                self.notify([r.path for r in self._roots if not r.is_file and r.path.exists()])

    def _needs_replan(self, changed: list[Path], plan: WatchPlan) -> bool:
        """A root appeared or vanished, or a directory on the way to a missing root was created."""
        for path in changed:
            if path in plan.missing:
                return True
            if path in plan.recursive and not path.exists():
                return True
            if any(m.is_relative_to(path) for m in plan.missing) and path.is_dir():
                return True
        return False

    def _watch_loop(
        self,
        paths: list[Path],
        recursive: bool,
        plan: WatchPlan,
        polling: bool,
        errors: list[BaseException],
        ready: threading.Event,
    ) -> None:
        # RustNotify directly (what watchfiles.watch wraps) so "ready" means the OS watch is attached.
        from watchfiles._rust_notify import RustNotify

        stop = _Flag(self._stop, self._restart)
        try:
            with RustNotify([str(p) for p in paths], False, polling, 300, recursive, True) as notifier:
                ready.set()
                while not stop.is_set():
                    raw = notifier.watch(400, 50, 1000, stop)
                    if raw == "stop":
                        return
                    if not isinstance(raw, set):  # "timeout" or "signal"
                        continue
                    changed = [Path(p) for _, p in raw]
                    self.notify(changed)
                    if self._needs_replan(changed, plan):
                        self._restart.set()
                        return
        except Exception as exc:  # never let a watch error kill freshness silently
            errors.append(exc)
        finally:
            ready.set()

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            while not self._stop.is_set():
                batch, delay = self._take_batch()
                if batch:
                    self._fire(batch)
                elif delay > 0:
                    self._stop.wait(delay)
                else:
                    break

    def _take_batch(self) -> tuple[list[Path], float]:
        """(paths to report now, or [] and how long to wait; ([], 0) when nothing is pending)."""
        with self._lock:
            if not self._pending or self._last_pending_at is None or self._first_pending_at is None:
                return [], 0.0
            now = time.monotonic()
            quiet_left = self.debounce_s - (now - self._last_pending_at)
            cap_left = self.debounce_s * _MAX_WAIT_FACTOR - (now - self._first_pending_at)
            if quiet_left > 0 and cap_left > 0:
                return [], min(quiet_left, cap_left)
            batch = sorted(self._pending)
            self._pending.clear()
            self._first_pending_at = self._last_pending_at = None
            return batch, 0.0

    def _fire(self, batch: list[Path]) -> None:
        self.stats.callbacks += 1
        self.stats.last_callback_at = time.time()
        try:
            self.on_change(batch)
        except Exception:
            self.stats.errors += 1
            log.exception("mdrecall watch callback failed; the watcher keeps running")


# ---------------------------------------------------------------------------------------------
# Manager integration


SyncReporter = Callable[[list[Path], Any, float], None]


def sync_on_change(manager: Any, tracker: SessionDeltaTracker | None = None, report: SyncReporter | None = None) -> ChangeCallback:
    """The callback that keeps ``manager`` fresh: mark the paths dirty, sync, refresh delta state.

    Runs on the watcher's dispatch thread, so syncs triggered by the watcher never overlap each other;
    events arriving during a sync are batched into the next one.
    """

    def on_change(paths: list[Path]) -> None:
        manager.mark_dirty([_display_path(manager.workspace, p) for p in paths])
        started = time.monotonic()
        result = manager.sync()
        if tracker is not None and "sessions" in manager.config.sources:
            from mdrecall.transcripts import list_transcripts

            # The sync reconciled every transcript, including appends below the thresholds.
            tracker.prime(p for _, p in list_transcripts(manager.workspace, manager.config.sessions.dir))
        if report is not None:
            report(paths, result, time.monotonic() - started)

    return on_change


def attach_watcher(
    manager: Any,
    *,
    debounce_ms: int | None = None,
    force_polling: bool | None = None,
    report: SyncReporter | None = None,
) -> MemoryWatcher:
    """Start a watcher that syncs ``manager`` after changes; the caller stops it (``watcher.stop()``)."""
    tracker = SessionDeltaTracker.from_config(manager.config)
    watcher = MemoryWatcher(
        manager.workspace,
        manager.config,
        sync_on_change(manager, tracker, report),
        debounce_ms=debounce_ms,
        session_tracker=tracker,
        force_polling=force_polling,
    )
    return watcher.start()


def _display_path(workspace: Path, path: Path) -> str:
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# CLI: mdrecall watch


def register_cli(subparsers: "argparse._SubParsersAction[Any]") -> None:
    from mdrecall.cli import _add_common

    parser = subparsers.add_parser(
        "watch",
        help="keep the index fresh: sync now, then re-sync whenever memory files change (Ctrl-C to stop)",
    )
    _add_common(parser)
    parser.add_argument("--debounce-ms", type=int, default=None, help="quiet period before a sync (default 1500)")
    parser.add_argument(
        "--polling", action="store_true", help="poll the filesystem instead of OS events (network drives, WSL)"
    )
    parser.set_defaults(func=run_watch_command)


def _format_report(result: Any) -> str:
    names = ("files_indexed", "files_removed", "files_unchanged", "files_skipped", "chunks_written")
    parts = [f"{name.split('_', 1)[1] if name.startswith('files') else 'chunks'} {getattr(result, name)}"
             for name in names if hasattr(result, name)]
    if getattr(result, "full_rebuild", False):
        parts.append(f"full rebuild ({getattr(result, 'rebuild_reason', None)})")
    elif getattr(result, "rebuild_reason", None):
        parts.append(str(result.rebuild_reason))
    return ", ".join(parts) if parts else str(result)


def run_watch_command(args: "argparse.Namespace") -> int:
    from mdrecall.cli import open_from_args

    def stamp() -> str:
        return time.strftime("%H:%M:%S")

    def report(paths: list[Path], result: Any, seconds: float) -> None:
        shown = ", ".join(_display_path(manager.workspace, p) for p in paths[:3])
        more = f" (+{len(paths) - 3} more)" if len(paths) > 3 else ""
        print(f"[{stamp()}] sync after {len(paths)} change(s) [{shown}{more}]: {_format_report(result)} ({seconds:.2f}s)",
              flush=True)

    with open_from_args(args) as manager:
        started = time.monotonic()
        result = manager.sync()
        print(f"[{stamp()}] initial sync: {_format_report(result)} ({time.monotonic() - started:.2f}s)", flush=True)
        watcher = attach_watcher(
            manager, debounce_ms=args.debounce_ms, force_polling=True if args.polling else None, report=report
        )
        print(f"watching {', '.join(watcher.stats.roots) or '(nothing yet)'}; Ctrl-C to stop", flush=True)
        try:
            while watcher.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("stopped", flush=True)
        finally:
            watcher.stop()
    return 0
