"""What the index covers, as filesystem roots to watch and walk, and which paths under them matter.

Roots: ``MEMORY.md`` (through its directory, non-recursively), ``memory/`` recursively, each
``extraPaths`` entry (directories recursively, ``.md`` files through their parent), and the sessions
directory (plus the enabled hosts' log folders) when ``"sessions"`` is a source. A root that does not exist yet is watched through its
nearest existing ancestor until it appears.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.sources.hostlogs import enabled_hosts, log_dir
from mdrecall.sources.transcripts import is_transcript_file_name, sessions_root
from mdrecall.sources.workspace import MEMORY_DIR, ROOT_MEMORY_FILE, extra_path_roots

#: Directory names never watched or walked: tool state, not memory.
IGNORED_SEGMENTS = frozenset(
    {".git", "node_modules", ".pnpm-store", ".venv", "venv", ".tox", "__pycache__", ".mypy_cache", ".pytest_cache"}
)


def is_ignored_name(name: str) -> bool:
    """Editor and tool temp files: vim swap/backup, emacs locks/backups, vim's 4913 probe, *.tmp."""
    return (
        name.endswith((".swp", ".swo", ".swx", "~", ".tmp", ".temp", ".part", ".crdownload"))
        or name.startswith((".#", "#"))
        or name == "4913"
        or name.startswith(".~lock.")
        or name in {".DS_Store", "Thumbs.db"}
    )


@dataclass(frozen=True, slots=True)
class WatchRoot:
    path: Path
    kind: str  # "memory" | "sessions"
    is_file: bool = False  # a single .md file (MEMORY.md, an extraPaths file)


def watch_roots(workspace: Path, config: MemoryConfig) -> list[WatchRoot]:
    """What the index covers, as watch roots (existing or not)."""
    roots: list[WatchRoot] = []
    if "memory" in config.sources:
        roots.append(WatchRoot(workspace / ROOT_MEMORY_FILE, "memory", is_file=True))
        roots.append(WatchRoot(workspace / MEMORY_DIR, "memory"))
        for extra in extra_path_roots(workspace, config):
            roots.append(WatchRoot(extra, "memory", is_file=extra.name.endswith(".md") and not extra.is_dir()))
    if "sessions" in config.sources:
        roots.append(WatchRoot(sessions_root(workspace, config.sessions.dir), "sessions"))
        roots.extend(WatchRoot(log_dir(config, kind), "sessions") for kind in enabled_hosts(config))
    return roots


def _nearest_existing_dir(path: Path) -> Path | None:
    for candidate in [path, *path.parents]:
        if candidate.is_dir():
            return candidate
    return None


@dataclass
class WatchPlan:
    recursive: list[Path]
    shallow: list[Path]  # watched non-recursively: parents of file roots, ancestors of missing roots
    missing: list[Path]  # roots that do not exist yet; their creation restarts the watch


def plan_watch(roots: list[WatchRoot]) -> WatchPlan:
    recursive: list[Path] = []
    shallow: list[Path] = []
    missing: list[Path] = []
    for root in roots:
        if root.is_file:
            parent = _nearest_existing_dir(root.path.parent)
            if parent is not None and parent not in shallow:
                shallow.append(parent)
            if not root.path.parent.is_dir():
                missing.append(root.path.parent)
        elif root.path.is_dir():
            if root.path not in recursive:
                recursive.append(root.path)
        else:
            missing.append(root.path)
            ancestor = _nearest_existing_dir(root.path.parent)
            if ancestor is not None and ancestor not in shallow:
                shallow.append(ancestor)
    # A recursive watch already covers shallow dirs inside it.
    shallow = [s for s in shallow if not any(s == r or r in s.parents for r in recursive)]
    return WatchPlan(recursive, shallow, missing)


class RootFilter:
    """Decides which raw filesystem events matter to the index."""

    def __init__(self, roots: list[WatchRoot]):
        self.roots = roots

    def root_for(self, path: Path) -> WatchRoot | None:
        best: WatchRoot | None = None
        for root in self.roots:
            if path == root.path or root.path in path.parents:
                if best is None or len(root.path.parts) > len(best.path.parts):
                    best = root
        return best

    def accepts(self, path: Path) -> bool:
        root = self.root_for(path)
        if root is None:
            return False
        if root.is_file:
            return path == root.path
        rel_parts = path.relative_to(root.path).parts
        if any(part in IGNORED_SEGMENTS for part in rel_parts):
            return False
        if root.kind == "memory" and any(part.startswith(".") for part in rel_parts):
            return False  # memory/.dreams and other hidden state is not indexed (see workspace.py)
        if not rel_parts:
            return True  # the root directory itself (created or deleted)
        name = rel_parts[-1]
        if is_ignored_name(name):
            return False
        suffix = os.path.splitext(name)[1].lower()
        if suffix == "":
            return True  # a directory, or a deleted one we cannot stat any more
        if path.is_dir():
            return True
        if root.kind == "sessions":
            return is_transcript_file_name(name)
        return suffix == ".md"
