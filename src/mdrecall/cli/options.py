"""What every command shares: ``-w/--workspace``, ``-c KEY=VALUE`` overrides, ``--json``, opening the
manager (with the embedding model's load shown), progress lines on the terminal, JSON output.

Two hooks let a daemon run a command for a one-shot client exactly as that client would have run it
(cli/warm/server.py): :data:`REQUEST_ENVIRON`, the client's values of the variables options read,
and :data:`DAEMON`, which :func:`cli_manager` asks for the manager instead of opening one.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from mdrecall.errors import ConfigError
from mdrecall.types import SyncProgress

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager

F = TypeVar("F", bound=Callable[..., Any])

#: The exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130

#: The environment options read their defaults from (``MDRECALL_WORKSPACE``,
#: ``MDRECALL_SESSION_KEY``): this process's, or, while a daemon runs a client's command, the client's.
REQUEST_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("mdrecall_request_environ", default=None)

#: ``DaemonManagers(workspace, overrides, keep_open)``: the manager a daemon lends a command it runs
#: for a client (a context manager; it raises when the daemon must not answer, before anything runs).
DaemonManagers = Callable[[str, Sequence[str], bool], AbstractContextManager["MemorySearchManager"]]
DAEMON: ContextVar[DaemonManagers | None] = ContextVar("mdrecall_daemon", default=None)


def environ() -> Mapping[str, str]:
    requested = REQUEST_ENVIRON.get()
    return os.environ if requested is None else requested


#: ``-c`` values PyYAML would read as these (YAML 1.1's booleans and nulls among plain words).
_YAML_WORDS: dict[str, Any] = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("null", "Null", "NULL"), None),
}
#: Values read without PyYAML (importing it costs a one-shot command more than the rest of this
#: parse): a word or path (no resolver of PyYAML's starts with a letter or a slash, so these are
#: strings or the words above), or a decimal integer. tests/cli/test_startup.py compares them with
#: yaml.safe_load.
_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./-]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


def _override_value(raw: str) -> Any:
    if _PLAIN.fullmatch(raw):
        return _YAML_WORDS.get(raw, raw)
    if _DECIMAL.fullmatch(raw):
        return int(raw)
    import yaml

    return yaml.safe_load(raw)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["query.maxResults=5", "provider=none"]`` → a nested mapping (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"config override {item!r} must look like KEY=VALUE, e.g. -c query.maxResults=5")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(part.strip() for part in parts):
            raise ConfigError(f"config override {item!r}: {key.strip()!r} is not a key (e.g. query.maxResults)")
        try:
            value = _override_value(raw) if raw else ""
        except Exception as exc:
            import yaml

            if not isinstance(exc, yaml.YAMLError):
                raise
            problem = getattr(exc, "problem", None) or "cannot be read"
            raise ConfigError(
                f"-c {key.strip()}: {raw!r} is not a valid YAML value ({problem}); quote a string in the value, "
                f"e.g. -c '{key.strip()}=\"...\"'"
            ) from None
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part.strip(), {})
            if not isinstance(child, dict):
                raise ConfigError(f"config overrides set {part.strip()!r} both to a value and to keys inside it")
            node = child
        node[parts[-1].strip()] = value
    return out


def _is_current_directory(workspace: str) -> bool:
    try:
        return Path(workspace).expanduser().resolve() == Path.cwd().resolve()
    except OSError:
        return False


def command_hint(workspace: str, overrides: Sequence[str], *words: str) -> str:
    """``mdrecall WORDS ...`` as it must be typed to act on the same memory: with ``-w`` when the
    workspace is not the current directory and with this command's ``-c`` overrides, quoted for a
    POSIX shell. Every hint a command prints is built here, so it runs as printed."""
    import shlex

    return shlex.join(["mdrecall", *words, *_carried(workspace, overrides)])


def _carried(workspace: str, overrides: Sequence[str]) -> list[str]:
    """The options a hint must carry to act on the same memory with the same configuration."""
    # ~ expanded: a quoted '~/agent' would not be expanded by the shell that runs the hint.
    parts = [] if _is_current_directory(workspace) else ["-w", str(Path(workspace).expanduser())]
    for item in overrides:
        parts += ["-c", item]
    return parts


def init_hint(workspace: str) -> str:
    """``mdrecall init [DIR]``: the command that creates this workspace's skeleton, as typed from here."""
    import shlex

    if _is_current_directory(workspace):
        return "mdrecall init"
    return shlex.join(["mdrecall", "init", str(Path(workspace).expanduser())])


