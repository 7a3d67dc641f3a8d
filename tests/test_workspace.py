"""Discovery of memory files, dated vs evergreen notes, and path safety."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from mdrecall.config import parse_config
from mdrecall.errors import PathError
from mdrecall.sources import workspace
from mdrecall.sources.workspace import (
    discover_memory_files,
    is_evergreen,
    note_date,
    read_inside,
    resolve_memory_path,
    stat_inside,
)


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


def _discovered_by_definition(ws: Path, config: object) -> list[tuple[str, str]]:
    """Discovery's rules, written plainly (a ``Path`` and a ``realpath`` per file): what the fast walk
    (real paths, stored paths and the roots check taken per directory) must find, in its order."""
    from mdrecall.sources.workspace import SKIP_DIR_NAMES, allowed_roots, extra_path_roots

    roots = allowed_roots(ws, config)  # type: ignore[arg-type]

    def inside(path: str) -> bool:
        real = Path(os.path.realpath(path))
        return any(real == root or real.is_relative_to(root) for root in roots)

    candidates: list[str] = []
    seen_dirs: set[str] = set()

    def walk(directory: str) -> None:
        if os.path.realpath(directory) in seen_dirs:
            return
        seen_dirs.add(os.path.realpath(directory))
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.name.startswith(".") or entry.name in SKIP_DIR_NAMES:
                continue
            if entry.is_dir():
                if not entry.is_symlink() or inside(entry.path):
                    walk(entry.path)
            elif entry.name.endswith(".md") and entry.is_file():
                candidates.append(entry.path)

    if (ws / "MEMORY.md").is_file():
        candidates.append(str(ws / "MEMORY.md"))
    if (ws / "memory").is_dir():
        walk(str(ws / "memory"))
    for extra in extra_path_roots(ws, config):  # type: ignore[arg-type]
        if extra.is_dir():
            walk(str(extra))
        elif extra.is_file() and extra.name.endswith(".md"):
            candidates.append(str(extra))
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real not in seen and inside(path):
            seen.add(real)
            out.append((path, Path(os.path.relpath(path, ws)).as_posix()))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_discovery_matches_its_rules_on_random_trees(tmp_path: Path, seed: int) -> None:
    """Links to files and folders (inside, outside, loops), extraPaths of every kind (the workspace
    itself, a folder outside, a file), notes beside other files: the same files, names and order."""
    import random

    rnd = random.Random(seed)
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    for folder in (ws / "memory", ws / "notes", outside):
        folder.mkdir(parents=True)
    folders = [ws / "memory", ws / "notes", outside, ws]
    for i in range(40):
        here, kind = rnd.choice(folders), rnd.random()
        if kind < 0.25:
            (here / f"d{i}").mkdir()
            folders.append(here / f"d{i}")
        elif kind < 0.7:
            (here / f"n{i}.md").write_text(f"- note {i}\n")
        elif kind < 0.8:
            (here / f"f{i}.txt").write_text("not a note\n")
        elif kind < 0.9:
            (here / f"l{i}.md").symlink_to(rnd.choice(sorted(tmp_path.rglob("*.md")) or [ws / "memory"]))
        else:
            (here / f"ld{i}").symlink_to(rnd.choice(folders), target_is_directory=True)
    if rnd.random() < 0.5:
        (ws / "MEMORY.md").write_text("# Memory\n")
    extras = rnd.choice([[], ["notes"], ["."], [str(outside)], ["notes", "notes/n3.md", str(outside)], ["../outside"]])
    config = parse_config({"extraPaths": extras})
    found = [(f.abspath, f.rel_path) for f in discover_memory_files(ws, config)]
    assert found == _discovered_by_definition(ws, config)


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


@pytest.mark.parametrize("descriptor_paths", [True, False], ids=["checked-after-open", "resolved-before-open"])
def test_read_inside_reads_regular_files_inside_the_root_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              descriptor_paths: bool) -> None:  # fmt: skip
    """The search's first read of an indexed file (search/filelines.py, search/dating.py): the file
    opened must resolve inside the workspace (on Linux checked on the open descriptor, elsewhere on
    the path before opening) and be a regular file; anything else is None, never an error."""
    if descriptor_paths and not workspace._FD_LINKS:
        pytest.skip("no /proc/self/fd here")
    monkeypatch.setattr(workspace, "_FD_LINKS", descriptor_paths)
    ws, outside = (tmp_path / "ws").resolve(), tmp_path / "secret.md"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "a.md"
    note.write_text("- hello\n", encoding="utf-8")
    outside.write_text("- secret\n", encoding="utf-8")
    (ws / "memory" / "out.md").symlink_to(outside)
    (ws / "memory" / "in.md").symlink_to(note)
    root = str(ws)
    found = read_inside(str(note), root)
    assert found is not None and found[1] == b"- hello\n" and found[0].st_size == 8
    assert read_inside(str(ws / "memory" / "in.md"), root) is not None  # a link that stays inside
    assert read_inside(str(ws / "memory" / "out.md"), root) is None
    assert stat_inside(str(ws / "memory" / "out.md"), root) is None
    assert read_inside(str(ws / "memory" / "out.md"), None) is not None  # no root: an allowed extra folder
    assert read_inside(str(ws / "memory"), root) is None  # a folder
    assert read_inside(str(ws / "memory" / "missing.md"), root) is None
    assert read_inside(str(ws / "memory" / "a\x00.md"), root) is None
    st = stat_inside(str(note), root)
    assert st is not None and st.st_size == 8


def test_read_inside_resolves_the_path_where_the_descriptor_cannot_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox may list /proc/self/fd but refuse to read its links: the check then resolves the
    path, as where there is no /proc, instead of refusing every file."""
    monkeypatch.setattr(workspace, "_FD_LINKS", True)
    real_readlink = os.readlink

    def refused(path: str) -> str:
        if str(path).startswith("/proc/self/fd/"):
            raise PermissionError(13, "Permission denied")
        return real_readlink(path)

    monkeypatch.setattr(workspace.os, "readlink", refused)
    ws, outside = (tmp_path / "ws").resolve(), tmp_path / "secret.md"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("- hello\n", encoding="utf-8")
    outside.write_text("- secret\n", encoding="utf-8")
    (ws / "memory" / "out.md").symlink_to(outside)
    assert read_inside(str(ws / "memory" / "a.md"), str(ws)) is not None
    assert read_inside(str(ws / "memory" / "out.md"), str(ws)) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_read_inside_does_not_wait_on_a_fifo_named_like_a_note(tmp_path: Path) -> None:
    """A FIFO opened for reading waits for a writer: a search must not hang on one."""
    import threading

    fifo = tmp_path / "memory.md"
    os.mkfifo(fifo)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(read_inside(str(fifo), str(tmp_path.resolve()))), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # the old open() would wait here: free it before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("read_inside waited on a FIFO")
    assert found == [None]
