"""Which files are memory: discovery, sources, dated vs evergreen notes, and path safety.

Indexed: ``MEMORY.md``, ``memory/**/*.md`` and configured ``extraPaths`` (directories or ``.md``
files, relative to the workspace, ``~`` expanded). Links are followed only while their target stays
inside an allowed root; files are deduplicated by real path. Hidden directories (``memory/.dreams``
holds mdrecall's own state), ``.git`` and ``node_modules`` are never walked.

Reads (``memory_get`` and the indexer) go through :func:`read_memory_bytes`: one descriptor, opened
without following links and checked after opening (regular file, no hard link to a file outside).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
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
    abspath: str  # absolute, as discovered (not resolved); a string: discovery makes one per file
    rel_path: str  # workspace-relative with "/", the stored path
    source: str

    @property
    def path(self) -> Path:
        return Path(self.abspath)


def rel_path_for(workspace: Path, path: Path | str) -> str:
    # Fast path for the common case (a path built under the workspace): relpath costs ~20 µs a file.
    ws, text = str(workspace), str(path)
    if text.startswith(ws + os.sep) and os.sep + ".." + os.sep not in text and os.sep + "." + os.sep not in text:
        return text[len(ws) + 1 :].replace(os.sep, "/")
    return Path(os.path.relpath(path, workspace)).as_posix()


@functools.lru_cache(maxsize=8192)  # asked per hit several times a search (dates, decay, supersession)
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
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None


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
    """Real paths under which memory files may live (files or directories).

    ``MEMORY.md`` is the workspace's own entry: a link there may point at another memory file but
    never widens the roots (resolving it would make its target, anywhere on disk, an allowed root).
    The ``memory/`` directory and configured ``extraPaths`` are resolved: linking them elsewhere is
    a deliberate setup.
    """
    real_ws = os.path.realpath(workspace)
    roots = [Path(real_ws) / ROOT_MEMORY_FILE]
    roots += [Path(os.path.realpath(r)) for r in (workspace / MEMORY_DIR, *extra_path_roots(workspace, config))]
    return roots


def _inside(path: Path, roots: list[Path]) -> bool:
    """Whether the normalised absolute ``path`` is one of ``roots`` or inside one, on strings (what
    ``root in path.parents`` answers, without building every parent: recording reads a file per hit)."""
    text = str(path)
    return any(path_inside(text, str(root)) for root in roots)


def _inside_str(real: str, roots: list[str]) -> bool:
    """``_inside`` for normalised absolute path strings (discovery runs it once per file)."""
    return any(path_inside(real, root) for root in roots)


def path_inside(real: str, root: str) -> bool:
    """Whether the resolved absolute path ``real`` is the folder ``root`` or inside it, on strings
    (``Path.is_relative_to`` costs more than the ``realpath`` before it: discovery runs this per file,
    and the search per file it reads the first time). ``/x/ws2`` is not inside ``/x/ws``."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _walk_markdown(
    directory: str, rel_dir: str, roots: list[str], seen_dirs: set[str], found: list[tuple[str, str | None, str, bool]]
) -> None:
    """Append ``(path, real path or None, stored path, inside)`` for each Markdown file under
    ``directory`` (``rel_dir``: its stored path and a slash, or "" for the workspace itself).

    Plain strings, not ``Path`` objects: at 100k files, building a ``Path`` per file was two thirds
    of a no-op sync. A file that is not itself a link lies in its directory's real path, so its real
    path is that plus its name (None: resolve it later), and it is inside the allowed roots when its
    directory is (``inside``: checked once per directory, not per file; False: check the file).
    Its stored path is the directory's plus its name: names starting with "." are skipped, so none
    is "." or "..".
    """
    real_dir = os.path.realpath(directory)
    if real_dir in seen_dirs:  # symlink loops
        return
    seen_dirs.add(real_dir)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    dir_inside = _inside_str(real_dir, roots)
    real_prefix = real_dir if real_dir.endswith(os.sep) else real_dir + os.sep
    for entry in entries:
        name = entry.name
        if name.startswith(".") or name in SKIP_DIR_NAMES:
            continue
        try:
            if entry.is_dir(follow_symlinks=True):
                if entry.is_symlink() and not _inside_str(os.path.realpath(entry.path), roots):
                    continue
                _walk_markdown(entry.path, rel_dir + name + "/", roots, seen_dirs, found)
            elif name.endswith(".md") and entry.is_file(follow_symlinks=True):
                if entry.is_symlink():
                    found.append((entry.path, None, rel_dir + name, False))
                else:
                    found.append((entry.path, real_prefix + name, rel_dir + name, dir_inside))
        except OSError:
            continue


def _rel_dir(workspace: Path, directory: str) -> str:
    """The stored path of a directory discovery walks, with a trailing slash ("" for the workspace)."""
    rel = rel_path_for(workspace, directory)
    return "" if rel == "." else rel + "/"


def discover_memory_files(workspace: Path, config: MemoryConfig) -> list[MemoryFile]:
    """All memory-source Markdown files, deduplicated by real path, links kept inside allowed roots."""
    roots = [str(r) for r in allowed_roots(workspace, config)]
    ws = str(workspace)
    candidates: list[tuple[str, str | None, str, bool]] = []
    root_file = os.path.join(ws, ROOT_MEMORY_FILE)
    if os.path.isfile(root_file):
        candidates.append((root_file, None, rel_path_for(workspace, root_file), False))
    memory_dir = os.path.join(ws, MEMORY_DIR)
    seen_dirs: set[str] = set()
    if os.path.isdir(memory_dir):
        _walk_markdown(memory_dir, _rel_dir(workspace, memory_dir), roots, seen_dirs, candidates)
    for extra in extra_path_roots(workspace, config):
        if extra.is_dir():
            _walk_markdown(str(extra), _rel_dir(workspace, str(extra)), roots, seen_dirs, candidates)
        elif extra.is_file() and extra.name.endswith(".md"):
            candidates.append((str(extra), None, rel_path_for(workspace, extra), False))

    files: list[MemoryFile] = []
    seen_real: set[str] = set()
    for path, real, rel, inside in candidates:
        real = real or os.path.realpath(path)
        if real in seen_real or not (inside or _inside_str(real, roots)):
            continue
        seen_real.add(real)
        files.append(MemoryFile(path, rel, "memory"))
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


