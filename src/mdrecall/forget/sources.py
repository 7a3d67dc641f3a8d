"""Removing the chosen lines from the files themselves, before any derived store is touched.

* **Markdown** goes through :func:`mdrecall.markdown_write.write_markdown`, the one writer of user
  Markdown: the file is replaced atomically, compared against the text the plan was computed from,
  and an edit someone made meanwhile is merged in, never lost. A whole file that ends up empty is
  deleted (a link to it is left alone).
* **Transcripts** belong to the agent host, which keeps appending to them (often through a
  descriptor it holds open: a replaced file would swallow its next writes). So a forgotten record is
  overwritten **in place**, byte for byte the same length, with a tombstone record
  ``{"type":"mdrecall.forgotten"}`` padded with spaces: valid JSON that no reader renders, so a
  re-sync never indexes the text again, every later line keeps its number (citations stay right),
  and an append racing with us lands after it untouched. The session header is kept. A record that
  changed since it was chosen is looked for elsewhere in the file, and left alone if it is gone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall.forget.plan import TOMBSTONE_TYPE
from mdrecall.forget.selection import FileSelection
from mdrecall.markdown_write import write_markdown

if TYPE_CHECKING:
    from mdrecall.forget.report import ForgetReport

_TOMBSTONE = ('{"type":"' + TOMBSTONE_TYPE + '"}').encode("ascii")


def _keepends(text: str) -> list[str]:
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def forget_markdown(workspace: Path, selection: FileSelection, report: ForgetReport) -> None:
    assert selection.abspath is not None and selection.base is not None
    base = selection.base
    chosen = {line.line for line in selection.lines}
    old = _keepends(base)
    new = "".join(line for number, line in enumerate(old, 1) if number not in chosen)
    result = write_markdown(selection.abspath, new, base=base)
    entry = report.store("markdown", selection.path)
    entry.add("lines", len(chosen))
    if result.merged:
        entry.notes.append("an edit made meanwhile was merged in, not lost")
    # A conflict keeps both versions of a line (merge3): say so if a chosen line is still there.
    after = [line.rstrip("\n") for line in _keepends(result.text)]
    kept = []
    for ln in selection.lines:
        expected = sum(1 for n, text in enumerate(old, 1) if text.rstrip("\n") == ln.raw and n not in chosen)
        if after.count(ln.raw) > expected and ln.raw.strip():
            kept.append(ln.line)
    if kept:
        # (the line numbers, never the text: a report is shown, logged, sent to a model)
        report.warnings.append(f"{selection.path}: line(s) {', '.join(map(str, sorted(set(kept))))} were edited by someone "
                               "else meanwhile and kept with their edit: run the forget again")  # fmt: skip
    if selection.whole and not result.text:
        named = workspace / selection.path
        if named.is_symlink():
            entry.notes.append("emptied (a link names it: kept)")
        else:
            try:
                if os.stat(result.path).st_size == 0:  # still empty: nobody wrote in between
                    os.unlink(result.path)
                    entry.notes.append("file deleted")
            except FileNotFoundError:
                entry.notes.append("file deleted")


def tombstone(length: int) -> bytes:
    """A JSON record of exactly ``length`` bytes that no transcript reader renders."""
    if length >= len(_TOMBSTONE):
        return _TOMBSTONE + b" " * (length - len(_TOMBSTONE))
    if length >= 2:
        return b"{}" + b" " * (length - 2)
    return b" " * length


def _pread_all(fd: int) -> bytes:
    parts: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def forget_transcript(selection: FileSelection, report: ForgetReport) -> None:
    assert selection.abspath is not None
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    # The real file (discovery keeps links inside the sessions folder): O_NOFOLLOW then guards the
    # last step against a link swapped in since.
    fd = os.open(os.path.realpath(selection.abspath), flags)
    redacted = missing = 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{selection.path} is not a regular file")
        data = _pread_all(fd)
        lines = data.split(b"\n")
        starts = [0]
        for line in lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        used: set[int] = set()
        for chosen in selection.lines:
            raw = chosen.raw.encode("utf-8", errors="surrogateescape")
            index = chosen.line - 1
            if not (index < len(lines) and lines[index] == raw and index not in used):
                # Lines only move if the host rewrote the file: find the record by its bytes.
                index = next((i for i, line in enumerate(lines) if line == raw and i not in used), -1)
            if index < 0:
                missing += 1
                continue
            body = raw[:-1] if raw.endswith(b"\r") else raw
            os.pwrite(fd, tombstone(len(body)), starts[index])
            used.add(index)
            redacted += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    entry = report.store("transcript", selection.path)
    entry.add("records redacted in place", redacted)
    if missing:
        note = f"{missing} record(s) changed since they were chosen and were left alone"
        entry.notes.append(note)
        report.warnings.append(f"{selection.path}: {note}")
