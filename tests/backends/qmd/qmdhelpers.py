"""Helpers for the QMD backend tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdrecall import open_manager

EXAMPLE_WORKSPACE = Path(__file__).resolve().parents[3] / "examples" / "workspace"

#: A fact no example note holds, and a question about it that QMD's AND semantics cannot answer
#: ("leads" is not a prefix of "lead"; "who" is in no note).
PLANTED_PATH = "memory/2026-11-20.md"
PLANTED_NOTE = (
    "# 2026-11-20 (Fri)\n"
    "\n"
    "## Ops\n"
    "- Rotated the staging database password; the new one lives in the vault under `kv/pebble/staging`.\n"
    "- The quarterly disaster-recovery drill is booked for 2027-01-14, with Priya as drill lead.\n"
    "- Backups: nightly, kept 30 days.\n"
)
PLANTED_LINE = 5
PLANTED_QUESTION = "who leads the quarterly disaster recovery drill?"


def make_workspace(target: Path) -> Path:
    shutil.copytree(EXAMPLE_WORKSPACE, target, symlinks=True)
    shutil.rmtree(target / "memory" / ".dreams", ignore_errors=True)
    (target / PLANTED_PATH).write_text(PLANTED_NOTE, encoding="utf-8")
    return target


def qmd_config(tmp: Path, *, qmd: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """backend qmd, QMD's home and the fallback's index under ``tmp``, no embeddings, no watcher."""
    config: dict[str, Any] = {
        "backend": "qmd",
        "provider": "none",
        "store": {"path": str(tmp / "builtin.sqlite")},
        "sync": {"watch": False},
        "qmd": {"indexDir": str(tmp / "qmd"), "retryInitialMs": 300, "retryMaxMs": 5000, **(qmd or {})},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def open_qmd(workspace: Path, tmp: Path, *, qmd: dict[str, Any] | None = None, **extra: Any) -> Any:
    manager = open_manager(workspace, qmd_config(tmp, qmd=qmd, **extra), use_global_config=False)
    assert manager.backend == "qmd"
    return manager


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    assert predicate(), f"timed out waiting for {what}"


def file_lines(workspace: Path, rel: str, start: int, end: int) -> list[str]:
    return (workspace / rel).read_text(encoding="utf-8").split("\n")[start - 1 : end]
