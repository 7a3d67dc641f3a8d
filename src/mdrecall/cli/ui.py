"""``mdrecall ui``: the local web inspector."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from mdrecall.cli.options import load_cli_config, parse_overrides, workspace_options, workspace_path


def inspector_config_for(workspace: str, overrides: tuple[str, ...]) -> object:
    """The config as every command reads it: ``-c`` overrides never rewrite the shared index (a
    keyword-only override reads it as it is, another provider gets an index of its own). Unlike a
    one-shot command the inspector is long-lived, so the watcher stays as configured."""
    from mdrecall.config import load_config

    watch = load_config(workspace_path(workspace), parse_overrides(overrides)).sync.watch
    return load_cli_config(workspace, overrides, sync={"watch": watch})


@click.command("ui")
@workspace_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="interface to bind; anything but loopback needs a token")  # fmt: skip
@click.option("--port", type=click.IntRange(1, 65535), default=8777, show_default=True, help="port to listen on")
@click.option("--token", default=None,
              help="token the page asks for (default: $MDRECALL_UI_TOKEN or a random one, in the printed URL)")  # fmt: skip
@click.option("--no-token", is_flag=True, help="no token (loopback only): anyone on this machine can open the page")
@click.option("--allow-host", multiple=True, metavar="NAME", help="extra Host name accepted (repeatable)")
@click.option("--open", "open_browser", is_flag=True, help="open the page in the default browser")
def ui(
    workspace: str,
    overrides: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    no_token: bool,
    allow_host: tuple[str, ...],
    open_browser: bool,
) -> int:
    """Serve a local web page to search, browse and check this workspace's memory.

    It prints the URL to open, with a one-time ?token=... that signs the browser in.
    """
    from mdrecall.ui.app import UiOptions, serve

    if no_token and token:
        raise click.UsageError("--token and --no-token contradict each other")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mdrecall ui: %(message)s")
    return serve(
        UiOptions(
            workspace=Path(workspace),
            config=inspector_config_for(workspace, overrides),
            host=host,
            port=port,
            token="" if no_token else token,
            allow_hosts=list(allow_host),
            open_browser=open_browser,
        )
    )