_HINT = re.compile(r"`(mdrecall(?: [^`]*)?)`")


def carry_options(text: str, workspace: str, overrides: Sequence[str]) -> str:
    """``text`` with each `` `mdrecall COMMAND ...` `` it names completed by :func:`command_hint`
    (for commands that take ``-w``): the core's fixes (doctor, status, search) say `mdrecall index`,
    which would act on the current directory when run as printed from elsewhere."""
    if "`mdrecall" not in text or (_is_current_directory(workspace) and not overrides):
        return text

    def complete(match: re.Match[str]) -> str:
        import shlex

        try:
            words = shlex.split(match.group(1))[1:]
        except ValueError:
            return match.group(0)
        if not words or "-w" in words or "--workspace" in words or not _takes_workspace(words):
            return match.group(0)
        return f"`{match.group(1)} {shlex.join(_carried(workspace, overrides))}`"  # its own quoting kept

    return _HINT.sub(complete, text)


def _takes_workspace(words: Sequence[str]) -> bool:
    """Whether ``mdrecall WORDS`` is a command with ``-w/--workspace`` (looked up in the group)."""
    current = click.get_current_context(silent=True)
    if current is None:
        return False
    ctx = current.find_root()
    root = ctx.command
    command: click.Command | None = root
    for word in words:
        if not isinstance(command, click.Group) or word.startswith("-"):
            break
        try:
            command = command.get_command(ctx, word)
        except Exception:
            return False
        if command is None:
            return False
    return command is not root and command is not None and any(p.name == "workspace" for p in command.params)


def _existing_workspace(ctx: click.Context, param: click.Parameter, value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_dir():
        hint = f" (create it with `{init_hint(value)}`)" if not path.exists() else ""
        raise click.BadParameter(f"workspace {path} is not a directory{hint}", ctx=ctx, param=param)
    return value


@overload
def workspace_options(func: F) -> F: ...
@overload
def workspace_options(*, must_exist: bool = True) -> Callable[[F], F]: ...
def workspace_options(func: F | None = None, *, must_exist: bool = True) -> F | Callable[[F], F]:
    """``-w/--workspace`` and repeatable ``-c KEY=VALUE``, as ``workspace`` and ``overrides``.

    A workspace that is not a directory is a usage error (exit 2), except for ``init``."""

    def decorate(f: F) -> F:
        f = click.option(
            "-c",
            "--config",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help="override a config key, e.g. -c provider=none -c query.maxResults=5 (repeatable)",
        )(f)
        f = click.option(
            "-w",
            "--workspace",
            default=lambda: environ().get("MDRECALL_WORKSPACE", "."),
            show_default="$MDRECALL_WORKSPACE or the current directory",
            callback=_existing_workspace if must_exist else None,
            help="agent workspace holding MEMORY.md and memory/",
        )(f)
        return f

    return decorate(func) if func is not None else decorate


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="machine-readable output (JSON)")(func)


def session_key_option(func: F) -> F:
    return click.option(
        "--session-key",
        # Read as Click reads an envvar (an empty value is no value), from environ(): a daemon
        # running this for a client must see the client's variable, not its own.
        default=lambda: environ().get("MDRECALL_SESSION_KEY") or None,
        metavar="KEY",
        help="who is asking: that session's transcripts are visible (or $MDRECALL_SESSION_KEY)",
    )(func)


