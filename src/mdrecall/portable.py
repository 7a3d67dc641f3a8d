"""Export and import a workspace's memories as JSON Lines, the same for every backend.

The memory files are the truth (the index is a cache any backend rebuilds from them), so an export
is the memory files themselves, byte for byte, and an import writes them into a workspace and asks
its manager to index them. Both are written against :class:`~mdrecall.contract.MemorySearchManager`
(``workspace``, ``config``, ``backend``, ``sync``, ``read_file``) and the file discovery every backend
shares, so exporting from one backend and importing into another round-trips.

Format ``mdrecall-export`` version 1: UTF-8 JSON, one object per line, in this order::

    {"type": "header", "format": "mdrecall-export", "version": 1, "exportedAt": "2026-12-01T10:31:29Z",
     "generator": "mdrecall 0.1.0", "backend": "builtin", "workspace": "agent-ws"}
    {"type": "file", "path": "MEMORY.md", "source": "memory", "encoding": "utf-8", "text": "# Memory\\n...",
     "bytes": 1234, "sha256": "<hex of the bytes>", "mtime": "2026-11-05T09:12:00Z"}
    {"type": "file", "path": "memory/blob.md", ..., "encoding": "base64", "data": "AAEC..."}   (not UTF-8)
    {"type": "end", "files": 12, "bytes": 34567, "skipped": [{"path": "...", "reason": "..."}]}

* ``path`` is workspace-relative with ``/``; only ``MEMORY.md`` and ``memory/**/*.md`` are exported
  (extra paths outside the workspace and session transcripts are listed under ``skipped``), and only
  those are imported.
* ``sha256`` and ``bytes`` describe the file's bytes; ``text`` (or ``data``) must match them.
* Unknown keys are ignored and unknown ``type`` values skipped, so later versions can add records;
  a different ``format`` or a higher ``version`` is refused.
* An import reads and checks the whole stream before writing anything: a truncated file (no ``end``
  record), a bad checksum or an unsafe path writes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from mdrecall.errors import MdrecallError, PathError

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager

FORMAT = "mdrecall-export"
VERSION = 1

OnConflict = Literal["skip", "overwrite"]


class ImportFormatError(MdrecallError, ValueError):
    """The stream is not a valid export; the message says which line and why. Nothing was written."""


@dataclass(frozen=True, slots=True)
class ExportedFile:
    path: str
    data: bytes
    mtime: str | None = None
    source: str = "memory"

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "file", "path": self.path, "source": self.source}
        try:
            out.update(encoding="utf-8", text=self.data.decode("utf-8"))
        except UnicodeDecodeError:
            out.update(encoding="base64", data=base64.b64encode(self.data).decode("ascii"))
        out.update(bytes=len(self.data), sha256=hashlib.sha256(self.data).hexdigest(), mtime=self.mtime)
        return out


@dataclass(slots=True)
class ExportReport:
    files: int = 0
    bytes: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "bytes": self.bytes, "skipped": list(self.skipped)}


@dataclass(slots=True)
class ImportReport:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: Files that exist with other content and were kept (``on_conflict="skip"``).
    conflicts: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False
    indexed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "written": list(self.written),
            "unchanged": list(self.unchanged),
            "conflicts": list(self.conflicts),
            "skipped": list(self.skipped),
            "dryRun": self.dry_run,
            "indexed": self.indexed,
        }


def _exportable(rel: str) -> str | None:
    """Why ``rel`` is not exported, or None."""
    if rel.startswith("/") or rel.startswith("../"):
        return "outside the workspace (an extra path): export it from where it lives"
    if rel != "MEMORY.md" and not rel.startswith("memory/"):
        return "not under MEMORY.md or memory/ (an extra path)"
    if rel.startswith(("memory/.dreams/", "memory/dreaming/")):
        return "mdrecall's own dreaming output"
    return None


def memory_files(manager: MemorySearchManager) -> tuple[list[ExportedFile], list[dict[str, str]]]:
    """The workspace's memory files as they are on disk now, and what was left out (with why)."""
    from mdrecall.sources.workspace import discover_memory_files, resolve_memory_path

    files: list[ExportedFile] = []
    skipped: list[dict[str, str]] = []
    for found in discover_memory_files(manager.workspace, manager.config):
        rel = found.rel_path
        reason = _exportable(rel)
        if reason is not None:
            skipped.append({"path": rel, "reason": reason})
            continue
        real, _ = resolve_memory_path(manager.workspace, manager.config, rel)  # the read_file path checks
        data = real.read_bytes()
        mtime = datetime.fromtimestamp(real.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        files.append(ExportedFile(rel, data, mtime))
    if "sessions" in manager.config.sources:
        skipped.append({"path": manager.config.sessions.dir, "reason": "session transcripts are not exported"})
    return sorted(files, key=lambda f: f.path), skipped


def export_records(manager: MemorySearchManager, *, now: datetime | None = None) -> Iterator[dict[str, Any]]:
    """The export of ``manager``'s workspace, record by record (header, files, end)."""
    from mdrecall import __version__

    files, skipped = memory_files(manager)
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    yield {"type": "header", "format": FORMAT, "version": VERSION, "exportedAt": stamp,
           "generator": f"mdrecall {__version__}", "backend": manager.backend, "workspace": manager.workspace.name}  # fmt: skip
    for item in files:
        yield item.record()
    yield {"type": "end", "files": len(files), "bytes": sum(len(f.data) for f in files), "skipped": skipped}


def export_jsonl(manager: MemorySearchManager, out: IO[str], *, now: datetime | None = None) -> ExportReport:
    """Write the export to ``out``; returns what it holds."""
    report = ExportReport()
    for record in export_records(manager, now=now):
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        if record["type"] == "file":
            report.files += 1
            report.bytes += int(record["bytes"])
        elif record["type"] == "end":
            report.skipped = list(record["skipped"])
    out.flush()
    return report


def read_export(lines: Iterable[str]) -> list[ExportedFile]:
    """Parse and check a whole export; ImportFormatError (naming the line) if anything is wrong."""
    files: list[ExportedFile] = []
    header = end = None
    seen: set[str] = set()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise ImportFormatError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise ImportFormatError(f"line {number}: expected a JSON object")
        kind = record.get("type")
        if header is None:
            if kind != "header" or record.get("format") != FORMAT:
                raise ImportFormatError(f"line {number}: not an {FORMAT} file (the first line must be its header)")
            version = record.get("version")
            if not isinstance(version, int) or version > VERSION:
                raise ImportFormatError(f"line {number}: format version {version!r}; this mdrecall reads up to {VERSION}")
            header = record
            continue
        if end is not None:
            raise ImportFormatError(f"line {number}: data after the end record")
        if kind == "file":
            files.append(_file_from(record, number))
            if files[-1].path in seen:
                raise ImportFormatError(f"line {number}: {files[-1].path} appears twice")
            seen.add(files[-1].path)
        elif kind == "end":
            end = record
            if end.get("files") != len(files):
                raise ImportFormatError(f"line {number}: the end record counts {end.get('files')} files, the stream holds {len(files)}")
    if header is None:
        raise ImportFormatError("empty input: not an export")
    if end is None:
        raise ImportFormatError("the export is truncated (no end record); nothing imported")
    return files


def _file_from(record: dict[str, Any], number: int) -> ExportedFile:
    path = record.get("path")
    if not isinstance(path, str) or not path:
        raise ImportFormatError(f"line {number}: a file record without a path")
    parts = path.split("/")
    if path.startswith(("/", "~")) or "\\" in path or "\x00" in path or any(p in ("", ".", "..") for p in parts):
        raise ImportFormatError(f"line {number}: unsafe path {path!r} (workspace-relative paths only)")
    encoding = record.get("encoding")
    try:
        if encoding == "utf-8" and isinstance(record.get("text"), str):
            data = record["text"].encode("utf-8")
        elif encoding == "base64" and isinstance(record.get("data"), str):
            data = base64.b64decode(record["data"], validate=True)
        else:
            raise ImportFormatError(f"line {number}: {path}: encoding must be utf-8 (with text) or base64 (with data)")
    except (ValueError, UnicodeEncodeError) as exc:
        if isinstance(exc, ImportFormatError):
            raise
        raise ImportFormatError(f"line {number}: {path}: {exc}") from None
    if record.get("sha256") != hashlib.sha256(data).hexdigest() or record.get("bytes") != len(data):
        raise ImportFormatError(f"line {number}: {path}: content does not match its sha256/bytes (damaged export)")
    mtime = record.get("mtime")
    return ExportedFile(path, data, mtime if isinstance(mtime, str) else None, str(record.get("source") or "memory"))


def import_files(
    manager: MemorySearchManager,
    files: list[ExportedFile],
    *,
    on_conflict: OnConflict = "skip",
    dry_run: bool = False,
    index: bool = True,
) -> ImportReport:
    """Write ``files`` into ``manager``'s workspace, then index them (``manager.sync()``).

    A file that exists with the same bytes is left alone; with other bytes it is kept
    (``on_conflict="skip"``, reported) or replaced atomically (``"overwrite"``). Paths are checked
    like ``memory_write`` targets: only memory files inside the workspace."""
    from mdrecall.markdown_write import write_markdown
    from mdrecall.sources.remember import check_target

    report = ImportReport(dry_run=dry_run)
    planned: list[tuple[Path, ExportedFile, bytes | None]] = []
    for item in files:
        reason = _exportable(item.path)
        if reason is not None:
            report.skipped.append({"path": item.path, "reason": reason})
            continue
        try:
            path, _ = check_target(manager.workspace, manager.config, item.path)
        except PathError as exc:
            report.skipped.append({"path": item.path, "reason": f"{exc} [{exc.code}]"})
            continue
        current = path.read_bytes() if path.is_file() else None
        if current == item.data:
            report.unchanged.append(item.path)
        elif current is not None and on_conflict == "skip":
            report.conflicts.append(item.path)
        else:
            planned.append((path, item, current))
    for path, item, current in planned:
        report.written.append(item.path)
        if dry_run:
            continue
        if current is None:
            _create(path, item.data, _timestamp(item.mtime))
        else:
            try:
                text, base = item.data.decode("utf-8"), current.decode("utf-8")
            except UnicodeDecodeError:
                _replace_bytes(path, item.data)
            else:
                write_markdown(path, text, base=base)
    if index and not dry_run and report.written:
        manager.sync()
        report.indexed = True
    return report


def _timestamp(mtime: str | None) -> float | None:
    """The export's ``mtime`` (``%Y-%m-%dT%H:%M:%SZ``) as a POSIX time (None: absent or unreadable)."""
    if not mtime:
        return None
    try:
        return datetime.strptime(mtime, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _create(path: Path, data: bytes, mtime: float | None = None) -> None:
    """A new file, atomically, never over one that appeared meanwhile (link fails if it exists).
    ``mtime``: the exported modification time, kept so a restored workspace reads as it was."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise MdrecallError(f"{path} appeared while importing; kept it, run the import again") from None
    finally:
        os.unlink(tmp)


def _replace_bytes(path: Path, data: bytes) -> None:
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, os.path.realpath(path))
