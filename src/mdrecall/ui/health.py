"""The Health page: is the index fresh, how does it search and why, what went wrong lately.

Everything comes from ``manager.status()`` (typed fields plus the backend's ``details``) and the
warnings mdrecall logged in this process. The fixes are ``mdrecall doctor``'s: :func:`doctor_findings`
is the seam — when :mod:`mdrecall.doctor` is installed (``diagnose(status, config=..., session_key=...)
-> list[Finding]``, from the newcomer work) its findings are shown as they are, computed from the
status this page already has; until then the page shows the status only and says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from mdrecall import plugins
from mdrecall.doctor import diagnose
from mdrecall.freshness.monitor import NOT_SYNCED
from mdrecall.types import Status
from mdrecall.ui.state import generic_fields, redirect, render, ui_state

log = logging.getLogger("mdrecall.ui")

#: details keys the page shows in its own sections; the rest are listed generically.
SHOWN_DETAILS = {
    "sourceCounts", "extraPaths", "requestedProvider", "providerSelection", "fts", "vector", "cache", "fallback",
    "providerError", "batch", "meta", "dirty", "pendingChanges", "rebuildNeeded", "migration", "recovered",
    "integrityCheck", "lastSync", "watcher", "intervalSync",
}


@dataclass(frozen=True)
class Verdict:
    fresh: bool
    headline: str
    reasons: list[str]


def freshness_verdict(status: Status) -> Verdict:
    """One sentence answering "is my index fresh?", and what makes it not."""
    f = status.freshness
    d = status.details
    reasons = []
    pending = d.get("pendingChanges") or {}
    if f.pending_changes:
        reasons.append(f"{f.pending_changes} file change(s) on disk not in the index yet")
    elif pending:
        reasons.append("files changed on disk since the last sync")
    if d.get("rebuildNeeded"):
        reasons.append(f"a rebuild is needed: {d['rebuildNeeded']}")
    if f.deferred_sessions:
        reasons.append(f"{f.deferred_sessions} growing transcript(s) wait for sync.sessions thresholds")
    if f.watcher == "failed":
        reasons.append("the file watcher failed: changes are seen only when a search re-checks the files")
    if status.last_error:
        reasons.append(f"the last sync failed: {status.last_error}")
    fresh = status.clean and not f.stale and not reasons
    checked = f.checked_at or "now"
    if fresh:
        head = f"Fresh: the index matches the {f.files_on_disk if f.files_on_disk is not None else status.files} file(s) on disk (checked {checked})."
    else:
        head = f"Not fresh (checked {checked})."
    return Verdict(fresh, head, reasons)


def index_size(status: Status) -> int | None:
    """Bytes on disk of the index file and its WAL, when the backend keeps it in one file."""
    if not status.location:
        return None
    base = Path(status.location)
    total = 0
    found = False
    for path in (base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")):
        try:
            total += path.stat().st_size
            found = True
        except OSError:
            continue
    return total if found else None


def doctor_findings(status: Status, config: Any) -> tuple[list[dict[str, Any]] | None, str]:
    """``(findings, note)``: :func:`mdrecall.doctor.diagnose` of ``status`` as dicts (``state``,
    ``severity``, ``message``, ``fix``), or None and why there are none."""
    try:
        # The environment check (is the MCP package installed) is not about this page.
        found = diagnose(status, config=config, environment=False)
    except Exception as exc:  # the page must render whatever doctor does
        log.warning("doctor failed: %s: %s", type(exc).__name__, exc)
        return None, f"mdrecall doctor failed: {type(exc).__name__}: {exc}"
    return [f.to_dict() for f in found], ""


def recent_errors(status: Status, logged: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    """``(where, message)`` of every error the status reports, then what this process logged."""
    d = status.details
    out = []
    if status.last_error:
        out.append(("last sync", status.last_error))
    watcher = d.get("watcher") or {}
    if isinstance(watcher, dict):
        if watcher.get("lastError"):
            out.append(("file watcher", str(watcher["lastError"])))
        if watcher.get("error"):
            out.append(("file watcher", str(watcher["error"])))
    if d.get("providerError"):
        out.append(("embedding provider", str(d["providerError"])))
    if d.get("recovered"):
        out.append(("index recovery", str(d["recovered"])))
    integrity = str(d.get("integrityCheck") or "")
    if integrity.startswith("failed"):
        out.append(("integrity check", integrity))
    for name, error in plugins.plugin_errors().items():
        out.append((f"plugin {name}", error))
    for warning in status.warnings:
        out.append(("status", warning))
    for stamp, level, logger, message in logged:
        out.append((f"{stamp} {level.lower()} ({logger})", message))
    return out


async def health_page(request: Request) -> Response:
    ui = ui_state(request)
    status = await ui.status()
    findings, doctor_note = await run_in_threadpool(doctor_findings, status, ui.config)
    details = status.details
    return render(
        request, "health.html", status=status, verdict=freshness_verdict(status), size=index_size(status),
        details=details, selection=details.get("providerSelection") or {}, findings=findings,
        doctor_note=doctor_note, errors=recent_errors(status, ui.errors.recent()),
        other_details=list(generic_fields(details, SHOWN_DETAILS)), status_dict=status.to_dict(),
    )


async def sync_now(request: Request) -> Response:
    ui = ui_state(request)
    try:
        report = await run_in_threadpool(ui.manager.sync)
    except Exception as exc:
        ui.flash(request, "error", f"Sync failed: {type(exc).__name__}: {exc}")
    else:
        if report.rebuild_reason in NOT_SYNCED:
            ui.flash(request, "error", f"Not synced: {report.rebuild_reason}.")
        else:
            ui.flash(request, "ok", f"Synced: {report.files_indexed} file(s) indexed, {report.files_removed} removed, "
                                    f"{report.files_unchanged} unchanged in {report.seconds:.2f} s.")
    return redirect("/health")
