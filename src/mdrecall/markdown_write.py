"""Replacing a Markdown file that people and other programs edit too, without losing their edits.

Every feature that rewrites user Markdown (promotion into ``MEMORY.md``, the review queue, dream
reports) goes through :func:`write_markdown`. The caller passes the text it read (``base``) and the
text it wants (``new``); the file is replaced atomically (temp file, fsync, rename) and:

* **Compare-and-swap.** On Linux the new file is swapped in with ``renameat2(RENAME_EXCHANGE)``, so
  the file it displaced is still at hand afterwards and is exactly what was replaced. If it is not
  the text the change was computed from (someone appended or saved in between), the two edits are
  merged line by line (:func:`merge3`) and swapped in again, until the swap displaces what it
  expected. Nothing another writer wrote before the swap is lost; on a conflict both versions of the
  lines are kept (theirs first, then ours), never one dropped. Lines two writers added at the same
  place over several rounds may come out in a different order. Between the swap and the repair, for
  a few milliseconds, the file shows our version without the other edit: a program doing its own
  read-modify-write in that moment can overwrite its own line (as it could against any writer).
* **Late writers.** A program that opened the file just before the swap may still be writing into
  the displaced copy. Before comparing, we wait (at most :data:`SETTLE_TIMEOUT_S`) until nobody has
  it open for writing: a read lease (``F_SETLEASE``) is granted only then. Where leases are not
  available we re-read until the copy stops changing.
* **Through symlinks.** A linked ``MEMORY.md`` stays a link: the link's final target is replaced.
* **One mdrecall writer per directory** at a time (an ``flock`` on the directory), so two features or
  processes of ours never merge against each other.

Where ``renameat2`` is missing (not Linux, or a filesystem without it) the swap is a plain
``os.replace``; the displaced file is still read through a descriptor opened just before, so
appends are merged, but a rename-over by another program in the microseconds between that open and
the replace can be lost there.
"""

from __future__ import annotations

import ctypes
import difflib
import errno
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mdrecall.errors import StoreError

log = logging.getLogger("mdrecall.markdown")

#: How long to keep swapping before giving up on a file that keeps changing under us.
SWAP_DEADLINE_S = 15.0
#: How long to wait for late writers of a displaced copy to close it.
SETTLE_TIMEOUT_S = 2.0
#: How long a displaced copy must stay unchanged, with no writer, before it is compared.
SETTLE_QUIET_S = 0.005
#: How long to wait for another mdrecall writer of the same directory.
LOCK_TIMEOUT_S = 30.0

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_F_SETLEASE = 1024
_F_SETSIG = 10


@dataclass(frozen=True)
class WriteResult:
    path: Path  # the file actually written (the link target for a symlink)
    text: str  # what the file holds now
    merged: bool  # another writer's edit was merged in
    changed: bool  # the file was written at all


# --- reading ---------------------------------------------------------------------------------------


def _decode(raw: bytes) -> str:
    # Undecodable bytes survive a read-modify-write (surrogateescape round-trips them); line endings
    # are read like Path.read_text does, so callers compare like with like.
    text = raw.decode("utf-8", errors="surrogateescape")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_markdown(path: Path | str) -> str | None:
    """The file's text (through links), or None when it does not exist."""
    try:
        return _decode(Path(path).read_bytes())
    except FileNotFoundError:
        return None


def target_of(path: Path | str) -> Path:
    """The file a write to ``path`` must replace: the final target when ``path`` is a symlink."""
    return Path(os.path.realpath(path))


# --- merging ---------------------------------------------------------------------------------------


