"""Which files are memory: discovery, sources, dated vs evergreen notes, and path safety.

Indexed: ``MEMORY.md``, ``memory/**/*.md`` and configured ``extraPaths`` (directories or ``.md``
files, relative to the workspace, ``~`` expanded). Links are followed only while their target stays
inside an allowed root; files are deduplicated by real path. Hidden directories (``memory/.dreams``
holds mdrecall's own state), ``.git`` and ``node_modules`` are never walked.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.errors import PathError

ROOT_MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
SKIP_DIR_NAMES = frozenset({"node_modules", "__pycache__", "venv"})
MAX_PATH_CHARS = 1024
# memory/2026-01-31.md, memory/2026-01-31-standup.md, memory/daily/2026-01-31.md
_DATED = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})(?:[-_ .][^/]*)?\.md$")


@dataclass(frozen=True, slots=True)
class MemoryFile:
    path: Path  # absolute, as discovered (not resolved)
    rel_path: str  # workspace-relative with "/", the stored path
    source: str


def rel_path_for(workspace: Path, path: Path) -> str:
    # Fast path for the common case (a path built under the workspace): relpath costs ~20 µs a file.
    ws, text = str(workspace), str(path)
    if text.startswith(ws + os.sep) and os.sep + ".." + os.sep not in text and os.sep + "." + os.sep not in text:
        return text[len(ws) + 1 :].replace(os.sep, "/")
    return Path(os.path.relpath(path, workspace)).as_posix()


def note_date(rel_path: str) -> date | None:
    """The date of a dated daily note (``memory/**/YYYY-MM-DD[-slug].md``); None for evergreen files."""
    if not rel_path.startswith(MEMORY_DIR + "/"):
        return None
    match = _DATED.search(rel_path)
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def note_timestamp(rel_path: str) -> datetime | None:
    day = note_date(rel_path)
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc) if day else None


def is_evergreen(rel_path: str, source: str = "memory") -> bool:
    return source == "memory" and note_date(rel_path) is None


def extra_path_roots(workspace: Path, config: MemoryConfig) -> list[Path]:
    roots: list[Path] = []
    for raw in config.extraPaths:
        entry = raw.strip()
        if not entry:
            continue
        candidate = Path(entry).expanduser()
        if not candidate.is_absolute():
            candidate = workspace / candidate
        roots.append(Path(os.path.normpath(candidate)))
    return roots


def allowed_roots(workspace: Path, config: MemoryConfig) -> list[Path]:
    """Real paths under which memory files may live (files or directories)."""
    roots = [workspace / ROOT_MEMORY_FILE, workspace / MEMORY_DIR, *extra_path_roots(workspace, config)]
    return [Path(os.path.realpath(r)) for r in roots]


def _inside(path: Path, roots: list[Path]) -> bool:
    for root in roots:
        if path == root or root in path.parents:
            return True
    return False


def _inside_str(real: str, roots: list[str]) -> bool:
    """``_inside`` for normalised absolute path strings (discovery runs it once per file)."""
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _walk_markdown(
    directory: Path, roots: list[Path], seen_dirs: set[str], reals: dict[str, str] | None = None
) -> list[Path]:
    """Markdown files under ``directory``. ``reals`` collects the real path of each file that is not
    itself a link (its directory's real path plus its name), sparing a realpath call per file."""
    found: list[Path] = []
    real_dir = os.path.realpath(directory)
    if real_dir in seen_dirs:  # symlink loops
        return found
    seen_dirs.add(real_dir)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIP_DIR_NAMES:
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=True):
                if entry.is_symlink() and not _inside(Path(os.path.realpath(path)), roots):
                    continue
                found.extend(_walk_markdown(path, roots, seen_dirs, reals))
            elif entry.is_file(follow_symlinks=True) and entry.name.endswith(".md"):
                found.append(path)
                if reals is not None and not entry.is_symlink():
                    reals[entry.path] = os.path.join(real_dir, entry.name)
        except OSError:
            continue
    return found


