"""Writing a memory: ``remember(text)`` appends one entry, with provenance, to today's daily note
(``memory/YYYY-MM-DD.md``) or to a named memory file. The CLI's ``mdrecall remember``, the agent
tool ``memory_write`` and the Python API all go through :func:`remember`.

What is written is one Markdown list item; its first line carries an HTML comment saying when and
through what it was written::

    - Deploys need a green canary for 30 minutes. <!-- mdrecall:remembered at=2026-12-01T10:31:29Z via=mcp -->

The text is untrusted (a model may send it): secrets are redacted before it reaches the file, control
characters are dropped, and ``<!--`` is neutralised so a memory cannot forge mdrecall's own markers
(promotion provenance, review-queue candidates). Targets are memory files only (``MEMORY.md``,
``memory/**/*.md``, not ``memory/.dreams/`` or ``memory/dreaming/``), checked like ``read_file`` paths.

The file is replaced atomically (temp file, fsync, rename), through a symlinked note to its target,
and an edit another program made since the file was read is kept: the entry is re-appended to what
the file holds just before the rename. :func:`replace_markdown` is the one place that does this; when the
shared helper ``mdrecall.markdown_write.write_markdown`` lands (compare-and-swap with
``renameat2``), it replaces that function's body.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall.errors import MdrecallError, PathError
from mdrecall.sources.redact import redact_secrets
from mdrecall.sources.workspace import allowed_roots
from mdrecall.types import format_citation

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig

#: The most characters one entry may hold (a note, not a document).
MAX_TEXT_CHARS = 8000
PROVENANCE = "mdrecall:remembered"

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_OWN_OUTPUT = re.compile(r"^memory/(?:dreaming|\.dreams)(?:/|$)")
_VIA = re.compile(r"[^\w:.@/-]")


class RememberError(MdrecallError, ValueError):
    """The text cannot be written as given (empty, too long); the message says why."""


@dataclass(frozen=True, slots=True)
class Remembered:
    """Where an entry went: its file, its lines, a citation ``read_file`` accepts back."""

    path: str
    start_line: int
    end_line: int
    #: The entry as written (redacted, with its provenance comment).
    text: str
    #: Secrets replaced by ``[REDACTED:...]`` markers.
    redacted: int
    #: The file did not exist before.
    created: bool

    @property
    def citation(self) -> str:
        return format_citation(self.path, self.start_line, self.end_line)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "citation": self.citation,
            "text": self.text,
            "redacted": self.redacted,
            "created": self.created,
        }


def daily_note_path(now: datetime | None = None, timezone: str | None = None) -> str:
    """``memory/YYYY-MM-DD.md`` for ``now`` in ``timezone`` (IANA name; default: the local zone),
    the same day the pre-compaction flush writes to."""
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.astimezone()
    if timezone:
        from zoneinfo import ZoneInfo

        local = now.astimezone(ZoneInfo(timezone))
    else:
        local = now.astimezone()
    return f"memory/{local.strftime('%Y-%m-%d')}.md"


def check_target(workspace: Path, config: MemoryConfig, target: str) -> tuple[Path, str]:
    """(absolute path to write, normalised relative path) for a caller-supplied target, or PathError
    with the codes ``read_file`` uses (``invalid_path``, ``not_memory_path``, ``outside_workspace``)."""
    if not isinstance(target, str) or not target.strip():
        raise PathError("invalid_path", "target is required (e.g. MEMORY.md or memory/projects.md)")
    text = target.strip()
    if "\x00" in text or "\\" in text or text.startswith(("/", "~")):
        raise PathError("invalid_path", f"target must be a workspace-relative path with '/' separators: {target!r}")
    while text.startswith("./"):
        text = text[2:]
    parts = text.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PathError("invalid_path", f"target must not contain empty, '.' or '..' parts: {target!r}")
    if not text.endswith(".md") or not (text == "MEMORY.md" or (parts[0] == "memory" and len(parts) > 1)):
        raise PathError("not_memory_path", f"{target!r} is not a memory file: write to MEMORY.md or memory/**/*.md")
    if _OWN_OUTPUT.match(text):
        raise PathError("not_memory_path", f"{target!r} is mdrecall's own dreaming output, not a memory file")
    path = workspace / text
    # The real location (links followed, also of folders that exist already) must stay inside the roots.
    real = Path(os.path.realpath(path))
    roots = [Path(os.path.realpath(r)) for r in allowed_roots(workspace, config)]
    if not any(real == root or real.is_relative_to(root) for root in roots):
        raise PathError("outside_workspace", f"{target!r} resolves outside the memory folders")
    if real.exists() and not real.is_file():
        raise PathError("invalid_path", f"{target!r} is not a regular file")
    return path, text


def clean_text(text: str) -> tuple[str, int]:
    """(text fit to write, secrets redacted): redacted, control characters dropped, ``<!--`` defused."""
    if not isinstance(text, str) or not text.strip():
        raise RememberError("text is required: the fact to remember, e.g. 'Deploys need a green canary'")
    if len(text) > MAX_TEXT_CHARS:
        raise RememberError(f"text is {len(text)} characters; one memory holds at most {MAX_TEXT_CHARS}")
    body = text.replace("\r\n", "\n").replace("\r", "\n")
    redacted = redact_secrets(body)
    count = redacted.count("[REDACTED:") - body.count("[REDACTED:")
    body = _CONTROL.sub("", redacted).replace("<!--", "&lt;!--").strip()
    lines = [line.rstrip() for line in body.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines), max(0, count)


def format_entry(text: str, now: datetime, via: str) -> str:
    """One list item: the first line with the provenance comment, later lines indented under it."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    first, *rest = text.split("\n")
    first = first[2:] if first.startswith(("- ", "* ")) else first
    via = _VIA.sub("_", via)[:80] or "api"
    head = f"- {first} <!-- {PROVENANCE} at={stamp} via={via} -->"
    return "\n".join([head, *[f"  {line}" if line else "" for line in rest]]) + "\n"


