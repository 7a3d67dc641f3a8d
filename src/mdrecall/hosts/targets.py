"""The hosts ``mdrecall connect`` knows: where each keeps its MCP servers, in what format, and which
hooks it runs. docs/hosts/<host>.md is the human version of each entry, with the sources it follows.

Locations follow each host's documentation, per operating system, and honour the variables the
hosts themselves honour (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``APPDATA``, ``XDG_CONFIG_HOME``);
``--file`` names any other file (a test's copy, a non-standard install).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Format = Literal["json", "jsonc", "toml"]
Scope = Literal["user", "project"]


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    title: str
    format: Format
    #: Where the servers live in the file: ``("mcpServers",)``, ``("servers",)``, ``("mcp_servers",)``.
    servers_key: tuple[str, ...]
    #: Whether each server says ``"type": "stdio"`` (Claude Code's .mcp.json, VS Code).
    typed: bool = False
    #: The session key the host's conversations are indexed under (sources/hostlogs.py).
    session_key: str | None = None
    #: The scopes it has a file for.
    scopes: tuple[Scope, ...] = ("user",)
    #: "claude-code": hooks in settings.json; "codex": the notify program; None: no hooks.
    hooks: str | None = None
    #: What to do after connecting, for the person reading the output.
    after: str = ""


HOSTS: dict[str, Host] = {
    "claude-code": Host("claude-code", "Claude Code", "json", ("mcpServers",), typed=True, session_key="claude-code",
                        scopes=("user", "project"), hooks="claude-code",
                        after="start a new Claude Code session (/mcp lists the server, /hooks the hooks)"),
    "claude-desktop": Host("claude-desktop", "Claude Desktop", "json", ("mcpServers",),
                           after="quit and reopen Claude Desktop"),
    "cursor": Host("cursor", "Cursor", "json", ("mcpServers",), scopes=("user", "project"),
                   after="reload Cursor (Settings > MCP shows the server)"),
    "vscode": Host("vscode", "VS Code", "jsonc", ("servers",), typed=True, scopes=("user", "project"),
                   after="run 'MCP: List Servers' in VS Code and start mdrecall"),
    "codex": Host("codex", "Codex CLI", "toml", ("mcp_servers",), session_key="codex", hooks="codex",
                  after="start a new Codex session (/mcp lists the server)"),
    "json": Host("json", "a JSON config file", "jsonc", ("mcpServers",)),
    "toml": Host("toml", "a TOML config file", "toml", ("mcp_servers",)),
}  # fmt: skip
GENERIC = ("json", "toml")


def _home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def _app_data(env: Mapping[str, str], platform: str) -> Path:
    """The per-user application folder: ~/Library/Application Support, %APPDATA%, $XDG_CONFIG_HOME."""
    home = _home(env)
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        return Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    return Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"


def claude_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env["CLAUDE_CONFIG_DIR"]).expanduser() if env.get("CLAUDE_CONFIG_DIR") else _home(env) / ".claude"


def config_path(host: Host, scope: Scope = "user", project: Path | None = None, *,
                env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:  # fmt: skip
    """The host's MCP config file for ``scope`` (``project``: inside ``project``, default the cwd)."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    project = project or Path.cwd()
    name = host.name
    if name == "claude-code":
        if scope == "project":
            return project / ".mcp.json"
        # ~/.claude.json, or .claude.json inside CLAUDE_CONFIG_DIR when that is set.
        return claude_dir(env) / ".claude.json" if env.get("CLAUDE_CONFIG_DIR") else _home(env) / ".claude.json"
    if name == "claude-desktop":
        return _app_data(env, platform) / "Claude" / "claude_desktop_config.json"
    if name == "cursor":
        return project / ".cursor" / "mcp.json" if scope == "project" else _home(env) / ".cursor" / "mcp.json"
    if name == "vscode":
        return project / ".vscode" / "mcp.json" if scope == "project" else _app_data(env, platform) / "Code" / "User" / "mcp.json"
    if name == "codex":
        base = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else _home(env) / ".codex"
        return base / "config.toml"
    raise ValueError(f"{host.title} has no default location: name the file with --file")


def settings_path(host: Host, scope: Scope = "user", project: Path | None = None, *, env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's settings.json, where its hooks live (user, or the project's .claude/)."""
    if scope == "project":
        return (project or Path.cwd()) / ".claude" / "settings.json"
    return claude_dir(env) / "settings.json"


# --- the entries ----------------------------------------------------------------------------------

#: Environment variables the server and the hooks need to find the same index and settings.
KEPT_ENV = ("MDRECALL_HOME", "MDRECALL_THREADS")


def server_entry(host: Host, command: list[str], workspace: Path, *, session_key: str | None,
                 env: Mapping[str, str]) -> dict[str, Any]:  # fmt: skip
    args = [*command[1:], "mcp", "-w", str(workspace)]
    if session_key:
        args += ["--session-key", session_key]
    entry: dict[str, Any] = {"type": "stdio"} if host.typed else {}
    entry.update(command=command[0], args=args)
    if env:
        entry["env"] = dict(env)
    return entry


_OURS = re.compile(r"(?:^|[\\/\s])mdrecall(?:\.exe)?$")


def is_our_server(entry: Any) -> bool:
    """Whether an existing server entry starts ``mdrecall mcp`` (so connect may replace it)."""
    if not isinstance(entry, Mapping):
        return False
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    words = [command, *(a for a in args if isinstance(a, str))]
    runs_mdrecall = bool(_OURS.search(command)) or any(
        words[i] == "-m" and words[i + 1] == "mdrecall" for i in range(len(words) - 1)
    ) or "mdrecall" in words[1:2]  # uvx mdrecall / pipx run mdrecall
    return runs_mdrecall and "mcp" in words


_OUR_HOOK = re.compile(r"(?:^|[\\/\s])mdrecall(?:\.exe)?['\"]?\s+hook\s+(?:recall|flush|capture)\b")


def is_our_hook_command(command: Any) -> bool:
    return isinstance(command, str) and bool(_OUR_HOOK.search(command))


def is_our_hook_group(group: Any) -> bool:
    """A Claude Code matcher group whose every hook is one of ours."""
    if not isinstance(group, Mapping):
        return False
    hooks = group.get("hooks")
    return (isinstance(hooks, list) and bool(hooks)
            and all(isinstance(h, Mapping) and is_our_hook_command(h.get("command")) for h in hooks))  # fmt: skip


#: Claude Code hook events and the ``mdrecall hook`` command each runs.
CLAUDE_HOOKS = {"UserPromptSubmit": "recall", "SessionStart": "recall", "PreCompact": "flush", "Stop": "capture"}