def _changes(base: list[str], other: list[str]) -> list[tuple[int, int, list[str]]]:
    """``(start, end, replacement)`` ranges of ``base`` that ``other`` changed, in order."""
    # The common case is an append or one inserted section: match the shared head and tail in
    # linear time and leave only the middle to difflib.
    head = 0
    limit = min(len(base), len(other))
    while head < limit and base[head] == other[head]:
        head += 1
    tail = 0
    while tail < limit - head and base[len(base) - 1 - tail] == other[len(other) - 1 - tail]:
        tail += 1
    mid_base, mid_other = base[head : len(base) - tail], other[head : len(other) - tail]
    if not mid_base or not mid_other:
        return [(head, head + len(mid_base), mid_other)] if mid_base or mid_other else []
    matcher = difflib.SequenceMatcher(None, mid_base, mid_other, autojunk=False)
    return [
        (head + i1, head + i2, mid_other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    ]


def _overlaps(a: tuple[int, int, list[str]], b: tuple[int, int, list[str]]) -> bool:
    (s1, e1, _), (s2, e2, _) = a, b
    if s1 == e1 and s2 == e2:
        return s1 == s2  # two insertions at the same point
    if s1 == e1:
        return s2 < s1 < e2  # an insertion strictly inside the other range
    if s2 == e2:
        return s1 < s2 < e1
    return s1 < e2 and s2 < e1


def _apply(base: list[str], start: int, end: int, changes: list[tuple[int, int, list[str]]]) -> list[str]:
    out: list[str] = []
    pos = start
    for s, e, lines in changes:
        out.extend(base[pos:s])
        out.extend(lines)
        pos = e
    out.extend(base[pos:end])
    return out


def _lines(text: str) -> list[str]:
    """Lines split at "\n" only (as editors and the chunker count them), each ending in "\n"."""
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [part + "\n" for part in parts]


def merge3(base: str, ours: str, theirs: str) -> str:
    """Both sides' line edits of ``base``; where they touch the same lines: theirs, then our new lines.

    No line either side added is ever dropped (duplicates are possible on a conflict, losses are not).
    """
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    # A missing final newline would glue an appended line onto the last one: every line ends in "\n".
    b, o, t = _lines(base), _lines(ours), _lines(theirs)
    mine, other = _changes(b, o), _changes(b, t)
    out: list[str] = []
    pos = i = j = 0
    while i < len(mine) or j < len(other):
        # Start a cluster with the earliest change, then pull in every change overlapping it.
        if j >= len(other) or (i < len(mine) and mine[i][0] < other[j][0]):
            group_o, group_t = [mine[i]], []
            i += 1
        else:
            group_o, group_t = [], [other[j]]
            j += 1
        grew = True
        while grew:
            grew = False
            if i < len(mine) and any(_overlaps(mine[i], c) for c in group_o + group_t):
                group_o.append(mine[i])
                i += 1
                grew = True
            if j < len(other) and any(_overlaps(other[j], c) for c in group_o + group_t):
                group_t.append(other[j])
                j += 1
                grew = True
        start = min(c[0] for c in group_o + group_t)
        end = max(c[1] for c in group_o + group_t)
        out.extend(b[pos:start])
        if not group_t:
            out.extend(_apply(b, start, end, group_o))
        elif not group_o:
            out.extend(_apply(b, start, end, group_t))
        else:
            region_o, region_t = _apply(b, start, end, group_o), _apply(b, start, end, group_t)
            out.extend(region_t)
            if region_o != region_t:
                out.extend(line for c in group_o for line in c[2])
        pos = end
    out.extend(b[pos:])
    merged = "".join(out)
    if not theirs.endswith("\n") and not ours.endswith("\n") and merged.endswith("\n"):
        merged = merged[:-1]
    return merged


# --- swapping --------------------------------------------------------------------------------------


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """True when done; False when this system or filesystem cannot do it (the caller falls back)."""
    func = getattr(_libc(), "renameat2", None)
    if func is None:
        return False
    if func(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL | None:
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
    return _LIBC


def _writers_gone(fd: int) -> bool | None:
    """True when no one has the file open for writing (a read lease is granted only then); None
    when leases are not available here."""
    try:
        import fcntl
        import signal

        # A lease break would send SIGIO, whose default action kills the process; SIGURG is ignored.
        fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
    except (ImportError, AttributeError):
        return None
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            return False
        return None  # EINVAL (no lease support), EACCES (not our file), ENOLCK
    fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
    return True


def _read_settled(fd: int) -> str:
    """The final content of a displaced file once late writers are done with it.

    A writer that looked the name up just before the swap may open the old file a moment later (a
    preempted process), after our check, so the copy must also stay unchanged for
    :data:`SETTLE_QUIET_S` with no writer holding it.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last: bytes | None = None
    while True:
        gone = _writers_gone(fd)
        raw = _pread_all(fd)
        if gone is not False and raw == last:
            return _decode(raw)
        if time.monotonic() >= deadline:
            log.warning("mdrecall: a program still holds an old copy of a Markdown file open for writing")
            return _decode(raw)
        last = raw if gone is not False else None
        time.sleep(SETTLE_QUIET_S if gone is not False else 0.002)


def _pread_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    parts: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, max(65536, size - offset + 1), offset)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        offset += len(chunk)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_RETRY = object()


class _Candidate:
    """The replacement file, written beside the target and then swapped in."""

    def __init__(self, target: Path) -> None:
        try:
            st: os.stat_result | None = os.stat(target)
        except FileNotFoundError:
            st = None
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        self.fd, self.path, self.installed, self.dirty = fd, Path(name), False, False
        # mkstemp creates 0600: keep the file's mode (and, when we may, its owner).
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o644)
        if st is not None and os.geteuid() == 0:
            os.fchown(fd, st.st_uid, st.st_gid)

    def write(self, text: str) -> None:
        data = text.encode("utf-8", errors="surrogateescape")
        offset = 0
        while offset < len(data):
            offset += os.pwrite(self.fd, data[offset:], offset)
        if os.fstat(self.fd).st_size > len(data):  # truncating costs a journal write: only to shrink
            os.ftruncate(self.fd, len(data))
        self.dirty = True

    def sync(self) -> None:
        os.fsync(self.fd)
        self.dirty = False

    def install(self, target: Path, exists: bool) -> str | None | object:
        """Swap in; return what was displaced (None: no file was there), or _RETRY when the file
        appeared or vanished meanwhile (nothing installed)."""
        if not exists:
            try:
                if not _renameat2(self.path, target, _RENAME_NOREPLACE):
                    os.link(self.path, target)  # fails with EEXIST, like RENAME_NOREPLACE
                    os.unlink(self.path)
            except FileExistsError:
                return _RETRY
            self._installed(target)
            return None
        try:
            exchanged = _renameat2(self.path, target, _RENAME_EXCHANGE)
        except FileNotFoundError:
            return _RETRY
        if exchanged:
            # ``self.path`` now names the displaced file, which holds the other writers' data.
            self.installed = True
            old = os.open(self.path, os.O_RDONLY)
            try:
                displaced = _read_settled(old)
            finally:
                os.close(old)
            os.unlink(self.path)
        else:
            try:
                old = os.open(target, os.O_RDONLY)
            except FileNotFoundError:
                return _RETRY
            try:
                os.replace(self.path, target)
                self.installed = True
                displaced = _read_settled(old)
            finally:
                os.close(old)
        self._installed(target)
        return displaced

    def _installed(self, target: Path) -> None:
        self.installed = True
        if self.dirty:
            # Rewritten after the first fsync (to keep the race window short): make it durable now.
            self.sync()
        fsync_dir(target.parent)

    def close(self) -> None:
        os.close(self.fd)
        if not self.installed:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


# --- locking ---------------------------------------------------------------------------------------


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Exclusive among mdrecall writers: an flock on the directory itself (no lock file to leave in
    the user's notes)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the callers' own locks still apply
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(f"another mdrecall process has been writing in {directory} for over "
                                     f"{LOCK_TIMEOUT_S:.0f}s; try again when it finishes") from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --- the write -------------------------------------------------------------------------------------


def write_markdown(path: Path | str, new: str, *, base: str | None) -> WriteResult:
    """Replace ``path`` with ``new``, computed by the caller from ``base`` (None: no file existed).

    Edits other writers made since ``base`` was read are merged in, never overwritten; returns what
    the file holds afterwards. Against a writer that never pauses for :data:`SWAP_DEADLINE_S`, it
    gives up with a StoreError, after saving the merged text beside the file if the file itself
    lacks an edit at that moment (so even then nothing is lost).
    """
    target = target_of(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    merged = False
    owed = False  # the file holds our version, without an edit we displaced and merged into ``new``
    deadline = time.monotonic() + SWAP_DEADLINE_S
    with directory_lock(target.parent):
        current = base
        candidate: _Candidate | None = None
        try:
            while time.monotonic() < deadline:
                latest = read_markdown(target)
                if latest != current:
                    # Changed since it was read (or while the candidate was being written): merge.
                    new = merge3(current or "", new, latest or "")
                    current = latest
                    merged = True
                    if candidate is not None:
                        candidate.write(new)
                if new == current:
                    return WriteResult(target, new, merged, changed=False)
                if candidate is None:
                    candidate = _Candidate(target)
                    candidate.write(new)
                    candidate.sync()
                    continue  # the fsync took a while: look again right before the swap
                displaced = candidate.install(target, exists=current is not None)
                if displaced is _RETRY:
                    continue
                candidate.close()
                candidate = None
                if displaced == current:
                    return WriteResult(target, new, merged, changed=True)
                # Someone wrote between our last look and the swap: their version was displaced and
                # the file holds ours. Fold their edit in and swap again, from what the file holds
                # now (ours, plus anything written since: the next round merges that too).
                assert displaced is None or isinstance(displaced, str)
                new, current = merge3(current or "", new, displaced or ""), new
                merged = owed = True
                candidate = _Candidate(target)
                candidate.write(new)  # no fsync yet: it happens once installed, keeping the window short
                time.sleep(0)  # a fresh time slice: being preempted inside the window is what loses the race
        finally:
            if candidate is not None:
                candidate.close()
        message = f"{target} kept changing for {SWAP_DEADLINE_S:.0f}s while mdrecall was writing it"
        if owed:
            aside = target.with_name(f"{target.name}.unmerged-{time.time_ns()}")
            _write_new_file(aside, new)
            raise StoreError(f"{message}; it may lack an edit made meanwhile, which is saved with ours in {aside}")
    raise StoreError(f"{message}; nothing was written, try again")


def _write_new_file(path: Path, text: str) -> None:
    candidate = _Candidate(path)
    try:
        candidate.write(text)
        candidate.sync()
        os.replace(candidate.path, path)
        candidate.installed = True
        fsync_dir(path.parent)
    finally:
        candidate.close()


__all__ = ["WriteResult", "merge3", "read_markdown", "target_of", "write_markdown"]
