"""Export/import (``mdrecall.portable``): builtin → JSONL → builtin, another backend → builtin, and
damaged exports that write nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.portable import ImportFormatError, export_jsonl, import_files, read_export
from mdrecall.testing import FakeBackend, plugin, registered

NOTES: dict[str, str | bytes] = {
    "MEMORY.md": "# Memory\n\n- Decision: Postgres 16 is the main database.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- The importer crashed on malformed CSV rows.\n",
    "memory/projects/团队.md": "# 团队\n\n- 王磊喜欢绿茶。\n",
    "memory/crlf.md": "# Windows\r\n\r\n- Line endings are kept.\r\n",
    "memory/latin1.md": b"# Caf\xe9\n- not UTF-8\n",
    "memory/.dreams/promotion-queue.md": "- [ ] dreaming's own file\n",
    "notes/extra.md": "# Extra\n- an extra path inside the workspace\n",
}
QUERIES = ["which database do we use?", "why did the importer crash?", "绿茶"]


def export_text(manager: Any) -> str:
    out = io.StringIO()
    export_jsonl(manager, out)
    return out.getvalue()


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def citations(manager: Any) -> list[list[str]]:
    return [[h.citation for h in manager.search(q).results] for q in QUERIES]


def test_builtin_to_jsonl_to_builtin(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    source = make_ws(NOTES, name="source")
    target = make_ws({}, name="target")
    with open_manager(source, cfg(db="a.sqlite", extraPaths=["notes"])) as a:
        a.sync()
        text = export_text(a)
        expected = citations(a)
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["type"] == "header" and records[0]["format"] == "mdrecall-export" and records[0]["version"] == 1
    assert records[-1]["type"] == "end" and records[-1]["files"] == 5
    exported = {r["path"]: r for r in records if r["type"] == "file"}
    assert set(exported) == {"MEMORY.md", "memory/2026-01-05.md", "memory/projects/团队.md", "memory/crlf.md", "memory/latin1.md"}
    assert exported["memory/latin1.md"]["encoding"] == "base64" and exported["MEMORY.md"]["encoding"] == "utf-8"
    assert {s["path"] for s in records[-1]["skipped"]} == {"notes/extra.md"}

    with open_manager(target, cfg(db="b.sqlite")) as b:
        report = import_files(b, read_export(text.splitlines()))
        assert report.indexed and sorted(report.written) == sorted(exported)
        assert citations(b) == expected  # same answers, same citations
        again = export_text(b)
    source_tree = {k: v for k, v in tree(source).items() if k in exported}
    assert {k: v for k, v in tree(target).items() if k in exported} == source_tree  # byte for byte
    for rel in exported:  # and dated as they were (the export keeps whole seconds)
        assert int((target / rel).stat().st_mtime) == int((source / rel).stat().st_mtime), rel
    strip = lambda t: [json.loads(x) for x in t.splitlines()][1:]  # noqa: E731 - the header has the time
    assert strip(again)[:-1] == strip(text)[:-1]

    with open_manager(target, cfg(db="b.sqlite")) as b:  # importing twice changes nothing
        second = import_files(b, read_export(text.splitlines()))
    assert second.written == [] and sorted(second.unchanged) == sorted(exported)


def test_another_backend_exports_what_builtin_imports(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    source = make_ws({k: v for k, v in NOTES.items() if isinstance(v, str)}, name="fake-src")
    target = make_ws({}, name="builtin-dst")
    with registered(plugin(backends={"toy": FakeBackend})):
        with open_manager(source, cfg(backend="toy")) as toy:
            assert toy.backend == "fake"
            text = export_text(toy)
    assert json.loads(text.splitlines()[0])["backend"] == "fake"
    with open_manager(target, cfg()) as builtin:
        report = import_files(builtin, read_export(text.splitlines()))
        assert "MEMORY.md" in report.written
        assert builtin.search("which database do we use?").results[0].path == "MEMORY.md"


def test_conflicts_are_kept_unless_overwrite(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    source = make_ws({"MEMORY.md": "# Memory\n- new text\n"}, name="s")
    target = make_ws({"MEMORY.md": "# Memory\n- the user's own text\n"}, name="t")
    with open_manager(source, cfg(db="s.sqlite")) as a:
        files = read_export(export_text(a).splitlines())
    with open_manager(target, cfg(db="t.sqlite")) as b:
        kept = import_files(b, files)
        assert kept.conflicts == ["MEMORY.md"] and kept.written == []
        assert "the user's own text" in (target / "MEMORY.md").read_text(encoding="utf-8")
        dry = import_files(b, files, on_conflict="overwrite", dry_run=True)
        assert dry.written == ["MEMORY.md"] and "the user's own text" in (target / "MEMORY.md").read_text(encoding="utf-8")
        import_files(b, files, on_conflict="overwrite")
        assert (target / "MEMORY.md").read_text(encoding="utf-8") == "# Memory\n- new text\n"
        assert b.search("new text").results[0].path == "MEMORY.md"


def _valid(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> list[str]:
    src = make_ws({"MEMORY.md": "# Memory\n- a fact\n", "memory/a.md": "# A\n"}, name="v")
    with open_manager(src, cfg(db="v.sqlite")) as m:
        return export_text(m).splitlines()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: lines[:-1], "truncated"),
        (lambda lines: [], "empty input"),
        (lambda lines: lines[1:], "header"),
        (lambda lines: [lines[0].replace('"version":1', '"version":9'), *lines[1:]], "format version 9"),
        (lambda lines: [lines[0], lines[1].replace("a fact", "a fast"), *lines[2:]], "does not match its sha256"),
        (lambda lines: [lines[0], lines[1].replace('"path":"MEMORY.md"', '"path":"../MEMORY.md"'), *lines[2:]], "unsafe path"),
        (lambda lines: [lines[0], lines[1], lines[1], *lines[2:]], "appears twice"),
        (lambda lines: [lines[0], "{not json", *lines[1:]], "line 2: not JSON"),
        (lambda lines: [*lines, lines[1]], "after the end record"),
    ],
)
def test_damaged_exports_write_nothing(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], damage: Callable[[list[str]], list[str]], message: str) -> None:
    lines = damage(_valid(make_ws, cfg))
    with pytest.raises(ImportFormatError, match=message):
        read_export(lines)
