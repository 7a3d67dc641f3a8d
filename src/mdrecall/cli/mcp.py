"""``mdrecall mcp``: serve the memory tools to MCP clients."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from mdrecall.cli.options import parse_overrides, workspace_options
from mdrecall.http_guard import TOKEN_ENV
from mdrecall.mcp import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT

#: MCP clients whose configuration ``--print-config`` writes, and where it goes.
CLIENTS = {
    "claude-desktop": "claude_desktop_config.json (Settings > Developer > Edit Config)",
    "claude-code": "a `claude mcp add` command (or .mcp.json in the project)",
    "cursor": "~/.cursor/mcp.json (or .cursor/mcp.json in the project)",
    "vscode": ".vscode/mcp.json in the project",
}


def client_config(client: str, workspace: Path, extra: list[str]) -> str:
    """The snippet for ``client`` that starts this very installation: the interpreter's absolute
    path with ``-m mdrecall``, so it works whether or not ``mdrecall`` is on the client's PATH, and
    the environment the server needs (``MDRECALL_HOME``), as ``mdrecall connect`` writes it."""
    import json
    import shlex

    from mdrecall.hosts.connect import DEFAULT_NAME, kept_env, mdrecall_command
    from mdrecall.hosts.targets import HOSTS, server_entry

    host = HOSTS[client]
    key = None if "--session-key" in extra else host.session_key
    entry = server_entry(host, mdrecall_command(), workspace, session_key=key, env=kept_env({}))
    entry["args"] += extra
    if client == "claude-code":
        env = [f"--env={k}={v}" for k, v in entry.get("env", {}).items()]
        return f"claude mcp add {DEFAULT_NAME} " + " ".join(shlex.quote(a) for a in [*env, "--", entry["command"], *entry["args"]])
    return json.dumps({host.servers_key[0]: {DEFAULT_NAME: entry}}, indent=2)


@click.command("mcp")
@workspace_options
@click.option("--http", is_flag=True, help="serve streamable HTTP instead of stdio")
@click.option("--host", default=None, help=f"interface to bind with --http (default {DEFAULT_HOST})")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help=f"port for --http (default {DEFAULT_PORT})")
@click.option("--path", default=None, help=f"URL path of the MCP endpoint (default {DEFAULT_PATH})")
@click.option("--token", default=None, help=f"require 'Authorization: Bearer TOKEN' on HTTP (or set {TOKEN_ENV})")
@click.option("--session-key", envvar="MDRECALL_SESSION_KEY", default=None, help="session key of the requester (transcript visibility; or set MDRECALL_SESSION_KEY)")
@click.option("--allow-host", multiple=True, metavar="NAME", help="extra Host name accepted over HTTP (repeatable)")
@click.option("--allow-origin", multiple=True, metavar="ORIGIN",
              help="extra browser Origin accepted over HTTP, e.g. https://app.example (repeatable)")  # fmt: skip
@click.option("--allow-unauthenticated", is_flag=True, help="allow binding a non-loopback address without --token")
@click.option("--no-watch", is_flag=True, help="do not watch files (sync.watch: false; searches still sync)")
@click.option("--read-only", is_flag=True, help="no memory_write tool: clients can search and read memory, not write it")
@click.option("--print-config", "client", type=click.Choice(sorted(CLIENTS)), default=None,
              help="print the configuration snippet for an MCP client (absolute paths: works without mdrecall on PATH)")
def mcp(
    workspace: str,
    overrides: tuple[str, ...],
    http: bool,
    host: str | None,
    port: int | None,
    path: str | None,
    token: str | None,
    session_key: str | None,
    allow_host: tuple[str, ...],
    allow_origin: tuple[str, ...],
    allow_unauthenticated: bool,
    no_watch: bool,
    read_only: bool,
    client: str | None,
) -> int:
    """Serve the memory tools to MCP clients (stdio by default, --http for streamable HTTP).

    \b
    Tools: memory_search, memory_get, memory_status, memory_history,
    memory_write and memory_forget_lines (these two not with --read-only),
    and the backend's own (lancedb: memory_store, memory_recall, memory_forget).

    Over stdio the MCP client starts this command; with --http it listens on 127.0.0.1:8765/mcp.
    """
    if client is not None:
        extra = (["--read-only"] if read_only else []) + (["--no-watch"] if no_watch else [])
        if session_key:
            extra += ["--session-key", session_key]
        for item in overrides:
            extra += ["-c", item]
        click.echo(client_config(client, Path(workspace).expanduser().resolve(), extra))
        return 0
    from mdrecall.mcp.server import ServeOptions, serve

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mdrecall mcp: %(message)s")
    return serve(
        ServeOptions(
            workspace=Path(workspace),
            overrides=parse_overrides(overrides),
            http=http,
            host=host,
            port=port,
            path=path,
            token=token,
            session_key=session_key,
            allow_hosts=list(allow_host),
            allow_origins=list(allow_origin),
            allow_unauthenticated=allow_unauthenticated,
            watch=False if no_watch else None,
            read_only=read_only,
        )
    )
