"""Reading lines of a memory file for ``read_file`` / ``memory_get``: the same for every backend.

Paths are checked by :func:`mdrecall.sources.workspace.resolve_memory_path` (memory roots only,
links resolved). A page holds at most ``read.maxLines`` lines and ``read.maxChars`` characters;
``next_from`` says where the next page starts. :func:`window_lines` is the paging alone, for a
backend that serves a file's text from elsewhere (the Postgres backend's copy of a team file).
"""

from __future__ import annotations

from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.errors import PathError
from mdrecall.sources.workspace import resolve_memory_path
from mdrecall.types import ReadResult


def read_memory_lines(
    workspace: Path, config: MemoryConfig, rel_path: str, from_line: int | None = None, lines: int | None = None
) -> ReadResult:
    real, normalised = resolve_memory_path(workspace, config, rel_path)
    raw = real.read_bytes()
    if len(raw) > config.limits.maxFileBytes:
        raise PathError("invalid_path", f"{normalised} is larger than limits.maxFileBytes")
    return window_lines(raw.decode("utf-8", errors="replace"), normalised, from_line, lines, config)


def window_lines(content: str, path: str, from_line: int | None, count: int | None, config: MemoryConfig) -> ReadResult:
    """One page of ``content`` (a file's text), shown as ``path``: ``count`` lines from ``from_line``
    (1-based), within ``read.maxLines`` and ``read.maxChars``."""
    limits = config.read
    start = 1 if from_line is None else int(from_line)
    if start < 1:
        raise PathError("invalid_path", f"from must be ≥ 1 (got {from_line})")
    wanted = limits.maxLines if count is None else max(1, min(int(count), limits.maxLines))
    all_lines = content.replace("\r\n", "\n").split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    selected = all_lines[start - 1 : start - 1 + wanted]
    text = "\n".join(selected)
    truncated = start - 1 + wanted < len(all_lines)
    if len(text) > limits.maxChars:
        kept: list[str] = []
        size = 0
        for line in selected:
            if size + len(line) + 1 > limits.maxChars:
                break
            kept.append(line)
            size += len(line) + 1
        if not kept:  # one huge line: cut it
            kept = [selected[0][: limits.maxChars]]
        selected = kept
        text = "\n".join(kept)
        truncated = True
    return ReadResult(
        text=text,
        path=path,
        from_line=start,
        lines=len(selected),
        total_lines=len(all_lines),
        truncated=truncated,
        next_from=start + len(selected) if truncated else None,
    )
