"""``mdrecall mcp``: serve the memory tools to MCP clients."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from mdrecall.cli.options import parse_overrides, workspace_options
from mdrecall.http_guard import TOKEN_ENV
from mdrecall.mcp import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT


@click.command("mcp")
@workspace_options
@click.option("--http", is_flag=True, help="serve streamable HTTP instead of stdio")
@click.option("--host", default=None, help=f"interface to bind with --http (default {DEFAULT_HOST})")
@click.option("--port", type=int, default=None, help=f"port for --http (default {DEFAULT_PORT})")
@click.option("--path", default=None, help=f"URL path of the MCP endpoint (default {DEFAULT_PATH})")
@click.option("--token", default=None, help=f"require 'Authorization: Bearer TOKEN' on HTTP (or set {TOKEN_ENV})")
@click.option("--session-key", envvar="MDRECALL_SESSION_KEY", default=None, help="session key of the requester (transcript visibility; or set MDRECALL_SESSION_KEY)")
@click.option("--allow-host", multiple=True, metavar="NAME", help="extra Host name accepted over HTTP (repeatable)")
@click.option("--allow-origin", multiple=True, metavar="ORIGIN",
              help="extra browser Origin accepted over HTTP, e.g. https://app.example (repeatable)")  # fmt: skip
@click.option("--allow-unauthenticated", is_flag=True, help="allow binding a non-loopback address without --token")
@click.option("--no-watch", is_flag=True, help="do not watch files (sync.watch: false; searches still sync)")
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
) -> int:
    """Serve memory_search / memory_get to MCP clients (stdio by default, --http for streamable HTTP).

    Over stdio the MCP client starts this command; with --http it listens on 127.0.0.1:8765/mcp.
    """
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
        )
    )