def remember(
    workspace: Path | str,
    text: str,
    *,
    config: MemoryConfig | None = None,
    target: str | None = None,
    now: datetime | None = None,
    via: str = "api",
) -> Remembered:
    """Append ``text`` to ``target`` (default: today's daily note) and say where it went.

    The caller re-indexes (``manager.sync()``) to make it searchable at once; searches also pick it
    up on their own (the watcher, or the check before each search)."""
    from mdrecall.config import load_config

    root = Path(workspace).expanduser()
    if not root.is_dir():
        raise MdrecallError(f"workspace {root} is not a directory")
    config = config if config is not None else load_config(root)
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.astimezone()
    body, redacted = clean_text(text)
    path, rel = check_target(root, config, target or daily_note_path(now, config.flush.timezone))
    entry = format_entry(body, now, via)
    base = _read(path)
    created = base is None
    header = f"# {Path(rel).stem}\n\n" if created and rel.startswith("memory/") and _is_dated(rel) else ""
    written = replace_markdown(path, _appended(base, entry, header), base=base, rebase=lambda now_text: _appended(now_text, entry, header))
    total = len(written.split("\n")) - (1 if written.endswith("\n") else 0)
    n = entry.count("\n")
    return Remembered(rel, total - n + 1, total, entry.rstrip("\n"), redacted, created)


def _is_dated(rel: str) -> bool:
    return re.fullmatch(r"memory/(?:[^/]+/)*\d{4}-\d{2}-\d{2}\.md", rel) is not None


def _appended(current: str | None, entry: str, header: str = "") -> str:
    if current is None or not current.strip():
        return header + entry
    if not current.endswith("\n"):
        current += "\n"
    last = current.rstrip("\n").rsplit("\n", 1)[-1]
    if current.endswith("\n\n") or last.lstrip().startswith(("- ", "* ")) or last.startswith(("  ", "\t")):
        return current + entry  # continues a list, or a blank line is there already
    return current + "\n" + entry  # a list item after a heading or paragraph needs a blank line


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="strict")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise PathError("invalid_path", f"{path.name} is not UTF-8 text; not writing into it") from None


@contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """One mdrecall writer per directory at a time (an ``flock`` on the directory, as the shared
    Markdown writer takes), so two remembers never race each other."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def replace_markdown(path: Path, new: str, *, base: str | None, rebase: Callable[[str | None], str] | None = None) -> str:
    """Replace ``path`` (through symlinks) with ``new``, computed from ``base`` (None: no file);
    returns what the file holds afterwards.

    If the file changed since ``base`` was read, ``rebase(current)`` computes the text again from
    what it holds now (checked again right before the rename); without ``rebase`` that is an error
    and nothing is written. What is left: an edit landing in the microseconds between that last
    check and the rename. The shared compare-and-swap helper closes it: swap this body for
    ``return write_markdown(path, new, base=base).text`` when ``mdrecall.markdown_write`` lands.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    with _directory_lock(target.parent):
        for _ in range(50):
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                    handle.write(new)
                    handle.flush()
                    os.fsync(handle.fileno())
                if base is not None:
                    os.chmod(tmp, target.stat().st_mode & 0o7777)
                current = _read(target)
                if current != base:  # someone wrote meanwhile: never overwrite their edit
                    if rebase is None:
                        raise MdrecallError(f"{path} changed while writing it; nothing written")
                    base, new = current, rebase(current)
                    continue
                os.replace(tmp, target)
                tmp = ""
            finally:
                if tmp:
                    os.unlink(tmp)
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            return new
    raise MdrecallError(f"{path} kept changing while writing; nothing written, try again")
