"""``connect`` / ``disconnect``: the change to each host file, checked before anything is written.

Every change is planned as a :class:`FileChange` (the file's text before and after): the new text is
produced by an in-place edit (:mod:`~mdrecall.hosts.jsonc`, :mod:`~mdrecall.hosts.tomlfile`), parsed
again, and compared with the document the change meant to produce (the old document with only our
entry set or removed). Anything else, and any file that does not parse as its host reads it, is
refused before a byte is written: a broken config is the user's to fix, never ours to "repair".

Writing (:meth:`FileChange.write`) is atomic: the old file is copied to ``<name>.mdrecall.bak``, the
new text goes to a temporary file in the same folder and replaces the old one, through a symlink to
its target (a dotfiles repository), with the old file's permissions (new files: owner-only, since a
server's ``env`` may name paths a user keeps private). If the host rewrote the file meanwhile (Claude
Code rewrites ~/.claude.json often), nothing is written and the user is asked to run it again.
"""

from __future__ import annotations

import copy
import difflib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdrecall.errors import MdrecallError
from mdrecall.hosts import jsonc, tomlfile
from mdrecall.hosts.targets import (
    CLAUDE_HOOKS,
    KEPT_ENV,
    Host,
    Scope,
    config_path,
    is_our_hook_command,
    is_our_hook_group,
    is_our_server,
    server_entry,
    settings_path,
)

BACKUP_SUFFIX = ".mdrecall.bak"
DEFAULT_NAME = "mdrecall"


class ConnectError(MdrecallError):
    """A host file that cannot be changed safely; nothing was written. The message says why."""


@dataclass(slots=True)
class Options:
    workspace: Path
    name: str = DEFAULT_NAME
    scope: Scope = "user"
    project: Path | None = None
    file: Path | None = None
    settings_file: Path | None = None
    key: tuple[str, ...] | None = None
    session_key: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    hooks: bool = True
    hook_timeout: int = 6
    force: bool = False
    command: list[str] | None = None


@dataclass(slots=True)
class FileChange:
    path: Path
    before: str | None  # None: the file does not exist
    after: str
    what: str  # "MCP server" | "hooks"
    notes: list[str] = field(default_factory=list)
    #: Where the old file was copied, once written.
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return (self.before or "") != self.after or (self.before is None and self.after != "")

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, "/dev/null" if self.before is None else str(self.path), str(self.path))
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def write(self) -> Path | None:
        """Write the change; returns the backup's path (None for a new file)."""
        target = Path(os.path.realpath(self.path))
        current = _read(target)
        if current != self.before:
            raise ConnectError(f"{self.path} changed while mdrecall was editing it (the host rewrote it?); "
                               "nothing was written, run the command again")  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        backup = None
        mode = 0o600
        if current is not None:
            backup = target.with_name(target.name + BACKUP_SUFFIX)
            shutil.copy2(target, backup)
            mode = stat.S_IMODE(os.stat(target).st_mode)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(self.after)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            if _read(target) != self.before:
                raise ConnectError(f"{self.path} changed while mdrecall was editing it; nothing was written, run the command again")
            os.replace(tmp, target)
            self.backup = backup
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return backup


