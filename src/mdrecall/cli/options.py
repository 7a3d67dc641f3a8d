"""What every command shares: ``-w/--workspace``, ``-c KEY=VALUE`` overrides, opening the manager,
a progress line on the terminal."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mdrecall.errors import ConfigError, MdrecallError
from mdrecall.types import SyncProgress

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager

F = TypeVar("F", bound=Callable[..., Any])


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["query.maxResults=5", "provider=none"]`` → a nested mapping (values parsed as YAML)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"config override {item!r} must look like KEY=VALUE")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw else ""
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def workspace_options(func: F) -> F:
    """``-w/--workspace`` and repeatable ``-c KEY=VALUE``, as ``workspace`` and ``overrides``."""
    func = click.option(
        "-c",
        "--config",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="override a config key, e.g. -c provider=none -c query.maxResults=5 (repeatable)",
    )(func)
    func = click.option(
        "-w",
        "--workspace",
        default=lambda: os.environ.get("MDRECALL_WORKSPACE", "."),
        show_default="$MDRECALL_WORKSPACE or the current directory",
        help="agent workspace holding MEMORY.md and memory/",
    )(func)
    return func


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="machine-readable output")(func)


def workspace_path(workspace: str) -> Path:
    path = Path(workspace).expanduser()
    if not path.is_dir():
        raise MdrecallError(f"workspace {path} is not a directory")
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

    from mdrecall.store import default_store_path

    def identity(c: MemoryConfig) -> str:
        return json.dumps(c.model_dump(include=set(_EMBEDDING_SECTIONS)), sort_keys=True, default=str)

    if identity(configured) == identity(config):
        return config
    shared = Path(configured.store.path).expanduser() if configured.store.path else default_store_path(root)
    if config.provider == "none" and shared.exists():
        store = config.store.model_copy(update={"path": str(shared), "readOnly": True})
    else:
        key = hashlib.sha256(identity(config).encode()).hexdigest()[:12]
        store = config.store.model_copy(update={"path": str(shared.with_name(f"{shared.stem}.override-{key}.sqlite"))})
    return config.model_copy(update={"store": store})


def open_cli_manager(workspace: str, overrides: Sequence[str], **updates: Any) -> MemorySearchManager:
    from mdrecall.backends import open_manager

    root = workspace_path(workspace)
    return open_manager(root, load_cli_config(workspace, overrides, **updates))


class ProgressLine:
    """One self-overwriting line on a terminal; plain lines otherwise."""

    def __init__(self, stream: Any = None) -> None:
        # Look sys.stderr up now, not at import: callers (and pytest) may have replaced it since.
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self._last = 0.0

    def __call__(self, p: SyncProgress) -> None:
        now = time.monotonic()
        if not self.tty:
            if p.total and p.completed == p.total or now - self._last > 2:
                print(p.label, file=self.stream)
                self._last = now
            return
        if p.total:
            width = 30
            filled = int(width * p.completed / max(1, p.total))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{bar}] {p.label[:60]:<60}")
        else:
            self.stream.write(f"\r{p.label[:90]:<92}")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")