def parse_now(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> datetime | None:
    """``--now 2026-11-05`` or ``--now 2026-11-05T14:00:00+01:00`` (no zone: local time)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO date or time, e.g. 2026-11-05 or 2026-11-05T14:00", ctx=ctx, param=param) from None
    return parsed.astimezone() if parsed.tzinfo is None else parsed.astimezone(UTC)


def now_option(func: F) -> F:
    return click.option(
        "--now", callback=parse_now, metavar="WHEN",
        help="answer as of this date/time (ISO, e.g. 2026-11-05): temporal decay is measured from it",
    )(func)  # fmt: skip


def parse_as_of_option(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> datetime | None:
    """``--as-of 2026-03-31`` (the end of that day) or an ISO time (no zone: local time)."""
    if value is None:
        return None
    from mdrecall.search.asof import parse_as_of

    try:
        return parse_as_of(value, local=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def as_of_option(func: F) -> F:
    return click.option(
        "--as-of", "as_of", callback=parse_as_of_option, metavar="WHEN",
        help="answer as known then: only notes dated on or before WHEN (a date means its whole day) and "
             "transcript messages before it; undated files only if unchanged since (docs/facts.md)",
    )(func)  # fmt: skip


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def echo_json(data: Any) -> None:
    click.echo(dumps(data))


def workspace_path(workspace: str) -> Path:
    path = Path(workspace).expanduser()
    if not path.is_dir():
        raise click.BadParameter(f"workspace {path} is not a directory", param_hint="'-w' / '--workspace'")
    return path


#: The config sections that decide which vectors an index holds.
_EMBEDDING_SECTIONS = ("provider", "model", "fallback", "local", "remote", "providers")


def load_cli_config(workspace: str, overrides: Sequence[str], **updates: Any) -> MemoryConfig:
    """The workspace's config with ``-c`` overrides. A command runs once and exits: no background
    watcher (``sync.watch`` is for long-lived processes) unless a command asks for one.

    One-shot overrides never rewrite the workspace's shared index: when ``-c`` changes the embedding
    provider or model, the command uses an index of its own beside the shared one; ``-c provider=none``
    answers keyword-only from the shared index as it is (``store.readOnly``) when there is one.
    """
    from mdrecall.config import load_config

    path = Path(workspace).expanduser()
    root = path if path.is_dir() else None
    parsed = parse_overrides(overrides)
    config = load_config(root, parsed)
    if root is not None and not (parsed.get("store") or {}).get("path"):
        config = _keep_shared_index(root, load_config(root), config)
    sync = {"watch": False, **updates.pop("sync", {})}
    return config.model_copy(update={"sync": config.sync.model_copy(update=sync), **updates})


def _keep_shared_index(root: Path, configured: MemoryConfig, config: MemoryConfig) -> MemoryConfig:
    import hashlib
    import json

    from mdrecall.config_cache import plain_values
    from mdrecall.store import default_store_path

    def identity(c: MemoryConfig) -> str:  # plain_values: model_dump would build pydantic's serializer
        values = plain_values(c)
        return json.dumps({key: values[key] for key in _EMBEDDING_SECTIONS}, sort_keys=True, default=str)

    if identity(configured) == identity(config):
        return config
    _check_provider_names(config)  # before an index of its own is named: a typo must not leave one behind
    if config.backend != "builtin":
        # A shared store (Postgres rows, a QMD or LanceDB index) has no index "beside" it: keyword-only
        # reads it as it is; another model would rewrite it, which a one-shot command must not do.
        if config.provider == "none":
            return config.model_copy(update={"store": config.store.model_copy(update={"readOnly": True})})
        raise ConfigError(
            f"-c cannot switch the embedding provider for one command on the {config.backend} backend: it would "
            "rewrite the shared store; change the provider in the config file instead"
        )
    shared = Path(configured.store.path).expanduser() if configured.store.path else default_store_path(root)
    if config.provider == "none" and shared.exists():
        store = config.store.model_copy(update={"path": str(shared), "readOnly": True})
    else:
        key = hashlib.sha256(identity(config).encode()).hexdigest()[:12]
        store = config.store.model_copy(update={"path": str(shared.with_name(f"{shared.stem}.override-{key}.sqlite"))})
    return config.model_copy(update={"store": store})


def _check_provider_names(config: MemoryConfig) -> None:
    import difflib

    from mdrecall.embeddings.registry import known_providers

    known = known_providers()
    for key, name in (("provider", config.provider), ("fallback", config.fallback)):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown embedding provider {key}={name!r}{hint}; known: {', '.join(known)}")


def open_cli_manager(workspace: str, overrides: Sequence[str], **updates: Any) -> MemorySearchManager:
    from mdrecall.backends import open_manager

    root = workspace_path(workspace)
    return open_manager(root, load_cli_config(workspace, overrides, **updates))


@contextmanager
def cli_manager(workspace: str, overrides: Sequence[str], *, keep_open: bool) -> Iterator[MemorySearchManager]:
    """The manager a one-shot command (search, get, status) works with, closed after it. In a daemon
    answering for a client (:data:`DAEMON`) the daemon lends it instead: with ``keep_open``, its own
    long-lived one, when what the command reports does not depend on the process that runs it (a
    search's answer, a file's lines); without, one opened for this command (``status`` reports the
    process: what it synced, recorded, loaded)."""
    daemon = DAEMON.get()
    if daemon is not None:
        with daemon(workspace, overrides, keep_open) as lent:
            yield lent
        return
    with open_cli_manager(workspace, overrides) as manager:
        yield manager


def load_model(manager: MemorySearchManager, *, quiet: bool = False) -> None:
    """Choose (and load) the embedding provider now, saying so on a terminal: loading a local model
    takes seconds, and a bare "Scanning memory files…" meanwhile looks like a hang."""
    from mdrecall.builtin.manager import BuiltinMemoryManager

    if not isinstance(manager, BuiltinMemoryManager) or manager.config.provider == "none":
        return
    line = ProgressLine()
    show = line.tty and not quiet
    if show:
        line.note(f"loading the embedding model ({manager.config.provider})…")
    started = time.monotonic()
    provider = manager.providers.selection.provider
    if show:
        what = f"{provider.id}/{provider.model}" if provider else "none available: keyword-only"
        line.note(f"embedding model: {what} ({time.monotonic() - started:.1f}s)")
        line.done()


#: How long a step runs before the progress line guesses how long it has left.
ETA_AFTER_S = 3.0


def _duration(seconds: float) -> str:
    """``45s``, ``3m 10s``, ``1h 05m``: a remaining time, rounded to what a reader needs."""
    whole = max(1, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


class ProgressLine:
    """One self-overwriting line on a terminal (stderr); plain lines every few seconds otherwise.
    A step that has run a few seconds says about how long it has left (a first index of 15k chunks
    takes minutes), from its own pace so far."""

    def __init__(self, stream: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        # Look sys.stderr up now, not at import: callers (and pytest) may have replaced it since.
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._clock = clock
        self._last = 0.0
        self._printed: str | None = None  # the last plain line: the same progress twice is one line
        self._started = clock()
        self._drawn = False
        #: The step under way (its label without the count), when it began and how far it was then.
        self._step: tuple[str, float, int] | None = None

    def note(self, text: str) -> None:
        if self.tty:
            self.stream.write(f"\r{text[:96]:<96}")
            self.stream.flush()
            self._drawn = True
        else:
            print(text, file=self.stream)

    def __call__(self, p: SyncProgress) -> None:
        now = self._clock()
        left = self._left(p, now)
        if not self.tty:
            if (p.total and p.completed == p.total or now - self._last > 2) and p.label != self._printed:
                print(p.label + left, file=self.stream)
                self._last, self._printed = now, p.label
            return
        elapsed = f"{now - self._started:5.1f}s"
        if p.total:
            width = 24
            filled = int(width * p.completed / max(1, p.total))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{bar}] {p.completed}/{p.total} {elapsed} {(p.label + left)[:64]:<64}")
        else:
            self.stream.write(f"\r{elapsed} {p.label[:84]:<86}")
        self.stream.flush()
        self._drawn = True

    def _left(self, p: SyncProgress, now: float) -> str:
        """", about 3m 10s left" once the step has run ``ETA_AFTER_S`` and done some of its work; ""."""
        count = f" {p.completed}/{p.total}"
        step = p.label[: -len(count)] if p.total and p.label.endswith(count) else p.label
        if self._step is None or self._step[0] != step:
            self._step = (step, now, p.completed)
            return ""
        _, began, at_start = self._step
        done, spent = p.completed - at_start, now - began
        if not p.total or done <= 0 or spent < ETA_AFTER_S or p.completed >= p.total:
            return ""
        return f", about {_duration(spent / done * (p.total - p.completed))} left"

    def clear(self) -> None:
        """Erase the line (a note that only said what was going on)."""
        if self.tty and self._drawn:
            self.stream.write("\r" + " " * 120 + "\r")
            self.stream.flush()
            self._drawn = False

    def done(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
