"""TOML config files (Codex CLI's ``config.toml``) edited one table at a time, every other byte kept.

No TOML writer is installed with mdrecall, and none is needed: the entry ``connect`` owns is one
table, ``[<key>.<name>]`` (with its ``env`` inline), and a TOML table runs from its header line to the
next header. So the edit works on lines: replace or remove that table's lines, or append a new one,
and add or replace one top-level key (``notify``) above the first table. Reading uses the standard
library's ``tomllib``; the caller parses the result again and compares it with the document it meant
to produce, so an edit this line view gets wrong (a header-like line inside a multi-line string, a
table written as dotted keys) is refused, never written. (tomlkit would keep comments too, at the
price of a dependency for one table.)
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

_HEADER = re.compile(r"^[ \t]*\[")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


class TomlError(ValueError):
    """Not a TOML file this module can parse or edit safely."""


def loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(str(exc)) from None


def header_path(line: str) -> list[str] | None:
    """The dotted key of a ``[table]`` header line (``[[array]]`` headers: ``["[[", ...]``), else None."""
    if not _HEADER.match(line):
        return None
    stripped = line.strip()
    array = stripped.startswith("[[")
    try:
        doc = tomllib.loads(stripped.replace("[[", "[", 1).replace("]]", "]", 1) if array else stripped)
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = ["[["] if array else []
    node: Any = doc
    while isinstance(node, dict) and len(node) == 1:
        key = next(iter(node))
        path.append(key)
        node = node[key]
    return path


def key(part: str) -> str:
    return part if _BARE.match(part) else json.dumps(part, ensure_ascii=False)


def value(item: Any) -> str:
    """A TOML value for strings, numbers, booleans, lists and (inline) tables."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(item, Mapping):
        return "{ " + ", ".join(f"{key(str(k))} = {value(v)}" for k, v in item.items()) + " }" if item else "{}"
    if isinstance(item, Sequence):
        return "[" + ", ".join(value(v) for v in item) + "]"
    raise TypeError(f"cannot write a {type(item).__name__} as TOML")


def render_table(path: Sequence[str], table: Mapping[str, Any]) -> str:
    lines = ["[" + ".".join(key(p) for p in path) + "]"]
    lines += [f"{key(k)} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _table_span(lines: list[str], path: Sequence[str]) -> tuple[int, int] | None:
    """Line range [start, end) of the table ``path`` and its sub-tables; None when it has no header."""
    start = None
    for i, line in enumerate(lines):
        found = header_path(line)
        if found is None:
            continue
        inside = found[: len(path)] == list(path)
        if start is None and found == list(path):
            start = i
        elif start is not None and not inside:
            end = i
            while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1  # blank lines and comments just above the next header belong to it
            return start, end
    if start is None:
        return None
    end = len(lines)
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def set_table(text: str, path: Sequence[str], table: Mapping[str, Any]) -> str:
    """``text`` with the table ``[path]`` holding exactly ``table`` (replaced, or appended at the end)."""
    lines = text.splitlines(keepends=True)
    rendered = render_table(path, table)
    span = _table_span(lines, path)
    if span is not None:
        start, end = span
        return "".join(lines[:start]) + rendered + "".join(lines[end:])
    if not text.strip():
        return rendered
    sep = "" if text.endswith("\n") else "\n"
    blank = "" if text.endswith("\n\n") else "\n"
    return text + sep + blank + rendered


def remove_table(text: str, path: Sequence[str]) -> str:
    lines = text.splitlines(keepends=True)
    span = _table_span(lines, path)
    if span is None:
        return text
    start, end = span
    # Drop one blank line left between what came before and what follows.
    if start > 0 and not lines[start - 1].strip() and (end >= len(lines) or not lines[end].strip()):
        start -= 1
    return "".join(lines[:start] + lines[end:])


def _top_key_span(lines: list[str], name: str) -> tuple[int, int] | None:
    pattern = re.compile(rf"^[ \t]*{re.escape(key(name))}[ \t]*=")
    for i, line in enumerate(lines):
        if header_path(line) is not None:
            return None
        if pattern.match(line):
            end = i + 1
            while end <= len(lines):
                try:
                    tomllib.loads("".join(lines[i:end]))
                    return i, end
                except tomllib.TOMLDecodeError:
                    end += 1
            return None
    return None


def set_top_key(text: str, name: str, item: Any) -> str:
    """``text`` with the top-level key ``name = item`` (replaced, or added above the first table)."""
    lines = text.splitlines(keepends=True)
    line = f"{key(name)} = {value(item)}\n"
    span = _top_key_span(lines, name)
    if span is not None:
        return "".join(lines[: span[0]]) + line + "".join(lines[span[1] :])
    for i, existing in enumerate(lines):
        if header_path(existing) is not None:
            at = i
            # After the last top-level line: above the comments and blank lines that lead to the table.
            while at > 0 and (not lines[at - 1].strip() or lines[at - 1].lstrip().startswith("#")):
                at -= 1
            if at > 0:
                return "".join(lines[:at]) + line + "".join(lines[at:])
            return line + "\n" + text  # nothing at the top level yet: above everything, a blank line after
    sep = "" if not text or text.endswith("\n") else "\n"
    return text + sep + line


def remove_top_key(text: str, name: str) -> str:
    lines = text.splitlines(keepends=True)
    span = _top_key_span(lines, name)
    if span is None:
        return text
    start, end = span
    if start == 0 and end < len(lines) and not lines[end].strip():
        end += 1  # the blank line set_top_key put between it and the first table
    return "".join(lines[:start] + lines[end:])
