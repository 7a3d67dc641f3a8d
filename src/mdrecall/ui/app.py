"""The inspector's ASGI app and how ``mdrecall ui`` runs it.

A thin shell like the CLI and the MCP server: one manager opened for the workspace (its watcher keeps
the index fresh while the page is open), pages rendered on the server from what the core returns. The
manager is opened with recall tracking off: the inspector observes, and a person's searches and
reads are not the agent's recalls.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mdrecall.errors import MdrecallError
from mdrecall.http_guard import HttpSecurity, RequestGuard, check_can_listen

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8777
TOKEN_ENV = "MDRECALL_UI_TOKEN"


def require_ui() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from mdrecall.extras import install_hint

        raise MdrecallError(f"the web inspector needs Starlette, uvicorn and Jinja2: {install_hint('ui')}") from None


def build_app(manager: Any, security: HttpSecurity, *, sessions: Any = None, errors: Any = None) -> Any:
    """The guarded ASGI app over an open manager (which the caller closes)."""
    require_ui()
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from mdrecall.ui import browse, dreaming, health, longterm, search
    from mdrecall.ui.security import BrowserGuard, SecurityHeaders, Sessions
    from mdrecall.ui.state import RecentErrors, UiState, make_env, redirect

    recent = errors if errors is not None else RecentErrors()
    ui = UiState(manager, Path(manager.workspace), manager.config, make_env(), recent, token_required=bool(security.token),
                 has_longterm=longterm.longterm_entries(manager) is not None)

    async def home(request: Any) -> Any:
        return redirect("/search")

    routes = [
        Route("/", home),
        Route("/search", search.search_page),
        Route("/browse", browse.browse_page),
        Route("/browse/file", browse.file_page),
        Route("/browse/transcript", browse.transcript_page),
        Route("/browse/skipped", browse.skipped_page),
        Route("/health", health.health_page),
        Route("/health/sync", health.sync_now, methods=["POST"]),
        Route("/dreaming", dreaming.dreaming_page),
        Route("/dreaming/queue", dreaming.queue_action, methods=["POST"]),
        Route("/dreaming/apply", dreaming.apply_approved, methods=["POST"]),
        Route("/dreaming/stage", dreaming.stage_candidates, methods=["POST"]),
        Route("/longterm", longterm.longterm_page),
        Route("/longterm/forget", longterm.forget_entry, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("mdrecall.ui", "static")]), name="static"),
    ]

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        logging.getLogger("mdrecall").addHandler(recent)
        try:
            yield
        finally:
            ui.close()
            logging.getLogger("mdrecall").removeHandler(recent)

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.ui = ui
    guarded = BrowserGuard(app, security, sessions if sessions is not None else Sessions())
    # The Host/Origin checks of every mdrecall endpoint; the token is BrowserGuard's (cookie or bearer).
    return SecurityHeaders(RequestGuard(guarded, replace(security, token=None)))


@dataclass
class UiOptions:
    workspace: Path
    #: A ready MemoryConfig (``mdrecall ui`` builds it as every command does), or None: the
    #: workspace's config with ``overrides``.
    config: Any = None
    overrides: dict[str, Any] = field(default_factory=dict)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    #: None: a random one; "": none (loopback only).
    token: str | None = None
    allow_hosts: list[str] = field(default_factory=list)
    open_browser: bool = False


def inspector_config(workspace: Path, config: Any = None) -> Any:
    """``config`` (a MemoryConfig, or overrides over the workspace's config) with recall tracking off:
    looking is not recalling."""
    from mdrecall.config import MemoryConfig, load_config

    if not isinstance(config, MemoryConfig):
        config = load_config(workspace, config or None)
    return config.model_copy(update={"dreaming": config.dreaming.model_copy(update={"tracking": False})})


def serve(options: UiOptions) -> int:
    """Open the workspace's memory and serve the inspector until interrupted."""
    require_ui()
    import uvicorn

    from mdrecall.backends import open_manager

    workspace = options.workspace.expanduser()
    if not workspace.is_dir():
        raise MdrecallError(f"workspace {workspace} is not a directory")
    token = options.token if options.token is not None else (os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24))
    # Checked before the manager opens: a refused binding must not cost a model start-up.
    security = HttpSecurity.for_binding(options.host, options.port, token=token or None, extra_hosts=options.allow_hosts)
    check_can_listen(options.host, options.port, "mdrecall ui")
    manager = open_manager(workspace, inspector_config(workspace, options.config or options.overrides))
    try:
        app = build_app(manager, security)
        shown = f"[{options.host}]" if ":" in options.host else options.host
        url = f"http://{shown}:{options.port}/"
        if token:
            url += f"?token={token}"
        print(f"mdrecall inspector for {workspace}: {url}", file=sys.stderr, flush=True)
        if options.open_browser:
            import webbrowser

            webbrowser.open(url)
        try:
            uvicorn.Server(uvicorn.Config(app, host=options.host, port=options.port, log_level="warning", lifespan="on")).run()
        except SystemExit as exc:  # uvicorn's own start-up failure, already logged by it
            raise MdrecallError(f"the web inspector could not start (exit {exc.code})") from None
        return 0
    finally:
        manager.close()