def discover_memory_files(workspace: Path, config: MemoryConfig) -> list[MemoryFile]:
    """All memory-source Markdown files, deduplicated by real path, links kept inside allowed roots."""
    roots = allowed_roots(workspace, config)
    candidates: list[Path] = []
    root_file = workspace / ROOT_MEMORY_FILE
    if root_file.is_file():
        candidates.append(root_file)
    memory_dir = workspace / MEMORY_DIR
    seen_dirs: set[str] = set()
    reals: dict[str, str] = {}
    if memory_dir.is_dir():
        candidates.extend(_walk_markdown(memory_dir, roots, seen_dirs, reals))
    for extra in extra_path_roots(workspace, config):
        if extra.is_dir():
            candidates.extend(_walk_markdown(extra, roots, seen_dirs, reals))
        elif extra.is_file() and extra.name.endswith(".md"):
            candidates.append(extra)

    files: list[MemoryFile] = []
    seen_real: set[str] = set()
    root_strs = [str(r) for r in roots]
    for path in candidates:
        real = reals.get(str(path)) or os.path.realpath(path)
        if real in seen_real or not _inside_str(real, root_strs):
            continue
        seen_real.add(real)
        files.append(MemoryFile(path, rel_path_for(workspace, path), "memory"))
    return files


def resolve_memory_path(workspace: Path, config: MemoryConfig, rel_path: str) -> tuple[Path, str]:
    """Check a caller-supplied path and return (absolute real path, normalised relative path).

    Refuses, with a distinct ``PathError.code``: anything that is not a ``.md`` memory file
    (``not_memory_path``), paths whose real location leaves the allowed roots (``outside_workspace``),
    missing files (``not_found``) and malformed input (``invalid_path``).
    """
    if not isinstance(rel_path, str) or not rel_path.strip():
        raise PathError("invalid_path", "path is required (e.g. MEMORY.md or memory/2026-01-31.md)")
    if "\x00" in rel_path:
        raise PathError("invalid_path", "path contains a NUL byte")
    if len(rel_path) > MAX_PATH_CHARS:
        raise PathError("invalid_path", f"path is longer than {MAX_PATH_CHARS} characters")
    if "\\" in rel_path:
        raise PathError("invalid_path", f"use '/' as the path separator, not '\\': {rel_path!r}")
    text = rel_path.strip()
    if text.endswith("/"):  # "MEMORY.md/" names a directory; never let normpath quietly drop the slash
        raise PathError("invalid_path", f"{rel_path!r} ends with '/': name a Markdown file, not a directory")
    if any(len(part.encode("utf-8")) > 255 for part in text.split("/")):  # NAME_MAX: the OS would raise
        raise PathError("invalid_path", "a path component is longer than 255 bytes")
    while text.startswith("./"):
        text = text[2:]
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = workspace / candidate
    normal = Path(os.path.normpath(candidate))
    roots = allowed_roots(workspace, config)
    lexical_roots = [Path(os.path.normpath(r)) for r in [workspace / ROOT_MEMORY_FILE, workspace / MEMORY_DIR, *extra_path_roots(workspace, config)]]
    if not _inside(normal, lexical_roots) and not _inside(normal, roots):
        if _inside(normal, [Path(os.path.normpath(workspace))]):
            raise PathError(
                "not_memory_path",
                f"{rel_path!r} is not a memory file: only MEMORY.md, memory/**/*.md and configured extraPaths can be read",
            )
        raise PathError("outside_workspace", f"{rel_path!r} is outside the workspace's memory files")
    if normal.name != ROOT_MEMORY_FILE and not normal.name.endswith(".md"):
        raise PathError("not_memory_path", f"{rel_path!r} is not a Markdown (.md) memory file")
    real = Path(os.path.realpath(normal))
    if not _inside(real, roots):
        raise PathError("outside_workspace", f"{rel_path!r} resolves (through a link) outside the allowed memory paths")
    if not real.name.endswith(".md"):
        raise PathError("not_memory_path", f"{rel_path!r} links to a file that is not Markdown")
    if not real.exists():
        raise PathError("not_found", f"{rel_path!r} does not exist")
    if not real.is_file():
        raise PathError("not_memory_path", f"{rel_path!r} is not a file")
    return real, rel_path_for(workspace, normal)
