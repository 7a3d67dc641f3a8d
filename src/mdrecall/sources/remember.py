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

Appending never replaces the file, so it cannot drop an edit another program makes meanwhile: the
entry goes in with one ``O_APPEND`` write (atomic with respect to other writers, which POSIX
guarantees for appends), fsynced, through a symlinked note to its target. A new note is created
whole (temp file, then a hard link that fails if someone created it first). If the note was
replaced while we wrote (an editor's save-by-rename), the entry is appended again to the new file.
Replacing a memory file (``import --overwrite``) goes through the shared compare-and-swap writer,
:func:`mdrecall.markdown_write.write_markdown`, whose directory lock this module shares.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall.errors import MdrecallError, PathError
from mdrecall.markdown_write import directory_lock, fsync_dir
from mdrecall.sources.redact import redact_secrets
from mdrecall.sources.workspace import allowed_roots
from mdrecall.types import format_citation

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig

#: The most characters one entry may hold (a note, not a document).
MAX_TEXT_CHARS = 8000
PROVENANCE = "mdrecall:remembered"
#: The provenance comment as it sits on an entry's first line (what :func:`strip_provenance` removes).
_PROVENANCE_COMMENT = re.compile(r"[ \t]*<!-- mdrecall:remembered\b[^>\n]*-->")

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


def strip_provenance(text: str) -> str:
    """``text`` without the provenance comments :func:`remember` writes: what is indexed and shown in
    search snippets (an agent's context need not pay for them; ``memory_get`` still shows the file
    as it is). Lines stay where they are, so citations hold."""
    return _PROVENANCE_COMMENT.sub("", text) if PROVENANCE in text else text


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
    heading: str | None = None,
) -> Remembered:
    """Append ``text`` to ``target`` (default: today's daily note) and say where it went.

    In a file organised under ``##`` headings (``MEMORY.md``), the entry goes at the end of a
    section, never under whichever heading happens to be last: ``heading`` (made if missing), else
    the section the text's first word names ("Decision: ..." under "## Decisions"), else "##
    Remembered" (see :func:`place_entry`).

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
    existed = path.exists()
    n = entry.count("\n")
    if existed and (heading or not _is_dated(rel)):
        start_line = _remember_in_section(path, entry, body, heading)
        if start_line is not None:
            return Remembered(rel, start_line, start_line + n - 1, entry.rstrip("\n"), redacted, False)
    header = f"# {Path(rel).stem}\n\n" if _is_dated(rel) else ""
    if heading:
        header += f"## {heading.strip()}\n\n"
    start_line = append_markdown(path, entry, header=header)
    return Remembered(rel, start_line, start_line + n - 1, entry.rstrip("\n"), redacted, not existed)


#: The section an entry goes to in a file with ``##`` headings when nothing names another.
REMEMBERED_HEADING = "Remembered"
_SECTION = re.compile(r"^(#{2,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def _stem(word: str) -> str:
    """The first four letters: ``Decision:``, ``Decided`` and ``Decisions`` meet on ``deci``, ``Prefers``
    and ``Preferences`` on ``pref`` (shorter words name no section)."""
    letters = re.sub(r"[^a-z]", "", word.lower())
    return letters[:4] if len(letters) >= 4 else ""


def _sections(lines: list[str]) -> list[tuple[int, int, str]]:
    """(heading line index, level, title) of every ``##``-or-deeper heading outside code fences."""
    out: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _SECTION.match(line)
        if match:
            out.append((i, len(match.group(1)), match.group(2).strip()))
    return out


