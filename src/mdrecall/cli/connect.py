"""``mdrecall connect HOST`` / ``mdrecall disconnect HOST``: the MCP server (and hooks) in a host's own
config file, merged in place (:mod:`mdrecall.hosts.connect`; docs/hosts/)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mdrecall.cli.options import echo_json, json_option

F = TypeVar("F", bound=Callable[..., Any])
HOST_NAMES = ["claude-code", "claude-desktop", "cursor", "vscode", "codex", "json", "toml"]


def _locating(func: F) -> F:
    """The options both commands share: which file, which entry."""
    for decorator in reversed([
        click.argument("host", type=click.Choice(HOST_NAMES), metavar="HOST"),
        click.option("--scope", type=click.Choice(["user", "project"]), default="user", show_default=True,
                     help="the user's own config, or the project's (in --project, default the current folder)"),
        click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="project folder for --scope project"),
        click.option("--file", "file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="edit this file instead of the host's own (required for json and toml)"),
        click.option("--settings-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Claude Code: the settings.json that holds the hooks (default: the scope's)"),
        click.option("--key", default=None, metavar="KEY[.KEY]",
                     help="where the servers live in the file (json: mcpServers, toml: mcp_servers)"),
        click.option("--name", default="mdrecall", show_default=True, help="the server's name in the host"),
        click.option("--no-hooks", is_flag=True, help="only the MCP server: leave hooks (Claude Code, Codex notify) alone"),
        click.option("--dry-run", is_flag=True, help="print the change as a diff; write nothing"),
        click.option("--force", is_flag=True, help="replace (or remove) an entry of that name that is not mdrecall's"),
        json_option,
    ]):  # fmt: skip
        func = decorator(func)
    return func


def _options(host_name: str, workspace: Path, scope: str, project: Path | None, file: Path | None,
             settings_file: Path | None, key: str | None, name: str, no_hooks: bool, force: bool, **extra: Any) -> Any:  # fmt: skip
    from mdrecall.hosts.connect import Options
    from mdrecall.hosts.targets import GENERIC, HOSTS

    host = HOSTS[host_name]
    if host_name in GENERIC and file is None:
        raise click.UsageError(f"'{host_name}' needs --file: the config file to add the server to")
    if scope == "project" and "project" not in host.scopes:
        raise click.UsageError(f"{host.title} has no project config: drop --scope project")
    if not name or any(c in name for c in "/.\"'") or name.strip() != name:
        raise click.UsageError(f"--name {name!r}: use letters, digits, '-' or '_'")
    keys = tuple(key.split(".")) if key else None
    if keys is not None and not all(keys):
        raise click.UsageError(f"--key {key!r}: empty part")
    return host, Options(workspace=workspace, name=name, scope=scope, project=project,  # type: ignore[arg-type]
                         file=file, settings_file=settings_file, key=keys, hooks=not no_hooks, force=force, **extra)  # fmt: skip


def _home(path: Path) -> str:
    text = str(path)
    home = os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


def _report(changes: list[Any], dry_run: bool, as_json: bool, done: str, host: Any) -> int:
    if as_json:
        echo_json({"host": host.name, "dryRun": dry_run, "files": [
            {"path": str(c.path), "what": c.what, "changed": c.changed, "created": c.before is None and c.changed,
             "diff": c.diff(), "backup": str(c.backup) if c.backup else None, "notes": c.notes} for c in changes]})  # fmt: skip
        return 0
    for change in changes:
        if dry_run and change.changed:
            click.echo(change.diff(), nl=False)
        elif not change.changed:
            click.echo(f"{_home(change.path)}: {change.what} already {done}; nothing to change")
        elif not dry_run:
            verb = "created" if change.before is None else "updated"
            click.echo(f"{verb} {_home(change.path)} ({change.what})" + (f"; backup: {_home(change.backup)}" if change.backup else ""))
        for note in change.notes:
            click.echo(f"note: {note}", err=True)
    return 0


def _apply(changes: list[Any], dry_run: bool) -> None:
    if dry_run:
        return
    for change in changes:
        if change.changed:
            change.write()


@click.command("connect")
@_locating
@click.option("-w", "--workspace", default=lambda: os.environ.get("MDRECALL_WORKSPACE", "."),
              show_default="$MDRECALL_WORKSPACE or the current directory", help="the memory workspace the host should use")  # fmt: skip
@click.option("--session-key", default=None, metavar="KEY",
              help="whose transcripts the host sees (default: claude-code / codex for those hosts, none for others)")  # fmt: skip
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE",
              help="one more environment variable for the server and hooks (MDRECALL_HOME is kept by itself)")  # fmt: skip
@click.option("--hook-timeout", type=click.IntRange(1, 60), default=6, show_default=True,
              help="seconds a recall hook may take before the prompt goes on without memories")  # fmt: skip
def connect(host: str, workspace: str, session_key: str | None, env: tuple[str, ...], hook_timeout: int,
            dry_run: bool, as_json: bool, **locating: Any) -> int:  # fmt: skip
    """Add mdrecall to HOST's config: claude-code, claude-desktop, cursor, vscode, codex, or any
    json/toml file (--file). Other servers and keys are left exactly as they are; the old file is
    kept as <file>.mdrecall.bak. Claude Code also gets the recall, flush and capture hooks; Codex CLI
    the capture hook (its notify program). Running it again changes nothing.
    """

    path = Path(workspace).expanduser()
    if not path.is_dir():
        raise click.BadParameter(f"workspace {path} is not a directory (create it with `mdrecall init`)", param_hint="'-w' / '--workspace'")
    path = path.resolve()
    if not (path / "MEMORY.md").exists() and not (path / "memory").is_dir() and not locating["force"]:
        raise click.BadParameter(f"{path} has no MEMORY.md or memory/: is it the memory workspace? "
                                 "(`mdrecall init -w` makes one; --force connects it anyway)", param_hint="'-w' / '--workspace'")  # fmt: skip
    pairs: dict[str, str] = {}
    for item in env:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"{item!r} must look like NAME=VALUE", param_hint="'--env'")
        pairs[name] = value
    target, options = _options(host, path, session_key=session_key, env=pairs, hook_timeout=hook_timeout, **locating)
    from mdrecall.hosts.connect import plan

    changes = plan(target, options, connect=True)
    _apply(changes, dry_run)
    _report(changes, dry_run, as_json, "connected", target)
    if not dry_run and not as_json and any(c.changed for c in changes) and target.after:
        click.echo(f"next: {target.after}")
    return 0


@click.command("disconnect")
@_locating
def disconnect(host: str, dry_run: bool, as_json: bool, **locating: Any) -> int:
    """Remove mdrecall's server (and its hooks) from HOST's config; nothing else is touched, and an
    entry of that name that is not mdrecall's is left alone (--force removes it)."""
    target, options = _options(host, Path.cwd(), **locating)
    from mdrecall.hosts.connect import plan

    changes = plan(target, options, connect=False)
    _apply(changes, dry_run)
    return _report(changes, dry_run, as_json, "disconnected", target)