# --- reading a memory file safely --------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: a FIFO swapped in must not hang the read (it is refused as not a regular file).
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_without_links(real: Path) -> int:
    """Open ``real`` (already resolved: no component is a link) component by component, refusing to
    follow a link anywhere: a directory or the file swapped for a link since it was resolved fails
    here instead of leading outside the allowed roots."""
    if not (os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")):  # pragma: no cover - not POSIX
        fd = os.open(real, os.O_RDONLY)
        if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (os.lstat(real).st_dev, os.lstat(real).st_ino):
            os.close(fd)
            raise PathError("outside_workspace", f"{real.name} changed while it was being opened; try again")
        return fd
    parts = real.parts
    fd = os.open(parts[0], _DIR_FLAGS)
    try:
        for name in parts[1:-1]:
            next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _names_inside(workspace: Path, config: MemoryConfig, st: os.stat_result) -> int:
    """How many memory files (by discovery) are names of the inode ``st`` describes."""
    count = 0
    for file in discover_memory_files(workspace, config):
        try:
            other = os.stat(file.abspath)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            count += 1
    return count


def read_memory_bytes(
    workspace: Path,
    config: MemoryConfig,
    real: Path | str,
    max_bytes: int,
    *,
    names_inside: Callable[[os.stat_result], int] | None = None,
) -> bytes:
    """The bytes of the memory file at ``real`` (a resolved path inside the allowed roots), read
    through one descriptor that is checked after opening.

    * No link is followed on the way (see ``_open_without_links``), so the file read is the one the
      path check saw, even if a component is swapped for a link in between.
    * It must be a regular file.
    * A hard link (``st_nlink > 1``) is read only when every one of its names is a memory file: a
      hard link is indistinguishable from its target, so ``memory/x.md`` linked to ``/etc/passwd``
      would otherwise pass every path check. ``names_inside`` counts those names (the sync passes
      its own listing; by default the memory files are discovered again).

    Raises PathError (``outside_workspace``, ``not_memory_path``, ``not_found``, ``invalid_path``).
    """
    real = Path(real)
    try:
        fd = _open_without_links(real)
    except FileNotFoundError:
        raise PathError("not_found", f"{real.name} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise PathError("outside_workspace", f"{real.name} is (or is reached through) a link that changed "
                            "since it was checked; refusing to follow it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PathError("not_memory_path", f"{real.name} is not a regular file")
        if st.st_nlink > 1:
            inside = names_inside(st) if names_inside is not None else _names_inside(workspace, config, st)
            if inside < st.st_nlink:
                raise PathError(
                    "outside_workspace",
                    f"{real.name} is a hard link with {st.st_nlink} names, {st.st_nlink - inside} of them outside "
                    "the memory files; refusing to read it (copy the note instead of linking it)",
                )
        if st.st_size > max_bytes:
            raise PathError("invalid_path", f"{real.name} is larger than limits.maxFileBytes ({st.st_size} > {max_bytes} bytes)")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise PathError("invalid_path", f"{real.name} is larger than limits.maxFileBytes ({max_bytes} bytes)")
        return b"".join(chunks)
    finally:
        os.close(fd)



#: Linux names each open descriptor's file under /proc/self/fd: its resolved path in one readlink,
#: where ``realpath`` takes an lstat per component (and more Python than the read itself).
_FD_LINKS = os.path.isdir("/proc/self/fd")
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def read_inside(full: str, root: str | None) -> tuple[os.stat_result, bytes] | None:
    """The stat and bytes of the regular file at ``full``; None when it cannot be read, is not a
    regular file, or (``root`` given: a resolved folder) resolves outside ``root``.

    For the search's caches of indexed files (line lengths, speakers, message times), on first
    sight of a file. Where the system names an open descriptor's file (Linux), the check is made on
    the file opened, so a link swapped in between cannot lead the read outside; elsewhere the path
    is resolved before opening. Opened non-blocking: a FIFO named like a note does not hang a search.
    """
    return _open_inside(full, root, read=True)


def stat_inside(full: str, root: str | None) -> os.stat_result | None:
    """The stat of the regular file at ``full``, checked as :func:`read_inside` checks it."""
    found = _open_inside(full, root, read=False)
    return found[0] if found is not None else None


def _open_inside(full: str, root: str | None, *, read: bool) -> tuple[os.stat_result, bytes] | None:
    try:
        if root is not None and not _FD_LINKS and not path_inside(os.path.realpath(full), root):
            return None
        fd = os.open(full, _READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if root is not None and _FD_LINKS and not path_inside(_opened_path(fd, full), root):
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if not read:
            return st, b""
        # One read of the size fstat gave, and more until the end (a file may grow meanwhile).
        chunks = [os.read(fd, st.st_size + 1)]
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 20))
        return st, b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _opened_path(fd: int, full: str) -> str:
    """The resolved path of the file open at ``fd``; where the system will not name it (a sandbox
    that restricts /proc), ``full`` resolved now, as on systems without /proc."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(full)
