"""``mdrecall hook recall|flush|capture``: what a host runs around each turn (:mod:`mdrecall.hosts.hooks`).

These commands always exit 0, print nothing on failure and log why (``<MDRECALL_HOME>/logs/hooks.log``):
a hook must never block the agent. Even a mistyped option in the host's settings is logged, not a
usage error (Claude Code reads exit code 2 from a UserPromptSubmit hook as "erase this prompt").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click


class _FailOpenCommand(click.Command):
    """A hook command: a usage error is logged and ends it with exit 0, never exit 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes args
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            _fail_open(ctx, self.name or "hook", given, exc)
            raise  # unreachable: ctx.exit raises


class _FailOpenGroup(click.Group):
    """``mdrecall hook``: a missing or mistyped subcommand is logged and exits 0 too (with the help
    on stderr, for a person at a terminal)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            _fail_open(ctx, "hook", given, exc)
            raise

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        given = list(args)
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            _fail_open(ctx, "hook", given, exc)
            raise


def _fail_open(ctx: click.Context, name: str, given: list[str], exc: click.ClickException) -> None:
    from mdrecall.hosts.hooks import log_line

    bare = isinstance(exc, click.exceptions.NoArgsIsHelpError)
    why = "no subcommand (recall, capture or flush)" if bare else exc.format_message()
    log_line(name, "?", f"bad hook command line {' '.join(given)!r}: {why}")
    if bare:
        click.echo(ctx.get_help(), err=True)
    ctx.exit(0)


def _common(func: Any) -> Any:
    for decorator in reversed([
        click.option("-w", "--workspace", default=lambda: os.environ.get("MDRECALL_WORKSPACE", "."),
                     show_default="$MDRECALL_WORKSPACE or the current directory", help="the memory workspace"),
        click.option("-c", "--config", "overrides", multiple=True, metavar="KEY=VALUE", help="override a config key (repeatable)"),
        click.option("--host", type=click.Choice(["claude-code", "codex", "generic"]), default="claude-code", show_default=True,
                     help="whose hook input to read (generic: {\"prompt\"} or {\"messages\"} JSON, or plain text)"),
        click.option("--session-key", default=None, metavar="KEY",
                     help="whose transcripts are visible (default: claude-code / codex, the host's own logs)"),
    ]):  # fmt: skip
        func = decorator(func)
    return func


def _run(kind: str, workspace: str, overrides: tuple[str, ...], host: str, session_key: str | None, timeout: float,
         payload: str | None = None) -> int:  # fmt: skip
    from mdrecall.hosts.hooks import run

    def load() -> Any:
        from mdrecall.cli.options import load_cli_config

        path = Path(workspace).expanduser()
        if not path.is_dir():
            from mdrecall.hosts.hooks import Skip

            raise Skip(f"workspace {path} is not a directory")
        return load_cli_config(workspace, overrides)

    def opener(root: Path, config: Any) -> Any:
        from mdrecall.backends import open_manager

        return open_manager(root, config)

    def write(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    text = payload if payload is not None else ("" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read())
    return run(kind, host, text, Path(workspace).expanduser().resolve(), load, opener, session_key=session_key,
               timeout=timeout, write=write)  # fmt: skip


@click.group("hook", cls=_FailOpenGroup)
def hook() -> None:
    """Commands for a host's hooks (`mdrecall connect` installs them): they read the host's hook JSON
    on stdin, always exit 0 and log failures to <MDRECALL_HOME>/logs/hooks.log."""


@hook.command("recall", cls=_FailOpenCommand)
@_common
@click.option("--timeout", type=float, default=6.0, show_default=True, help="seconds before giving up (printing nothing)")
def recall(workspace: str, overrides: tuple[str, ...], host: str, session_key: str | None, timeout: float) -> int:
    """Before a prompt: print the <relevant-memories> block for it (nothing when nothing is relevant).
    On Claude Code's SessionStart: the note that memory tools are there."""
    return _run("recall", workspace, overrides, host, session_key, timeout)


@hook.command("capture", cls=_FailOpenCommand)
@_common
@click.option("--timeout", type=float, default=30.0, show_default=True, help="seconds before giving up")
@click.argument("payload", required=False)
def capture(workspace: str, overrides: tuple[str, ...], host: str, session_key: str | None, timeout: float,
            payload: str | None) -> int:  # fmt: skip
    """After a turn: append what it stated (preferences, decisions, facts; the LanceDB auto-capture
    rules) to today's note. PAYLOAD: the JSON Codex's notify passes (default: stdin)."""
    return _run("capture", workspace, overrides, host, session_key, timeout, payload)


@hook.command("flush", cls=_FailOpenCommand)
@_common
@click.option("--timeout", type=float, default=50.0, show_default=True, help="seconds before giving up")
def flush(workspace: str, overrides: tuple[str, ...], host: str, session_key: str | None, timeout: float) -> int:
    """Before compaction: save what the conversation stated and was not captured yet to the flush
    plan's note, and index the host's log when it is a source."""
    return _run("flush", workspace, overrides, host, session_key, timeout)
