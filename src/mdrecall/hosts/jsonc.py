"""JSON and JSON-with-comments files, parsed with the position of every value and edited in place.

A host's config file is the user's: ``connect`` changes one entry and must leave every other byte as
it was, comments, key order, indentation and trailing commas included. So the file is not loaded and
dumped again; it is parsed into :class:`Node` s that know where each value, key and comma is, and an
edit splices new text into those places (indented like its neighbours). The caller checks the
result by parsing it again (``connect.py`` compares it with the value it meant to produce).

``comments=True`` is JSONC as VS Code reads it: ``//`` and ``/* */`` comments and trailing commas.
With ``comments=False`` (plain JSON hosts) either one is an error, as it would be for the host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsoncError(ValueError):
    """Not a file this module can parse (or edit safely); the message says where and why."""


@dataclass(slots=True)
class Entry:
    """A member of an object (``key`` set) or an item of an array, with its span and comma."""

    key: str | None
    start: int  # the key's opening quote (members) or the value's first character (items)
    value: Node
    comma: int | None = None  # the comma after it, if any

    @property
    def end(self) -> int:
        return self.value.end


@dataclass(slots=True)
class Node:
    kind: str  # "object" | "array" | "string" | "number" | "literal"
    start: int
    end: int  # one past the last character
    value: Any = None
    entries: list[Entry] = field(default_factory=list)

    def member(self, key: str) -> Entry | None:
        found = [e for e in self.entries if e.key == key]
        if len(found) > 1:
            raise JsoncError(f"the key {key!r} appears {len(found)} times in one object; which one counts is unclear")
        return found[0] if found else None


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> JsoncError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsoncError(f"line {line}, column {column}: {message}")

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif ch == "/" and text.startswith(("//", "/*"), self.pos):
                if not self.comments:
                    raise self.fail("comments are not allowed in this file (plain JSON)")
                if text.startswith("//", self.pos):
                    nl = text.find("\n", self.pos)
                    self.pos = n if nl < 0 else nl + 1
                else:
                    close = text.find("*/", self.pos + 2)
                    if close < 0:
                        raise self.fail("a /* comment is never closed")
                    self.pos = close + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        ch = self.text[self.pos]
        if ch == "{":
            return self.container("object", "}", depth)
        if ch == "[":
            return self.container("array", "]", depth)
        if ch == '"':
            return self.string()
        match = _NUMBER.match(self.text, self.pos)
        if match:
            start, self.pos = self.pos, match.end()
            return Node("number", start, self.pos, json.loads(match.group(0)))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                start, self.pos = self.pos, self.pos + len(word)
                return Node("literal", start, self.pos, literal)
        raise self.fail(f"unexpected {ch!r}")

    def string(self) -> Node:
        start = self.pos
        i = start + 1
        text = self.text
        while True:
            if i >= len(text):
                raise self.fail("a string is never closed", start)
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                break
            if ch == "\n":
                raise self.fail("a string runs past the end of its line", start)
            i += 1
        self.pos = i + 1
        try:
            return Node("string", start, self.pos, json.loads(text[start : self.pos]))
        except ValueError as exc:
            raise self.fail(f"bad string: {exc}", start) from None

    def container(self, kind: str, close: str, depth: int) -> Node:
        node = Node(kind, self.pos, self.pos)
        self.pos += 1
        values: Any = {} if kind == "object" else []
        while True:
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == close:
                if node.entries and node.entries[-1].comma is not None and not self.comments:
                    raise self.fail("trailing comma (not allowed in plain JSON)", node.entries[-1].comma)
                self.pos += 1
                break
            if node.entries and node.entries[-1].comma is None:
                raise self.fail(f"expected ',' or '{close}'")
            start = self.pos
            key: str | None = None
            if kind == "object":
                if self.pos >= len(self.text) or self.text[self.pos] != '"':
                    raise self.fail("expected a quoted key")
                key = self.string().value
                self.skip()
                if self.pos >= len(self.text) or self.text[self.pos] != ":":
                    raise self.fail("expected ':' after the key")
                self.pos += 1
            item = self.value(depth + 1)
            entry = Entry(key, start, item)
            node.entries.append(entry)
            if kind == "object":
                values[key] = item.value
            else:
                values.append(item.value)
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                entry.comma = self.pos
                self.pos += 1
            elif self.pos >= len(self.text):
                raise self.fail(f"unexpected end of file: '{close}' is missing")
        node.end = self.pos
        node.value = values
        return node


def parse(text: str, *, comments: bool) -> Node:
    """The document's root value (raises :class:`JsoncError` naming the line and column)."""
    parser = _Parser(text, comments)
    if text.startswith("\ufeff"):
        parser.pos = 1
    root = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the end of the document")
    return root


