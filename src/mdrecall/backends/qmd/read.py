"""``read_file`` for the QMD backend: the Markdown file itself, as the builtin engine reads it.

Path checks are ``workspace.resolve_memory_path`` (the builtin's, so path safety is identical);
range and budget rules (``read.maxLines``/``read.maxChars``, ``limits.maxFileBytes``, ``truncated``
and ``nextFrom``) match ``BuiltinMemoryManager.read_file`` line for line.
TODO(merge): the builtin's read_file body and this function are the same code; make both call one
helper (e.g. ``workspace.read_memory_range``) when manager.py is split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.errors import PathError
from mdrecall.workspace import resolve_memory_path


def read_memory_file(workspace: Path, config: MemoryConfig, rel_path: str, from_line: int | None = None,
                     lines: int | None = None) -> dict[str, Any]:
    real, normalised = resolve_memory_path(workspace, config, rel_path)
    limits = config.read
    start = 1 if from_line is None else int(from_line)
    if start < 1:
        raise PathError("invalid_path", f"from must be ≥ 1 (got {from_line})")
    count = limits.maxLines if lines is None else max(1, min(int(lines), limits.maxLines))
    raw = real.read_bytes()
    if len(raw) > config.limits.maxFileBytes:
        raise PathError("invalid_path", f"{normalised} is larger than limits.maxFileBytes")
    content = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    all_lines = content.split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    selected = all_lines[start - 1 : start - 1 + count]
    text = "\n".join(selected)
    truncated = start - 1 + count < len(all_lines)
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
    result: dict[str, Any] = {"text": text, "path": normalised, "from": start, "lines": len(selected), "totalLines": len(all_lines)}
    if truncated:
        result["truncated"] = True
        result["nextFrom"] = start + len(selected)
    return result
