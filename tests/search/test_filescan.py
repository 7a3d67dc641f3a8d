"""A search that could not refresh the index reads the files it does not hold yet (search/filescan.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.search import filescan

NOTES = {
    "MEMORY.md": "# Memory\n- The staging database is called amber.\n",
    "memory/2026-11-01.md": "# 2026-11-01\n- Met Dana about the quarterly roadmap.\n",
    "memory/projects/atlas.md": "# Atlas\n- Atlas ships in March.\n",
}


def _paths(resp: Any) -> list[str]:
    return [r.path for r in resp.results]


def test_a_search_during_another_threads_first_index_reads_the_files(make_ws: Callable[..., Path],
                                                                      cfg: Callable[..., dict]) -> None:  # fmt: skip
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"searchWaitMs": 50})) as m:
        inside, release = threading.Event(), threading.Event()

        def slow(_progress: Any) -> None:  # the first index, stuck before it wrote a file
            inside.set()
            release.wait(30)

        builder = threading.Thread(target=lambda: m.sync(progress=slow), daemon=True)
        builder.start()
        try:
            assert inside.wait(30)
            resp = m.search("when does atlas ship?")
        finally:
            release.set()
            builder.join(30)
    assert _paths(resp) == ["memory/projects/atlas.md"] and "March" in resp.results[0].snippet
    assert resp.stale and resp.mode == "file-scan" and resp.reason is None
    assert "3 memory file(s) not indexed yet were read directly (keyword match only)" in resp.warnings
    assert any("no index yet (3 file(s) not indexed), read directly instead" in w for w in resp.warnings)


def test_changed_and_deleted_files_answer_as_they_are_now(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        m.sync()
        (ws / "memory/projects/atlas.md").write_text("# Atlas\n- Atlas slipped: it ships in June.\n")
        (ws / "memory/2026-11-01.md").unlink()
        atlas = m.search("when does atlas ship?", min_score=0)
        dana = m.search("quarterly roadmap with Dana", min_score=0)
        amber = m.search("staging database", min_score=0)
    assert atlas.stale and [h.snippet for h in atlas.results] == ["# Atlas\n- Atlas slipped: it ships in June."]
    assert atlas.results[0].explanation["mode"] == "file-scan"
    assert dana.stale and dana.results == []  # the deleted note's index entry is not an answer any more
    # An untouched file still answers from the index, hybrid or not, with no direct read of it.
    assert _paths(amber) == ["MEMORY.md"] and amber.mode == "keyword-only"


def test_a_touched_file_keeps_its_index_entry(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        m.sync()
        note = ws / "memory/projects/atlas.md"
        os.utime(note, (1_000_000_000, 1_000_000_000))  # mtime moved, content the same
        resp = m.search("when does atlas ship?")
    assert _paths(resp) == ["memory/projects/atlas.md"]
    assert resp.results[0].explanation["mode"] == "keyword-only"  # the index's hit, not a direct read
    assert not any("were read directly" in w for w in resp.warnings)


def test_the_direct_read_is_bounded_and_says_what_it_left(make_ws: Callable[..., Path], cfg: Callable[..., dict],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    files = {f"memory/2026-01-{i + 1:02d}.md": f"# Day {i}\n- Weather note {i}: windy.\n" for i in range(12)}
    ws = make_ws({**files, "memory/newest.md": "# Newest\n- The zeppelin lands on Friday.\n"})
    for i in range(12):
        os.utime(ws / f"memory/2026-01-{i + 1:02d}.md", (1_700_000_000 + i, 1_700_000_000 + i))
    monkeypatch.setattr(filescan, "MAX_FILES", 5)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        resp = m.search("when does the zeppelin land?")
    assert _paths(resp) == ["memory/newest.md"]  # newest first: the recent note was among those read
    assert "5 memory file(s) not indexed yet were read directly (keyword match only); 8 more were not read " \
           "(the direct read is bounded; they are searchable once indexed)" in resp.warnings  # fmt: skip
    assert not any("read directly instead" in w for w in resp.warnings)  # some may still be missed: said so


def test_the_direct_read_redacts_secrets_and_stays_inside_the_memory_paths(make_ws: Callable[..., Path], tmp_path: Path,
                                                                          cfg: Callable[..., dict]) -> None:  # fmt: skip
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n- The vault passphrase hint is heliotrope.\n")
    ws = make_ws({"MEMORY.md": "# Memory\n- Deploy key: sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c for the heliotrope job.\n"})
    (ws / "memory").mkdir()
    (ws / "memory" / "linked.md").symlink_to(outside)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        resp = m.search("heliotrope")
    assert _paths(resp) == ["MEMORY.md"]  # the link out of the workspace is not followed
    assert "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c" not in resp.results[0].snippet
    assert "heliotrope" in resp.results[0].snippet


def test_nothing_relevant_in_the_files_read_is_said_as_such(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        resp = m.search("kangaroo migration budget")
        roadmap = m.search("roadmap")
    assert resp.results == [] and resp.reason == "no candidates"
    assert _paths(roadmap) == ["memory/2026-11-01.md"]
