"""``mdrecall mcp``: the memory tools over the Model Context Protocol (official ``mcp`` SDK).

A thin shell over :mod:`mdrecall.agent`: tools ``memory_search``, ``memory_get``,
``memory_status`` and ``memory_write``, plus the tools plugins register for the configured backend
(``register_tools``; LanceDB: ``memory_store``, ``memory_recall``, ``memory_forget``), whose
``read_only``/``destructive`` flags become the tool annotations; with ``read_only``, only the
read-only tools. Prompts ``memory_recall`` (the system-prompt section), ``memory_flush`` (today's
flush prompts) and ``relevant_memories`` (a ``<relevant-memories>`` block for a query); the Memory
Recall section is also sent as the server's ``instructions``.

Transports:

- stdio (default): the client starts ``mdrecall mcp`` itself; nothing but protocol goes to stdout.
- streamable HTTP (``http=True``): bound to 127.0.0.1 by default, behind :mod:`mdrecall.http_guard`
  (Host, Origin, bearer token).

The server is long-lived: it opens the manager once (model loaded and kept warm), syncs and warms the
model up in the background at start, and the manager's own watcher (``sync.watch``) re-syncs on file
changes; searches also sync when stale.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdrecall.agent.flush import build_flush_plan
from mdrecall.agent.plugin import MemoryCapability, create_memory_capability
from mdrecall.agent.registry import plugin_tools_for
from mdrecall.agent.specs import MEMORY_GET, MEMORY_SEARCH, MEMORY_STATUS, MEMORY_WRITE
from mdrecall.config import load_config
from mdrecall.errors import MdrecallError, SyncInterrupted
from mdrecall.heap import HeapTrimmer
from mdrecall.http_guard import TOKEN_ENV, HttpSecurity, RequestGuard, check_can_listen
from mdrecall.mcp import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT

log = logging.getLogger("mdrecall.mcp")

SERVER_NAME = "mdrecall"
META_SESSION_KEY = "mdrecall/sessionKey"


def _require_mcp() -> None:
    from mdrecall.extras import install_hint

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MdrecallError(
            f"the MCP server needs the 'mcp' package: {install_hint('mcp')}"
        ) from None


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


def build_server(capability: MemoryCapability, *, session_key: str | None = None,
                 trimmer: HeapTrimmer | None = None) -> Any:  # fmt: skip
    """The low-level MCP ``Server`` exposing the capability's tools and prompts. ``trimmer``: the C
    heap's free pages go back to the system after a request when it says so (see mdrecall.heap);
    None: a new one, every minute."""
    _require_mcp()
    import asyncio

    import mcp_types as types
    from mcp.server.lowlevel import Server

    heap = trimmer if trimmer is not None else HeapTrimmer()

    async def after_request() -> None:
        # Hours of requests on many threads leave holes in glibc's heaps that free() keeps
        # resident (issue 28's soak: +35 MiB/h with the in-use heap flat); off the event loop.
        if heap.due():
            await asyncio.to_thread(heap.trim)

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
                        read_only_hint=spec.read_only,
                        destructive_hint=spec.destructive,  # memory_write only appends; memory_forget deletes
                        idempotent_hint=spec.read_only,
                        open_world_hint=False,
                    ),
                )
                for spec in tool_specs
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        key = _session_key_for(session_key, ctx.meta)
        result = await capability.acall_tool(params.name, params.arguments or {}, session_key=key)
        await after_request()
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
            await after_request()
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
    #: False: no file watcher (``sync.watch: false``); None: as configured.
    watch: bool | None = None
    #: True: no ``memory_write`` (clients can search and read, not write).
    read_only: bool = False


def served_tools(backend: str, *, read_only: bool = False) -> tuple[str, ...]:
    """The tools ``mdrecall mcp`` offers: the standard ones, ``memory_write``, and the backend's plugin
    tools (LanceDB: memory_store, memory_recall, memory_forget); ``read_only``: those that change nothing."""
    tools = (MEMORY_SEARCH, MEMORY_GET, MEMORY_STATUS) + (() if read_only else (MEMORY_WRITE,))
    return tools + tuple(t.spec.name for t in plugin_tools_for(backend) if t.spec.read_only or not read_only)


def warm_up(capability: MemoryCapability) -> threading.Thread:
    """Open the manager, sync and load the embedding model in the background, so the first tool call
    does not pay for them. Failures are logged, never raised: the tools report them themselves."""

    def run() -> None:
        try:
            manager = capability.runtime.manager()
            log.info("initial sync: %s", manager.sync().to_dict())
            log.info("embedding provider: %s", manager.probe_embedding_availability().to_dict())
        except SyncInterrupted as exc:  # the server is closing: what was indexed is kept
            log.info("initial sync stopped: %s", exc)
        except Exception as exc:  # keep serving; memory_search will explain
            log.warning("memory warm-up failed: %s: %s", type(exc).__name__, exc)

    thread = threading.Thread(target=run, name="mdrecall-warm-up", daemon=True)
    thread.start()
    return thread


def serve(options: ServeOptions) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP)."""
    _require_mcp()
    import anyio

    workspace = options.workspace.expanduser()
    if not workspace.is_dir():
        raise MdrecallError(f"workspace {workspace} is not a directory")
    overrides = dict(options.overrides)
    if options.watch is False:
        overrides["sync"] = {**dict(overrides.get("sync") or {}), "watch": False}
    tools = served_tools(load_config(workspace, overrides or None).backend, read_only=options.read_only)
    capability = create_memory_capability(workspace, overrides or None, tools=tools)
    try:
        settings = capability.runtime.config.mcp
        session_key = options.session_key or settings.sessionKey
        if options.http:
            host = options.host or settings.host or DEFAULT_HOST
            port = int(options.port if options.port is not None else settings.port or DEFAULT_PORT)
            path = options.path or settings.path or DEFAULT_PATH
            # Checked before anything loads: a refused binding must not cost a model start-up.
            security = HttpSecurity.for_binding(
                host,
                port,
                token=options.token or os.environ.get(TOKEN_ENV) or None,
                extra_hosts=[*settings.allowedHosts, *options.allow_hosts],
                extra_origins=[*settings.allowedOrigins, *options.allow_origins],
                allow_unauthenticated=options.allow_unauthenticated,
            )
            check_can_listen(host, port, "mdrecall mcp --http")
            app = build_http_app(capability, security, session_key=session_key, path=path)
        else:
            server = build_server(capability, session_key=session_key)
    except BaseException:
        capability.close()
        raise

    warm = warm_up(capability)
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
        try:
            uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).run()
        except SystemExit as exc:  # uvicorn's own start-up failure, already logged by it
            raise MdrecallError(f"the MCP server could not start (exit {exc.code})") from None
        return 0
    finally:
        # Closing stops a first index still running at its next file (every finished file is
        # kept), so a client that exits, or Ctrl-C, does not wait for the whole index.
        capability.close()
        warm.join(timeout=5)