def loads(text: str, *, comments: bool) -> Any:
    """The document's value; an empty (or whitespace-only) file is an empty object."""
    return parse(text, comments=comments).value if text.strip(" \t\r\n\ufeff") else {}


# --- editing --------------------------------------------------------------------------------------


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_at(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _alone_on_line(text: str, pos: int) -> bool:
    """Whether only whitespace precedes ``pos`` on its line."""
    return text[_line_start(text, pos) : pos].strip(" \t") == ""


def indent_unit(text: str, root: Node) -> str:
    """The file's indentation step (two spaces when it shows none)."""
    for entry in root.entries:
        if _alone_on_line(text, entry.start):
            unit = _indent_at(text, entry.start)[len(_indent_at(text, root.start)):]
            if unit:
                return unit
    return "  "


def _dump(value: Any, indent: str, unit: str) -> str:
    text = json.dumps(value, indent=unit, ensure_ascii=False)
    return text.replace("\n", "\n" + indent)


def _find(root: Node, path: Sequence[str]) -> tuple[Node, list[str]]:
    """The deepest object along ``path`` that exists, and the keys still missing below it."""
    node = root
    for i, key in enumerate(path):
        if node.kind != "object":
            raise JsoncError(f"{'.'.join(path[:i]) or 'the top level'} is not an object")
        entry = node.member(key)
        if entry is None:
            return node, list(path[i:])
        node = entry.value
    return node, []


def _entry_indent(text: str, container: Node, unit: str) -> str:
    for entry in container.entries:
        if _alone_on_line(text, entry.start):
            return _indent_at(text, entry.start)
    return _indent_at(text, container.start) + unit


def _insert(text: str, container: Node, rendered_entry: str, unit: str) -> str:
    """``text`` with ``rendered_entry`` (``"key": value`` or a value, at any indent) added last."""
    indent = _entry_indent(text, container, unit)
    body = rendered_entry.replace("\n", "\n" + indent)
    close = container.end - 1
    if not container.entries:
        inner = text[container.start + 1 : close]
        if inner.strip():  # only comments inside: keep them, add below
            if _alone_on_line(text, close):
                at = _line_start(text, close)
                return text[:at] + indent + body + "\n" + text[at:]
            return text[:close] + "\n" + indent + body + "\n" + _indent_at(text, container.start) + text[close:]
        return text[: container.start + 1] + "\n" + indent + body + "\n" + _indent_at(text, container.start) + text[close:]
    last = container.entries[-1]
    trailing = last.comma is not None
    if _alone_on_line(text, close) and _alone_on_line(text, last.start):
        at = _line_start(text, close)
        addition = indent + body + ("," if trailing else "") + "\n"
        head = text[:at] if trailing else text[: last.end] + "," + text[last.end : at]
        return head + addition + text[at:]
    # Everything on one line: add after the last entry, inline.
    if trailing:
        return text[: last.comma + 1] + " " + body + "," + text[last.comma + 1 :]  # type: ignore[operator]
    return text[: last.end] + ", " + body + text[last.end :]


def _remove(text: str, container: Node, index: int) -> str:
    """``text`` without ``container.entries[index]`` (its comma, and its line when it had one)."""
    entry = container.entries[index]
    if entry.comma is not None:
        start, end = entry.start, entry.comma + 1
    elif index > 0:
        previous = container.entries[index - 1]
        start, end = previous.comma, entry.end  # type: ignore[assignment]
    else:
        start, end = entry.start, entry.end
    if entry.comma is not None or index == 0:
        if _alone_on_line(text, start):
            rest = text[end:]
            tail = len(rest) - len(rest.lstrip(" \t"))
            if rest[tail : tail + 1] == "\n":
                start, end = _line_start(text, start), end + tail + 1
    out = text[:start] + text[end:]
    if len(container.entries) == 1:  # now empty: "{}" rather than a brace on each line
        close = container.end - 1 - (end - start)
        if not out[container.start + 1 : close].strip(" \t\r\n"):
            out = out[: container.start + 1] + out[close:]
    return out


def set_member(text: str, path: Sequence[str], key: str, value: Any, *, comments: bool) -> str:
    """``text`` with ``<path>.<key>`` set to ``value`` (objects along ``path`` created as needed)."""
    if not text.strip(" \t\r\n\ufeff"):
        doc: Any = value
        for part in reversed([*path, key]):
            doc = {part: doc}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    root = parse(text, comments=comments)
    if root.kind != "object":
        raise JsoncError(f"the top level is a JSON {root.kind}, not an object")
    unit = indent_unit(text, root)
    node, missing = _find(root, path)
    if node.kind != "object":
        raise JsoncError(f"{'.'.join(path)} is not an object")
    if missing:
        nested: Any = value
        for part in reversed(missing[1:] + [key]):
            nested = {part: nested}
        return _insert(text, node, f"{json.dumps(missing[0])}: {_dump(nested, '', unit)}", unit)
    existing = node.member(key)
    if existing is None:
        return _insert(text, node, f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, '', unit)}", unit)
    indent = _indent_at(text, existing.start) if _alone_on_line(text, existing.start) else _entry_indent(text, node, unit)
    return text[: existing.value.start] + _dump(value, indent, unit) + text[existing.value.end :]


