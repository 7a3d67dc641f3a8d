"""Reading lines of a memory file for ``read_file`` / ``memory_get``: the same for every backend.

Paths are checked by :func:`mdrecall.sources.workspace.resolve_memory_path` (memory roots only,
links resolved) and the bytes come through :func:`mdrecall.sources.workspace.read_memory_bytes`
(one descriptor checked after opening: no link followed, no hard link to a file outside). The path
may be a citation as search prints it (``memory/a.md#L3-L7``). Secrets are redacted as in the
index, line by line, so line numbers stay those of the file.

A page holds at most ``read.maxLines`` lines and ``read.maxChars`` characters; ``next_from`` says
where the next page starts. A single line longer than ``read.maxChars`` is cut, and then there is no
``next_from`` (continuing would skip the rest of that line): ``line_cut`` says so, and the rest of
the line can only be read from the file itself (OpenClaw does the same). :func:`window_lines` is the
paging (and redaction) alone, for a backend that serves a file's text from elsewhere (the Postgres
backend's copy of a team file).
"""

from __future__ import annotations

import re
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.errors import PathError
from mdrecall.sources.redact import redact_markdown
from mdrecall.sources.workspace import read_memory_bytes, resolve_memory_path
from mdrecall.types import ReadResult

_CITATION = re.compile(r"^(?P<path>.+?\.md)#L(?P<start>\d{1,9})(?:-L?(?P<end>\d{1,9}))?$", re.IGNORECASE)


def parse_citation(path: str) -> tuple[str, int | None, int | None]:
    """``memory/a.md#L3-L7`` (as search prints it), ``#L3-7`` or ``#L3`` -> (path, first line, line count)."""
    match = _CITATION.match(path.strip())
    if match is None:
        return path, None, None
    start = int(match.group("start"))
    end = int(match.group("end") or start)
    if start < 1 or end < start:
        raise PathError("invalid_path", f"{path!r}: a citation names lines L<first>-L<last> with 1 ≤ first ≤ last")
    return match.group("path"), start, end - start + 1


def read_memory_lines(
    workspace: Path, config: MemoryConfig, rel_path: str, from_line: int | None = None, lines: int | None = None
) -> ReadResult:
    """An excerpt of a memory file, by path or by citation (``from_line``/``lines`` default to its range)."""
    path, cited_from, cited_lines = parse_citation(rel_path)
    if from_line is None:
        from_line = cited_from
    if lines is None:
        lines = cited_lines
    real, normalised = resolve_memory_path(workspace, config, path)
    raw = read_memory_bytes(workspace, config, real, config.limits.maxFileBytes)
    return window_lines(raw.decode("utf-8", errors="replace"), normalised, from_line, lines, config)


def window_lines(content: str, path: str, from_line: int | None, count: int | None, config: MemoryConfig) -> ReadResult:
    """One page of ``content`` (a file's text), shown as ``path``: ``count`` lines from ``from_line``
    (1-based), within ``read.maxLines`` and ``read.maxChars``, redacted as the index is (an excerpt
    shows what its search snippet showed, never a secret)."""
    limits = config.read
    start = 1 if from_line is None else int(from_line)
    if start < 1:
        raise PathError("invalid_path", f"from must be ≥ 1 (got {from_line})")
    wanted = limits.maxLines if count is None else max(1, min(int(count), limits.maxLines))
    all_lines = redact_markdown(content.replace("\r\n", "\n")).split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    selected = all_lines[start - 1 : start - 1 + wanted]
    text = "\n".join(selected)
    truncated = start - 1 + wanted < len(all_lines)
    line_cut = False
    if len(text) > limits.maxChars:
        kept: list[str] = []
        size = 0
        for line in selected:
            if size + len(line) + 1 > limits.maxChars:
                break
            kept.append(line)
            size += len(line) + 1
        if not kept:  # one huge line: cut it, and offer no continuation that would skip its rest
            kept = [selected[0][: limits.maxChars]]
            line_cut = True
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
        next_from=start + len(selected) if truncated and not line_cut else None,
        line_cut=line_cut,
    )
