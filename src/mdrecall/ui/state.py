"""What every page handler shares: the open manager, the templates, recent errors, flash messages,
and small request helpers (a page number, a form field)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from mdrecall.timefmt import shown
from mdrecall.types import Status

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager


class RecentErrors(logging.Handler):
    """The last warnings and errors mdrecall logged in this process, for the Health page."""

    def __init__(self, size: int = 50) -> None:
        super().__init__(level=logging.WARNING)
        self.records: deque[tuple[str, str, str, str]] = deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="seconds")
            self.records.append((stamp, record.levelname, record.name, record.getMessage()))
        except Exception:  # a log handler must never raise into the code that logged
            pass

    def recent(self) -> list[tuple[str, str, str, str]]:
        return list(reversed(self.records))


@dataclass
class UiState:
    manager: MemorySearchManager
    workspace: Path
    config: MemoryConfig
    env: Environment
    errors: RecentErrors
    token_required: bool = False
    #: The backend keeps long-term entries (the Long-term page is shown).
    has_longterm: bool = False
    started_at: float = field(default_factory=time.time)
    #: ``status()`` walks every file (about 0.2 s at 10k files): pages other than Health reuse a recent one.
    status_ttl: float = 15.0
    _status: tuple[float, Status] | None = None
    #: Managers answering in another mode than the open one's (see :meth:`keyword_searcher`).
    _alternates: dict[str, MemorySearchManager] = field(default_factory=dict)
    _alternates_lock: threading.Lock = field(default_factory=threading.Lock)
    _flash: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _flash_lock: threading.Lock = field(default_factory=threading.Lock)

    async def status(self) -> Status:
        """A fresh ``status()`` (the Health page)."""
        status: Status = await run_in_threadpool(self.manager.status)
        self._status = (time.monotonic(), status)
        return status

    async def cached_status(self) -> Status | None:
        """A ``status()`` at most ``status_ttl`` seconds old, or None when it cannot be had."""
        if self._status is not None and time.monotonic() - self._status[0] < self.status_ttl:
            return self._status[1]
        try:
            return await self.status()
        except Exception as exc:
            logging.getLogger("mdrecall.ui").warning("status() failed: %s: %s", type(exc).__name__, exc)
            return None

    def keyword_searcher(self) -> MemorySearchManager:
        """A manager answering keyword-only from the open manager's index, opened on first use.

        It reads the same index with ``provider: none`` and ``store.readOnly`` (what a one-shot
        ``-c provider=none`` does): it never writes, syncs or rebuilds it, so the shared index stays as
        the open manager keeps it; no second index is created.
        """
        from mdrecall.backends import open_manager

        with self._alternates_lock:
            found = self._alternates.get("keyword-only")
            if found is None:
                config = self.config
                store = config.store.model_copy(update={"path": str(self.manager.db_path), "readOnly": True})  # type: ignore[attr-defined]
                config = config.model_copy(update={
                    "provider": "none", "fallback": "none", "store": store,
                    "sync": config.sync.model_copy(update={"watch": False, "intervalMinutes": 0}),
                })
                found = self._alternates["keyword-only"] = open_manager(self.workspace, config)
            return found

    def close(self) -> None:
        with self._alternates_lock:
            for manager in self._alternates.values():
                manager.close()
            self._alternates.clear()

    def flash(self, request: Request, kind: str, text: str) -> None:
        sid = request.scope.get("state", {}).get("sid")
        if not sid:
            return
        with self._flash_lock:
            messages = self._flash.setdefault(sid, [])
            messages.append((kind, text))
            del messages[:-10]
            while len(self._flash) > 256:
                self._flash.pop(next(iter(self._flash)))

    def take_flash(self, request: Request) -> list[tuple[str, str]]:
        sid = request.scope.get("state", {}).get("sid")
        if not sid:
            return []
        with self._flash_lock:
            return self._flash.pop(sid, [])


def make_env() -> Environment:
    # Autoescape everything: memory text is untrusted and goes into every page.
    env = Environment(loader=PackageLoader("mdrecall.ui", "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = format_number
    env.filters["pretty"] = pretty_json
    env.filters["size"] = format_size
    env.filters["when"] = shown  # local time to the second, and how long ago (not raw ISO with microseconds)
    return env


def ui_state(request: Request) -> UiState:
    state: UiState = request.app.state.ui
    return state


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    ui = ui_state(request)
    html = ui.env.get_template(template).render(
        request=request,
        csrf=request.scope.get("state", {}).get("csrf", ""),
        nav=request.url.path,
        workspace=str(ui.workspace),
        backend=ui.manager.backend,
        has_longterm=ui.has_longterm,
        flashes=ui.take_flash(request),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def redirect(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def form(request: Request) -> Mapping[str, str]:
    """The url-encoded form BrowserGuard read and checked (CSRF) before the endpoint ran."""
    data: Mapping[str, str] = request.scope.get("state", {}).get("form") or {}
    return data


def int_param(request: Request, name: str, default: int, lo: int = 1, hi: int = 10**9) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        return default
    return max(lo, min(hi, value))


def format_number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.{digits}g}" if abs(value) < 10**-digits else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def format_size(value: Any) -> str:
    if not isinstance(value, int):
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def generic_fields(data: Mapping[str, Any], known: set[str]) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` of what a record carries beyond the fields a page shows by name, so fields added
    later (per-signal explanations from the retrieval work) appear without a change here."""
    for key in sorted(data):
        if key not in known:
            yield key, data[key]


def generic_value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return format_number(value)