def _read(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConnectError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text; refusing to edit it") from None


def mdrecall_command() -> list[str]:
    """How the host starts this very installation: the interpreter's absolute path with
    ``-m mdrecall``, which works whether or not ``mdrecall`` is on the host's PATH."""
    return [sys.executable, "-m", "mdrecall"]


def kept_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The variables the server must see to use the same index: ``MDRECALL_HOME`` (absolute) and
    ``MDRECALL_THREADS`` when set here, plus ``--env`` ones. API keys are never copied."""
    env: dict[str, str] = {}
    for name in KEPT_ENV:
        value = os.environ.get(name)
        if value:
            env[name] = str(Path(value).expanduser().resolve()) if name == "MDRECALL_HOME" else value
    env.update(extra)
    return env


# --- one file -------------------------------------------------------------------------------------


def _json_change(path: Path, host: Host, what: str, edit: Any, expect: Any) -> FileChange:
    """Apply ``edit(text) -> text`` to a JSON(C) file and check the result is ``expect(old value)``."""
    comments = host.format == "jsonc"
    before = _read(path)
    text = before or ""
    try:
        old = jsonc.loads(text, comments=comments)
    except jsonc.JsoncError as exc:
        raise ConnectError(f"{path} is not valid {'JSONC' if comments else 'JSON'}: {exc}; fix or move it, nothing was written") from None
    if not isinstance(old, dict):
        raise ConnectError(f"{path}: the top level is not a JSON object; nothing was written")
    wanted = expect(copy.deepcopy(old))
    try:
        after = edit(text, comments)
        result = jsonc.loads(after, comments=comments)
    except jsonc.JsoncError as exc:
        raise ConnectError(f"{path}: {exc}; nothing was written") from None
    if result != wanted:
        raise ConnectError(f"{path}: could not edit it without changing something else; nothing was written "
                           "(edit it by hand: docs/hosts/)")  # fmt: skip
    return FileChange(path, before, after, what)


def _set_in(doc: dict[str, Any], path: Sequence[str], key: str, value: Any) -> dict[str, Any]:
    node = doc
    for part in path:
        node = node.setdefault(part, {})
    node[key] = value
    return doc


def _del_in(doc: dict[str, Any], path: Sequence[str], key: str) -> dict[str, Any]:
    node: Any = doc
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(key, None)
    return doc


def _servers(host: Host, options: Options) -> tuple[str, ...]:
    return options.key or host.servers_key


def _check_existing(existing: Any, path: Path, options: Options, where: str) -> None:
    if existing is not None and not is_our_server(existing) and not options.force:
        raise ConnectError(f"{path}: {where}.{options.name} is another server, not mdrecall; pick another --name, "
                           "or --force to replace it")  # fmt: skip


def server_change(host: Host, options: Options, *, connect: bool) -> FileChange:
    path = options.file or config_path(host, options.scope, options.project)
    keys = _servers(host, options)
    command = options.command or mdrecall_command()
    session_key = options.session_key if options.session_key is not None else host.session_key
    entry = server_entry(host, command, options.workspace, session_key=session_key, env=kept_env(options.env))
    if host.format == "toml":
        return _toml_server_change(path, keys, options, entry, connect)
    before = _read(path)
    if connect and before is not None:
        try:
            existing = jsonc.get(jsonc.loads(before, comments=host.format == "jsonc"), [*keys, options.name])
        except jsonc.JsoncError:
            existing = None  # reported by _json_change
        _check_existing(existing, path, options, ".".join(keys))
    if connect:
        return _json_change(path, host, "MCP server",
                            lambda text, c: jsonc.set_member(text, keys, options.name, entry, comments=c),
                            lambda doc: _set_in(doc, keys, options.name, entry))  # fmt: skip
    return _json_change(path, host, "MCP server",
                        lambda text, c: _remove_ours(text, keys, options, c),
                        lambda doc: _del_in(doc, keys, options.name) if _ours_or_forced(jsonc.get(doc, [*keys, options.name]), options) else doc)  # fmt: skip


def _ours_or_forced(entry: Any, options: Options) -> bool:
    return entry is not None and (is_our_server(entry) or options.force)


def _remove_ours(text: str, keys: Sequence[str], options: Options, comments: bool) -> str:
    existing = jsonc.get(jsonc.loads(text, comments=comments), [*keys, options.name])
    if not _ours_or_forced(existing, options):
        return text
    return jsonc.remove_member(text, keys, options.name, comments=comments)


def _toml_server_change(path: Path, keys: Sequence[str], options: Options, entry: dict[str, Any], connect: bool) -> FileChange:
    before = _read(path)
    text = before or ""
    try:
        old = tomlfile.loads(text)
    except tomlfile.TomlError as exc:
        raise ConnectError(f"{path} is not valid TOML: {exc}; fix or move it, nothing was written") from None
    existing = jsonc.get(old, [*keys, options.name])
    table_path = [*keys, options.name]
    if connect:
        _check_existing(existing, path, options, ".".join(keys))
        wanted = _set_in(copy.deepcopy(old), keys, options.name, entry)
        after = tomlfile.set_table(text, table_path, entry)
    else:
        if not _ours_or_forced(existing, options):
            return FileChange(path, before, text, "MCP server")
        wanted = _del_in(copy.deepcopy(old), keys, options.name)
        after = tomlfile.remove_table(text, table_path)
    try:
        result = tomlfile.loads(after)
    except tomlfile.TomlError:
        result = None
    if result != wanted:
        raise ConnectError(f"{path}: {'.'.join(table_path)} is written in a form mdrecall cannot edit safely "
                           "(an inline table or dotted keys?); nothing was written, edit it by hand (docs/hosts/codex.md)")  # fmt: skip
    return FileChange(path, before, after, "MCP server")


# --- hooks ----------------------------------------------------------------------------------------


def hook_command(command: Sequence[str], kind: str, host: str, workspace: Path, env: Mapping[str, str], timeout: int) -> str:
    """The shell command a host runs for one hook (environment first, as ``NAME=value cmd``)."""
    words = [*command, "hook", kind, "--host", host, "-w", str(workspace)]
    if kind == "recall":
        words += ["--timeout", str(timeout)]
    prefix = " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(w) for w in words)


def claude_hooks_change(host: Host, options: Options, *, connect: bool) -> FileChange:
    path = options.settings_file or settings_path(host, options.scope, options.project)
    command = options.command or mdrecall_command()
    env = kept_env(options.env)
    groups: dict[str, list[dict[str, Any]]] = {}
    if connect:
        for event, kind in CLAUDE_HOOKS.items():
            hook = {"type": "command", "command": hook_command(command, kind, host.name, options.workspace, env, options.hook_timeout),
                    "timeout": options.hook_timeout + 10 if kind == "recall" else 60}  # fmt: skip
            groups[event] = [{"hooks": [hook]}]

    def edit(text: str, comments: bool) -> str:
        had_hooks = bool(jsonc.get(jsonc.loads(text, comments=comments), ["hooks"]))
        for event in CLAUDE_HOOKS:
            before = jsonc.get(jsonc.loads(text, comments=comments), ["hooks", event])
            text = jsonc.edit_array(text, ["hooks", event], is_our_hook_group, groups.get(event, []), comments=comments)
            if _emptied(before, jsonc.get(jsonc.loads(text, comments=comments), ["hooks", event])):
                text = jsonc.remove_member(text, ["hooks"], event, comments=comments)
        if not connect and had_hooks and jsonc.get(jsonc.loads(text, comments=comments), ["hooks"]) == {}:
            text = jsonc.remove_member(text, [], "hooks", comments=comments)
        return text

    def expect(doc: dict[str, Any]) -> dict[str, Any]:
        hooks = doc.get("hooks")
        if hooks is not None and not isinstance(hooks, dict):
            raise ConnectError(f"{path}: 'hooks' is not an object; nothing was written")
        had_hooks = bool(hooks)
        for event in CLAUDE_HOOKS:
            current = (hooks or {}).get(event)
            if current is None and not groups.get(event):
                continue
            if current is not None and not isinstance(current, list):
                raise ConnectError(f"{path}: hooks.{event} is not a list; nothing was written")
            kept = [g for g in (current or []) if not is_our_hook_group(g)]
            doc.setdefault("hooks", {})[event] = kept + groups.get(event, [])
            if _emptied(current, doc["hooks"][event]):
                del doc["hooks"][event]
        # An object of hooks that held only ours goes with them (disconnect leaves no empty shell).
        if not connect and had_hooks and doc.get("hooks") == {}:
            del doc["hooks"]
        return doc

    change = _json_change(path, host, "hooks", edit, expect)
    mixed = _mixed_groups(change.after)
    if mixed:
        change.notes.append(f"left as they are: {mixed} hook group(s) mixing mdrecall with other commands")
    return change


def _emptied(before: Any, after: Any) -> bool:
    """An event's list that held hooks (ours) and holds none now."""
    return isinstance(before, list) and bool(before) and after == []


def _mixed_groups(text: str) -> int:
    try:
        doc = jsonc.loads(text, comments=False)
    except jsonc.JsoncError:
        return 0
    count = 0
    for groups in (doc.get("hooks") or {}).values() if isinstance(doc, dict) and isinstance(doc.get("hooks"), dict) else []:
        for group in groups if isinstance(groups, list) else []:
            hooks = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(hooks, list) and not is_our_hook_group(group) and any(
                isinstance(h, dict) and is_our_hook_command(h.get("command")) for h in hooks
            ):
                count += 1
    return count


def codex_notify_change(options: Options, staged: FileChange, *, connect: bool) -> FileChange:
    """Codex runs one ``notify`` program after each turn: ours captures, unless the user has one.
    It lives in the same config.toml as the server, so it is edited on top of ``staged``."""
    path, text = staged.path, staged.after
    old = tomlfile.loads(text)  # staged.after parsed already
    current = old.get("notify")
    ours = isinstance(current, list) and is_our_hook_command(" ".join(str(w) for w in current))
    env = kept_env(options.env)
    if current is not None and not ours:
        if connect:
            staged.notes.append("notify is already set to another program: mdrecall's capture hook was not added (docs/hosts/codex.md)")
        return staged
    if connect:
        words = [*(options.command or mdrecall_command()), "hook", "capture", "--host", "codex", "-w", str(options.workspace)]
        if env:
            words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
        after = tomlfile.set_top_key(text, "notify", words)
        wanted = {**old, "notify": words}
    else:
        if not ours:
            return staged
        after = tomlfile.remove_top_key(text, "notify")
        wanted = {k: v for k, v in old.items() if k != "notify"}
    try:
        result = tomlfile.loads(after)
    except tomlfile.TomlError:
        result = None
    if result != wanted:
        raise ConnectError(f"{path}: could not set notify without changing something else; nothing was written")
    return FileChange(path, staged.before, after, "MCP server and hooks", staged.notes)


def plan(host: Host, options: Options, *, connect: bool) -> list[FileChange]:
    """The files ``connect`` (or ``disconnect``) changes for ``host``, each checked, none written."""
    changes = [server_change(host, options, connect=connect)]
    if options.hooks and host.hooks == "claude-code" and (options.settings_file or not options.file):
        changes.append(claude_hooks_change(host, options, connect=connect))
    elif options.hooks and host.hooks == "claude-code" and connect:
        changes[0].notes.append("hooks not written: --file names the server's file only; add --settings-file for the hooks")
    if options.hooks and host.hooks == "codex":
        changes[0] = codex_notify_change(options, changes[0], connect=connect)
    return changes
