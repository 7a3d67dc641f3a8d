"""After a forget: read every file that could hold a copy, byte by byte, for the forgotten texts.

The files: the workspace's builtin indexes and everything beside them that bears their name
(write-ahead logs, shared-memory files, locks, overrides, a QMD home), dreaming's folder
(``memory/.dreams``), the memory files and transcripts themselves (an edit made meanwhile may have
brought a line back), and a local LanceDB folder. The Postgres store is asked in SQL
(:meth:`mdrecall.forget.postgres.PostgresEraser`); its data directory is the server's.

The comparison is on casefolded ASCII bytes (``bytes.lower``) of UTF-8 text. It finds whole copies;
words the keyword index keeps stemmed or prefix-compressed are not visible this way, which is why
the index's segments are merged (:mod:`mdrecall.forget.index`) rather than trusted to this scan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from mdrecall.forget.report import ForgetReport, Remaining

_BLOCK = 8 << 20


def _needle_bytes(needles: Sequence[str]) -> list[tuple[str, bytes]]:
    out = []
    for needle in needles:
        data = needle.encode("utf-8", errors="surrogateescape").lower()
        if data:
            out.append((needle, data))
    return out


def _walk(path: Path) -> Iterator[Path]:
    if path.is_file() and not path.is_symlink():
        yield path
    elif path.is_dir() and not path.is_symlink():
        for root, _dirs, files in os.walk(path):
            for name in files:
                full = Path(root) / name
                if full.is_file() and not full.is_symlink():
                    yield full


def scan(paths: Iterable[Path], needles: Sequence[str], report: ForgetReport) -> None:
    """Read ``paths`` (files, or folders walked) and record every needle still found in them."""
    wanted = _needle_bytes(needles)
    if not wanted:
        return
    longest = max(len(b) for _n, b in wanted)
    seen: set[str] = set()
    for root in paths:
        for file in _walk(root):
            real = os.path.realpath(file)
            if real in seen:
                continue
            seen.add(real)
            found = _scan_file(file, wanted, longest)
            if found is None:
                continue
            report.checked_files += 1
            report.checked_bytes += found[0]
            report.remaining.extend(Remaining(str(file), needle) for needle in found[1])


def _scan_file(path: Path, wanted: list[tuple[str, bytes]], longest: int) -> tuple[int, list[str]] | None:
    hits: list[str] = []
    size = 0
    try:
        with path.open("rb") as fh:
            tail = b""
            while block := fh.read(_BLOCK):
                size += len(block)
                window = tail + block.lower()
                for needle, data in wanted:
                    if needle not in hits and data in window:
                        hits.append(needle)
                tail = window[-(longest - 1) :] if longest > 1 else b""
    except OSError:
        return None
    return size, hits
