"""Discovery of memory files, dated vs evergreen notes, and path safety."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from mdrecall.config import parse_config
from mdrecall.errors import PathError
from mdrecall.sources.workspace import discover_memory_files, is_evergreen, note_date, resolve_memory_path


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content, encoding="utf-8")
    return root


def _rels(ws: Path, **config: object) -> list[str]:
    return sorted(f.rel_path for f in discover_memory_files(ws, parse_config(config)))


def test_memory_md_and_memory_tree_recursive(tmp_path: Path) -> None:
    ws = write_files(
        tmp_path / "ws",
        {
            "MEMORY.md": "# root\n",
            "memory/2026-01-02.md": "day\n",
            "memory/projects/a.md": "a\n",
            "memory/projects/deep/er/b.md": "b\n",
            "memory/notes.txt": "not markdown\n",
            "memory/.dreams/state.md": "hidden dir\n",
            "memory/.hidden.md": "hidden file\n",
            "memory/node_modules/pkg/readme.md": "vendored\n",
            "README.md": "not memory\n",
            "docs/other.md": "not memory either\n",
        },
    )
    assert _rels(ws) == ["MEMORY.md", "memory/2026-01-02.md", "memory/projects/a.md", "memory/projects/deep/er/b.md"]


def test_extra_paths_dirs_files_and_home_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    write_files(home, {"agent-notes/n1.md": "n1\n", "agent-notes/sub/n2.md": "n2\n"})
    monkeypatch.setenv("HOME", str(home))
    ws = write_files(
        tmp_path / "ws",
        {
            "MEMORY.md": "root\n",
            "notes/x.md": "x\n",
            "notes/y.txt": "y\n",
            "docs/single.md": "single\n",
            "docs/ignored.md": "not listed\n",
        },
    )
    found = discover_memory_files(ws, parse_config({"extraPaths": ["notes", "docs/single.md", "~/agent-notes", "  "]}))
    rels = sorted(f.rel_path for f in found)
    assert "notes/x.md" in rels and "docs/single.md" in rels
    assert "docs/ignored.md" not in rels and "notes/y.txt" not in rels
    # ~ is expanded; files outside the workspace get a relative path that still names them
    outside = [f for f in found if f.path.is_relative_to(home)]
    assert sorted(f.path.name for f in outside) == ["n1.md", "n2.md"]
    assert {f.rel_path for f in outside} == {"../home/agent-notes/n1.md", "../home/agent-notes/sub/n2.md"}
    assert all("\\" not in f.rel_path for f in found)


def test_symlinks_out_of_allowed_roots_are_skipped(tmp_path: Path) -> None:
    outside = write_files(tmp_path / "outside", {"secret.md": "secret\n", "dir/leak.md": "leak\n"})
    ws = write_files(tmp_path / "ws", {"memory/real.md": "real\n", "notes/n.md": "n\n"})
    (ws / "memory" / "secret-link.md").symlink_to(outside / "secret.md")
    (ws / "memory" / "leakdir").symlink_to(outside / "dir", target_is_directory=True)
    (ws / "memory" / "sub").mkdir()
    (ws / "memory" / "sub" / "up.md").symlink_to(ws / "notes" / "n.md")  # inside the workspace, not a memory root
    assert _rels(ws) == ["memory/real.md"]


def test_memory_md_linked_out_of_the_workspace_is_neither_indexed_nor_read(tmp_path: Path) -> None:
    """A ``MEMORY.md`` link must not make its target (anywhere on disk) an allowed root."""
    outside = write_files(tmp_path / "outside", {"private.md": "bank pin 4321\n"})
    ws = write_files(tmp_path / "ws", {"memory/real.md": "real\n"})
    (ws / "MEMORY.md").symlink_to(outside / "private.md")
    assert _rels(ws) == ["memory/real.md"]
    with pytest.raises(PathError) as err:
        resolve_memory_path(ws, parse_config({}), "MEMORY.md")
    assert err.value.code == "outside_workspace"
    # A MEMORY.md that links to a note inside memory/ stays readable (and is indexed once).
    (ws / "MEMORY.md").unlink()
    (ws / "MEMORY.md").symlink_to(ws / "memory" / "real.md")
    assert len(_rels(ws)) == 1
    real, rel = resolve_memory_path(ws, parse_config({}), "MEMORY.md")
    assert real == (ws / "memory" / "real.md").resolve() and rel == "MEMORY.md"


def test_dedup_by_real_path_and_links_inside_roots(tmp_path: Path) -> None:
    ws = write_files(tmp_path / "ws", {"MEMORY.md": "root\n", "memory/a.md": "a\n", "notes/n.md": "n\n"})
    (ws / "memory" / "alias.md").symlink_to(ws / "memory" / "a.md")
    (ws / "memory" / "loop").symlink_to(ws / "memory", target_is_directory=True)  # a cycle
    (ws / "memory" / "to-notes.md").symlink_to(ws / "notes" / "n.md")  # target inside an extra path
    found = discover_memory_files(ws, parse_config({"extraPaths": ["notes", "notes/n.md"]}))
    reals = [os.path.realpath(f.path) for f in found]
    assert len(reals) == len(set(reals)) == 3  # MEMORY.md, a.md, n.md once each
    assert {Path(r).name for r in reals} == {"MEMORY.md", "a.md", "n.md"}


def test_note_dates_and_evergreen() -> None:
    assert note_date("memory/2026-01-31.md") == date(2026, 1, 31)
    assert note_date("memory/daily/2026-01-31-standup.md") == date(2026, 1, 31)
    assert note_date("memory/2026-13-40.md") is None  # not a real date
    assert note_date("notes/2026-01-31.md") is None  # dated names only count under memory/
    assert is_evergreen("MEMORY.md")
    assert is_evergreen("memory/people.md")
    assert not is_evergreen("memory/2026-01-31.md")


@pytest.fixture
def path_ws(tmp_path: Path) -> Path:
    ws = write_files(tmp_path / "ws", {"MEMORY.md": "root\n", "memory/a.md": "a\n", "secrets.md": "no\n", "memory/x.txt": "t"})
    write_files(tmp_path, {"outside.md": "outside\n"})
    (ws / "memory" / "out-link.md").symlink_to(tmp_path / "outside.md")
    return ws


@pytest.mark.parametrize(
    ("rel", "code"),
    [
        ("", "invalid_path"),
        ("memory/a\x00.md", "invalid_path"),
        ("memory\\a.md", "invalid_path"),
        ("memory/", "invalid_path"),
        ("secrets.md", "not_memory_path"),
        ("memory/x.txt", "not_memory_path"),
        ("../outside.md", "outside_workspace"),
        ("/etc/passwd", "outside_workspace"),
        ("memory/../../outside.md", "outside_workspace"),
        ("memory/out-link.md", "outside_workspace"),
        ("memory/missing.md", "not_found"),
    ],
)
def test_resolve_memory_path_refusals(path_ws: Path, rel: str, code: str) -> None:
    with pytest.raises(PathError) as info:
        resolve_memory_path(path_ws, parse_config({}), rel)
    assert info.value.code == code


def test_resolve_memory_path_normalises(path_ws: Path) -> None:
    real, rel = resolve_memory_path(path_ws, parse_config({}), "./memory/../memory/a.md")
    assert rel == "memory/a.md"
    assert real == (path_ws / "memory" / "a.md").resolve()
