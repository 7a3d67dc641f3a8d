"""``mdrecall mcp``: the memory tools over the Model Context Protocol (official ``mcp`` SDK).

A thin shell over :mod:`mdrecall.agent`: tools ``memory_search``, ``memory_get`` and
``memory_status``; prompts ``memory_recall`` (the system-prompt section), ``memory_flush`` (today's
flush prompts) and ``relevant_memories`` (a ``<relevant-memories>`` block for a query); the Memory
Recall section is also sent as the server's ``instructions``.

Transports:

- stdio (default): the client starts ``mdrecall mcp`` itself; nothing but protocol goes to stdout.
- streamable HTTP (``--http``): bound to 127.0.0.1 by default. Every request's ``Host`` must name this
  server and any ``Origin`` must be a loopback or explicitly allowed origin (DNS-rebinding defence);
  binding anywhere else requires a bearer token (``--token`` or ``MDRECALL_MCP_TOKEN``). The guard
  lives in :mod:`mdrecall.http_guard`.

The server is long-lived, so it opens the manager once (model loaded and kept warm), syncs at start
and, when ``watchfiles`` is installed, re-syncs on file changes; searches also sync when stale.

Session scoping: the server's session key (``--session-key`` or ``mcp.sessionKey``) identifies the
requester for session-transcript visibility and citations. Without one, a client may pass
``_meta: {"mdrecall/sessionKey": ...}`` on a tool call; the model itself can never choose it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall.agent.flush import build_flush_plan
from mdrecall.agent.plugin import MemoryCapability, create_memory_capability
from mdrecall.agent.tools import MEMORY_GET, MEMORY_SEARCH
from mdrecall.errors import ConfigError, MdrecallError
from mdrecall.http_guard import (  # noqa: F401  (re-exported: the guard used to live here)
    LOOPBACK_NAMES,
    TOKEN_ENV,
    HttpSecurity,
    RequestGuard,
    is_loopback_host,
    parse_origin,
    split_host_header,
)

if TYPE_CHECKING:
    import argparse

log = logging.getLogger("mdrecall.mcp")

SERVER_NAME = "mdrecall"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_PATH = "/mcp"
META_SESSION_KEY = "mdrecall/sessionKey"
_MCP_CONFIG_KEYS = frozenset({"sessionKey", "host", "port", "path", "allowedHosts", "allowedOrigins", "watch"})


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MdrecallError(
            "the MCP server needs the 'mcp' package: pip install 'mdrecall[mcp]'"
        ) from None


# --- keeping the index warm ------------------------------------------------------------------------


class WarmKeeper:
    """Opens the manager, syncs and loads the embedding model in the background; watches for changes.

    Failures are logged, never raised: the tools report an unavailable backend themselves.
    """

    def __init__(self, capability: MemoryCapability, *, watch: bool = True) -> None:
        self.capability = capability
        self.watch = watch
        self.ready = threading.Event()
        self.error: str | None = None
        self._watcher: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "WarmKeeper":
        self._thread = threading.Thread(target=self._run, name="mdrecall-warm", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            manager = self.capability.runtime.manager()
            report = manager.sync()
            log.info("initial sync: %s", report.to_dict() if hasattr(report, "to_dict") else report)
            probe = manager.probe_embedding_availability()  # loads the model now, not on the first query
            log.info("embedding provider: %s", probe.to_dict() if hasattr(probe, "to_dict") else probe)
            if self.watch and not self._stop.is_set():
                self._start_watcher(manager)
        except Exception as exc:  # keep serving; memory_search will explain
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("memory warm-up failed: %s", self.error)
        finally:
            self.ready.set()
        interval = getattr(self.capability.runtime.config.sync, "intervalMinutes", 0) or 0
        if interval > 0 and self.error is None:
            if getattr(self.capability.runtime.manager(), "interval_sync_running", False):
                interval = 0  # the manager runs interval syncs itself
        while interval > 0 and not self._stop.wait(interval * 60):
            try:
                self.capability.runtime.manager().sync()
            except Exception as exc:
                log.warning("periodic sync failed: %s", exc)

    def _start_watcher(self, manager: Any) -> None:
        if getattr(manager, "watcher", None) is not None:
            return  # sync.watch: the manager already runs its own watcher
        try:
            from mdrecall.watch import attach_watcher

            self._watcher = attach_watcher(manager)
        except ImportError as exc:
            log.info("file watching off (%s); searches still sync when files changed", exc)
        except Exception as exc:
            log.warning("file watcher could not start (%s); searches still sync when files changed", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._watcher is not None:
            try:
                self._watcher.stop()
            except Exception:
                pass


# --- the MCP server --------------------------------------------------------------------------------


def _session_key_for(default: str | None, meta: Mapping[str, Any] | None) -> str | None:
    # The server-level key wins: a client cannot widen a scope the operator pinned.
    if default is not None:
        return default
    if meta and isinstance(meta.get(META_SESSION_KEY), str) and meta[META_SESSION_KEY].strip():
        return meta[META_SESSION_KEY].strip()
    return None


def _is_tool_error(name: str, result: Mapping[str, Any]) -> bool:
    # A disabled search is a normal answer to relay to the user, not a failed call.
    return "error" in result and not result.get("disabled")


def build_server(capability: MemoryCapability, *, session_key: str | None = None) -> Any:
    """The low-level MCP ``Server`` exposing the capability's tools and prompts."""
    _require_mcp()
    import mcp_types as types
    from mcp.server.lowlevel import Server

    section = capability.system_prompt_section([MEMORY_SEARCH, MEMORY_GET])
    tool_specs = capability.tools.specs()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=spec.description,
                    input_schema=spec.input_schema,
                    annotations=types.ToolAnnotations(
                        title=spec.name.replace("_", " "),
                        read_only_hint=True,
                        destructive_hint=False,
                        idempotent_hint=True,
                        open_world_hint=False,
                    ),
                )
                for spec in tool_specs
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        key = _session_key_for(session_key, ctx.meta)
        result = await capability.acall_tool(params.name, params.arguments or {}, session_key=key)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error=_is_tool_error(params.name, result),
        )

    prompts = [
        types.Prompt(
            name="memory_recall",
            description="The Memory Recall system-prompt section: when to search memory and how to cite it.",
            arguments=[
                types.PromptArgument(
                    name="citations", description="auto (default), on or off", required=False
                ),
                types.PromptArgument(
                    name="tools",
                    description="comma-separated memory tools the agent has (default: memory_search,memory_get)",
                    required=False,
                ),
            ],
        ),
        types.Prompt(
            name="memory_flush",
            description="Pre-compaction memory flush: system and user prompts targeting today's memory/YYYY-MM-DD.md.",
            arguments=[types.PromptArgument(name="timezone", description="IANA time zone for the date", required=False)],
        ),
        types.Prompt(
            name="relevant_memories",
            description="Search memory and return a <relevant-memories> block (escaped, untrusted) to paste as context.",
            arguments=[types.PromptArgument(name="query", description="what the conversation is about", required=True)],
        ),
    ]

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult(prompts=prompts)

    def _text_message(text: str) -> Any:
        return types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))

    async def get_prompt(ctx: Any, params: Any) -> Any:
        import asyncio

        args = dict(params.arguments or {})
        if params.name == "memory_recall":
            mode = args.get("citations") or None
            if mode not in (None, "auto", "on", "off"):
                raise ValueError("citations must be auto, on or off")
            tools = [t.strip() for t in args["tools"].split(",")] if args.get("tools") else [MEMORY_SEARCH, MEMORY_GET]
            text = capability.system_prompt_section(tools, mode)
            return types.GetPromptResult(description="Memory Recall section", messages=[_text_message(text)])
        if params.name == "memory_flush":
            settings = capability.flush_settings
            if args.get("timezone"):
                from dataclasses import replace

                settings = replace(settings, timezone=args["timezone"])
            plan = build_flush_plan(settings)
            if plan is None:
                return types.GetPromptResult(description="memory flush is disabled", messages=[])
            return types.GetPromptResult(
                description=f"Memory flush into {plan.relative_path}",
                # MCP prompts have no system role: the system prompt comes first, then the user turn.
                messages=[_text_message(plan.system_prompt), _text_message(plan.prompt)],
            )
        if params.name == "relevant_memories":
            query = (args.get("query") or "").strip()
            if not query:
                raise ValueError("query is required")
            key = _session_key_for(session_key, ctx.meta)
            block = await asyncio.to_thread(capability.recall, query, session_key=key, max_results=5)
            return types.GetPromptResult(
                description="Relevant memories", messages=[_text_message(block or "(no relevant memories found)")]
            )
        raise ValueError(f"unknown prompt {params.name!r}")

    return Server(
        SERVER_NAME,
        version=_version(),
        title="mdrecall memory",
        description="Long-term memory for agents: search and read Markdown memory files.",
        instructions=section or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _version() -> str:
    try:
        from mdrecall import __version__

        return __version__
    except Exception:
        return "0"


# --- HTTP ----------------------------------------------------------------------------------------


def build_http_app(
    capability: MemoryCapability,
    security: HttpSecurity,
    *,
    session_key: str | None = None,
    path: str = DEFAULT_PATH,
) -> Any:
    """The streamable-HTTP ASGI app, wrapped in the Host/Origin/token guard."""
    _require_mcp()
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(capability, session_key=session_key)
    # The guard does the DNS-rebinding checks (stricter: exact port, malformed headers rejected);
    # the SDK's own copy would only repeat them with looser rules.
    app = server.streamable_http_app(
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return RequestGuard(app, security)


# --- running ---------------------------------------------------------------------------------------


@dataclass
class ServeOptions:
    workspace: Path
    overrides: dict[str, Any] = field(default_factory=dict)
    http: bool = False
    host: str | None = None
    port: int | None = None
    path: str | None = None
    token: str | None = None
    session_key: str | None = None
    allow_hosts: list[str] = field(default_factory=list)
    allow_origins: list[str] = field(default_factory=list)
    allow_unauthenticated: bool = False
    watch: bool | None = None


def _mcp_settings(capability: MemoryCapability) -> dict[str, Any]:
    settings = dict(capability.runtime.config.mcp)
    unknown = sorted(set(settings) - _MCP_CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown mcp config key(s): {', '.join(unknown)}; known: {', '.join(sorted(_MCP_CONFIG_KEYS))}")
    return settings


def serve(options: ServeOptions) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP)."""
    _require_mcp()
    import anyio

    workspace = options.workspace.expanduser()
    if not workspace.is_dir():
        raise MdrecallError(f"workspace {workspace} is not a directory")
    capability = create_memory_capability(workspace, options.overrides or None)
    try:
        settings = _mcp_settings(capability)
        session_key = options.session_key or settings.get("sessionKey")
        watch = options.watch if options.watch is not None else settings.get("watch", True) is not False
        if not watch:
            # --no-watch / mcp.watch: false also keeps the manager's own watcher (sync.watch) off.
            overrides = dict(capability.runtime.overrides or {})
            overrides["sync"] = {**dict(overrides.get("sync") or {}), "watch": False}
            capability.runtime.overrides = overrides
        if options.http:
            host = options.host or settings.get("host") or DEFAULT_HOST
            port = int(options.port if options.port is not None else settings.get("port", DEFAULT_PORT))
            path = options.path or settings.get("path") or DEFAULT_PATH
            # Checked before anything loads: a refused binding must not cost a model start-up.
            security = HttpSecurity.for_binding(
                host,
                port,
                token=options.token or os.environ.get(TOKEN_ENV) or None,
                extra_hosts=[*settings.get("allowedHosts", []), *options.allow_hosts],
                extra_origins=[*settings.get("allowedOrigins", []), *options.allow_origins],
                allow_unauthenticated=options.allow_unauthenticated,
            )
            app = build_http_app(capability, security, session_key=session_key, path=path)
        else:
            server = build_server(capability, session_key=session_key)
    except BaseException:
        capability.close()
        raise

    keeper = WarmKeeper(capability, watch=watch).start()
    try:
        if not options.http:

            async def run_stdio() -> None:
                from mcp.server.stdio import stdio_server

                async with stdio_server() as (read_stream, write_stream):
                    await server.run(read_stream, write_stream, server.create_initialization_options())

            anyio.run(run_stdio)
            return 0

        import uvicorn

        shown = f"[{host}]" if ":" in host else host
        print(
            f"mdrecall MCP server for {workspace} on http://{shown}:{port}{path}"
            + (" (bearer token required)" if security.token else ""),
            file=sys.stderr,
            flush=True,
        )
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).run()
        return 0
    finally:
        keeper.stop()
        capability.close()


def register_cli(subparsers: "argparse._SubParsersAction[Any]") -> None:
    from mdrecall.cli import _add_common

    parser = subparsers.add_parser(
        "mcp",
        help="serve memory_search / memory_get to MCP clients (stdio by default, --http for streamable HTTP)",
        description=(
            "Serve the workspace's memory over the Model Context Protocol. Over stdio (default) the MCP "
            "client starts this command; with --http it listens on 127.0.0.1:8765/mcp."
        ),
    )
    _add_common(parser)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default=None, help=f"interface to bind with --http (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=None, help=f"port for --http (default {DEFAULT_PORT})")
    parser.add_argument("--path", default=None, help=f"URL path of the MCP endpoint (default {DEFAULT_PATH})")
    parser.add_argument(
        "--token", default=None, help=f"require 'Authorization: Bearer TOKEN' on HTTP (or set {TOKEN_ENV})"
    )
    parser.add_argument("--session-key", default=None, help="session key of the requester (transcript visibility)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="extra Host name accepted over HTTP (repeatable)")  # fmt: skip
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="extra browser Origin accepted over HTTP, e.g. https://app.example (repeatable)")  # fmt: skip
    parser.add_argument("--allow-unauthenticated", action="store_true",
                        help="allow binding a non-loopback address without --token")  # fmt: skip
    parser.add_argument("--no-watch", action="store_true", help="do not watch files (searches still sync)")
    parser.set_defaults(func=run_mcp_command)


def run_mcp_command(args: "argparse.Namespace") -> int:
    from mdrecall.cli import parse_overrides

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mdrecall mcp: %(message)s")
    return serve(
        ServeOptions(
            workspace=Path(args.workspace),
            overrides=parse_overrides(args.config),
            http=args.http,
            host=args.host,
            port=args.port,
            path=args.path,
            token=args.token,
            session_key=args.session_key,
            allow_hosts=list(args.allow_host),
            allow_origins=list(args.allow_origin),
            allow_unauthenticated=args.allow_unauthenticated,
            watch=False if args.no_watch else None,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mdrecall.mcp_server`` = ``mdrecall mcp``."""
    from mdrecall.cli import main as cli_main

    return cli_main(["mcp", *(argv if argv is not None else sys.argv[1:])])


if __name__ == "__main__":
    raise SystemExit(main())