def place_entry(current: str, entry: str, body: str, heading: str | None) -> tuple[str, int] | None:
    """(the file's new text, the 1-based line the entry starts on) with ``entry`` at the end of its
    section, or None when the file has no ``##`` headings and no ``heading`` is asked for (a plain
    append is right then). The section: ``heading`` (made at the end if missing), else the one whose
    title the text's first word names, else ``## Remembered`` (made at the end if missing)."""
    lines = current.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections = _sections(lines)
    if not sections and not heading:
        return None
    chosen = None
    if heading:
        wanted = heading.strip().lower()
        chosen = next((s for s in sections if s[2].lower() == wanted), None)
        title = heading.strip()
    else:
        first = re.split(r"[\s:,.;]+", body.strip(), maxsplit=1)[0]
        stem = _stem(first)
        if stem:
            chosen = next((s for s in sections if _stem(s[2].split()[0]) == stem), None)
        if chosen is None:
            chosen = next((s for s in sections if s[2].lower() == REMEMBERED_HEADING.lower()), None)
        title = REMEMBERED_HEADING
    new = entry.rstrip("\n").split("\n")
    if chosen is None:  # a new section at the end
        while lines and not lines[-1].strip():
            lines.pop()
        head = [*lines, ""] if lines else []
        out = [*head, f"## {title}", "", *new]
        return "\n".join(out) + "\n", len(head) + 3
    index, level, _ = chosen
    end = next((i for i, lvl, _t in sections if i > index and lvl <= level), len(lines))
    last = end - 1
    while last > index and not lines[last].strip():
        last -= 1
    if last == index:  # an empty section: a blank line under its heading, then the entry
        rest = lines[index + 1 :]
        while rest and not rest[0].strip():
            rest.pop(0)
        out = [*lines[: index + 1], "", *new, *([""] if rest else []), *rest]
        return "\n".join(out) + "\n", index + 3
    previous = lines[last]
    gap = [] if previous.lstrip().startswith(("- ", "* ")) or previous.startswith(("  ", "\t")) else [""]
    out = [*lines[: last + 1], *gap, *new, *lines[last + 1 :]]
    return "\n".join(out) + "\n", last + 2 + len(gap)


def _remember_in_section(path: Path, entry: str, body: str, heading: str | None) -> int | None:
    """Write ``entry`` into its section of ``path`` (compare-and-swap: an edit made meanwhile is
    merged, never lost); the line it starts on, or None when a plain append is right."""
    from mdrecall.markdown_write import write_markdown

    current = _read(path)
    if current is None:
        return None
    placed = place_entry(current, entry, body, heading)
    if placed is None:
        return None
    new, start = placed
    if new.startswith(current) and new[len(current) :].lstrip("\n") == entry:
        return None  # the section is the file's last: appending is the same, and safer
    result = write_markdown(path, new, base=current)
    if result.merged:  # another edit came in meanwhile: find where the entry ended up
        lines = result.text.split("\n")
        first = entry.split("\n", 1)[0]
        start = next((i + 1 for i, line in enumerate(lines) if line == first), start)
    return start


def _is_dated(rel: str) -> bool:
    return re.fullmatch(r"memory/(?:[^/]+/)*\d{4}-\d{2}-\d{2}\.md", rel) is not None


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="strict")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise PathError("invalid_path", f"{path.name} is not UTF-8 text; not writing into it") from None


def _separator(current: str) -> str:
    """What goes between the file's text and a new list item."""
    if not current.strip():
        return ""
    if not current.endswith("\n"):
        current += "\n"
        lead = "\n"
    else:
        lead = ""
    last = current.rstrip("\n").rsplit("\n", 1)[-1]
    if current.endswith("\n\n") or last.lstrip().startswith(("- ", "* ")) or last.startswith(("  ", "\t")):
        return lead  # continues a list, or a blank line is there already
    return lead + "\n"  # a list item after a heading or paragraph needs a blank line


def append_markdown(path: Path, entry: str, *, header: str = "") -> int:
    """Append ``entry`` to ``path`` (created with ``header`` first if missing); returns the 1-based
    line the entry starts on. One ``O_APPEND`` write: nothing another writer wrote is ever replaced."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    with directory_lock(target.parent):  # our own writers queue; other programs need no lock
        for _ in range(20):
            if not target.exists():
                if _create_exclusive(target, header + entry):
                    return header.count("\n") + 1
                continue  # created by someone else meanwhile: append to theirs
            fd = os.open(target, os.O_WRONLY | os.O_APPEND)
            try:
                opened = os.fstat(fd)
                data = (_separator(_read(target) or "") + entry).encode("utf-8")
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
                end = os.lseek(fd, 0, os.SEEK_CUR)
            finally:
                os.close(fd)
            try:
                now = os.stat(target)
            except FileNotFoundError:
                continue
            if (now.st_ino, now.st_dev) != (opened.st_ino, opened.st_dev):
                continue  # replaced while we wrote (a save-by-rename): our bytes went to the old file
            with target.open("rb") as handle:
                before = handle.read(end - len(data))
            separator_lines = data[: len(data) - len(entry.encode("utf-8"))].count(b"\n")
            return before.count(b"\n") + separator_lines + 1
    raise MdrecallError(f"{path} kept being replaced while appending; try again")


def _create_exclusive(target: Path, text: str) -> bool:
    """Create ``target`` holding ``text`` atomically; False if it exists already."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        fsync_dir(target.parent)
        return True
    finally:
        os.unlink(tmp)