def remove_member(text: str, path: Sequence[str], key: str, *, comments: bool) -> str:
    """``text`` without ``<path>.<key>`` (unchanged when it is not there)."""
    if not text.strip(" \t\r\n\ufeff"):
        return text
    root = parse(text, comments=comments)
    node, missing = _find(root, path)
    if missing or node.kind != "object":
        return text
    for index, entry in enumerate(node.entries):
        if entry.key == key:
            node.member(key)  # refuses a duplicated key
            return _remove(text, node, index)
    return text


def get(root_value: Any, path: Sequence[str]) -> Any:
    node = root_value
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def edit_array(text: str, path: Sequence[str], drop: Callable[[Any], bool], add: Sequence[Any], *, comments: bool) -> str:
    """``text`` with the array at ``path``'s items for which ``drop(item)`` holds removed and ``add``
    appended (the array, and objects above it, created when missing and something is added)."""
    if not text.strip(" \t\r\n\ufeff"):
        return set_member(text, path[:-1], path[-1], list(add), comments=comments) if add else text
    root = parse(text, comments=comments)
    node, missing = _find(root, path)
    if missing:
        return set_member(text, path[:-1], path[-1], list(add), comments=comments) if add else text
    if node.kind != "array":
        raise JsoncError(f"{'.'.join(path)} is not an array")
    for index in reversed(range(len(node.entries))):
        if drop(node.entries[index].value.value):
            text = _remove(text, node, index)
            node, _ = _find(parse(text, comments=comments), path)
    unit = indent_unit(text, parse(text, comments=comments))
    for item in add:
        node, _ = _find(parse(text, comments=comments), path)
        text = _insert(text, node, _dump(item, "", unit), unit)
    return text
