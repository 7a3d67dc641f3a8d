"""search/filelines.py: line lengths and speakers read from the files, cached by (mtime, size),
never read from outside the workspace, and bounded by files and lines held."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdrecall.search.filelines import FileLineLengths


def test_a_changed_file_is_read_again_and_an_unchanged_one_is_not(tmp_path: Path) -> None:
    note = tmp_path / "memory" / "a.md"
    note.parent.mkdir()
    note.write_text("- Caroline: hi\n- Melanie: hello there\n", encoding="utf-8")
    lines = FileLineLengths(tmp_path)
    first = lines.names("memory/a.md", "memory")
    assert first is not None and first.lengths == [14, 22, 0] and first.names[:2] == ["caroline", "melanie"]
    assert lines.names("memory/a.md", "memory") is first  # cached
    note.write_text("- Caroline: a longer line now\n", encoding="utf-8")
    again = lines.names("memory/a.md", "memory")
    assert again is not None and again is not first and again.lengths == [29, 0]


def test_nothing_outside_the_workspace_is_read_even_after_a_link_is_swapped(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "secret.md"
    (ws / "memory").mkdir(parents=True)
    outside.write_text("- secret: " + "s" * 40 + "\n", encoding="utf-8")
    inside = ws / "memory" / "inside.md"
    inside.write_text("- fine\n", encoding="utf-8")
    lines = FileLineLengths(ws)
    assert lines("../secret.md", "memory") is None
    link = ws / "memory" / "link.md"
    link.symlink_to(outside)
    assert lines("memory/link.md", "memory") is None
    # A link read while it pointed inside, then swapped: the new target is checked before it is read.
    link.unlink()
    link.symlink_to(inside)
    assert lines("memory/link.md", "memory") == [6, 0]
    link.unlink()
    link.symlink_to(outside)
    assert lines("memory/link.md", "memory") is None


def test_a_link_into_a_sibling_folder_sharing_the_name_is_outside(tmp_path: Path) -> None:
    """``/x/ws2`` starts with ``/x/ws`` as a string, not as a folder: its files are not the workspace's."""
    ws, sibling = tmp_path / "ws", tmp_path / "ws2"
    (ws / "memory").mkdir(parents=True)
    sibling.mkdir()
    (sibling / "secret.md").write_text("- secret\n", encoding="utf-8")
    (ws / "memory" / "link.md").symlink_to(sibling / "secret.md")
    (ws / "memory" / "dir").symlink_to(sibling, target_is_directory=True)
    lines = FileLineLengths(ws)
    assert lines("memory/link.md", "memory") is None
    assert lines("memory/dir/secret.md", "memory") is None
    assert lines("../ws2/secret.md", "memory") is None


def test_the_cache_holds_at_most_its_lines(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    for i in range(6):
        (tmp_path / "memory" / f"n{i}.md").write_text("- x\n" * 99, encoding="utf-8")  # 100 lines each
    lines = FileLineLengths(tmp_path, max_files=100, max_lines=250)
    for i in range(6):
        assert lines(f"memory/n{i}.md", "memory") is not None
    assert lines._held_lines <= 250 and len(lines._cache) == 2
    assert list(lines._cache) == ["memory/n4.md", "memory/n5.md"]  # the least recently used went first


def test_a_file_nobody_asks_about_is_dropped_after_the_idle_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A renamed or deleted file's path is never asked for again: under churn a long-lived server
    kept every one up to the count (issue 28's soak). Unused for the idle time, it goes."""
    from mdrecall.search import lru

    now = [0.0]
    monkeypatch.setattr(lru, "_now", lambda: now[0])
    (tmp_path / "memory").mkdir()
    for name in ("old", "kept", "new"):
        (tmp_path / "memory" / f"{name}.md").write_text("- x\n", encoding="utf-8")
    lines = FileLineLengths(tmp_path, idle_s=60)
    assert lines("memory/old.md", "memory") is not None
    assert lines("memory/kept.md", "memory") is not None
    now[0] = 50.0
    assert lines("memory/kept.md", "memory") is not None  # asked again: its clock restarts
    now[0] = 100.0
    assert lines("memory/new.md", "memory") is not None
    assert list(lines._cache) == ["memory/kept.md", "memory/new.md"]


def test_a_growing_transcript_is_read_from_where_it_grew_as_a_fresh_read_reads_it(tmp_path: Path) -> None:
    """Appends (a line finished in a second write, CRLF, invalid bytes), rewrites and truncations:
    what the cache gives equals what a cache reading the file for the first time gives, and an
    append parses only the new lines."""
    import json
    import os
    import random

    from mdrecall.sources import appends

    rng = random.Random(9)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    lines = FileLineLengths(tmp_path)
    parsed: list[int] = []
    real_resume = appends.resume

    def counting(raw, kept):  # type: ignore[no-untyped-def]
        at = real_resume(raw, kept)
        parsed.append(len(raw) - at.start)
        return at

    import mdrecall.search.filelines as filelines

    filelines.resume = counting  # type: ignore[attr-defined]
    try:
        for step in range(60):
            raw = path.read_bytes()
            action = rng.random()
            if action < 0.7:
                for _ in range(rng.randint(1, 4)):
                    role = rng.choice(["user", "assistant"])
                    text = rng.choice(["Caroline: I moved to Oslo", "plain words", "Melanie: hi\u2028there"])
                    raw += json.dumps({"role": role, "content": text}).encode() + rng.choice([b"\n", b"\r\n"])
                if rng.random() < 0.2:
                    raw += b'{"role": "user", "content": "half a li'  # finished below, next step
                if rng.random() < 0.1:
                    raw += b"\xff\xfe garbage\n"
            elif action < 0.8 and raw:
                raw = raw.replace(b"Oslo", b"Bergen", 1)
            elif action < 0.9:
                raw = raw[: rng.randrange(len(raw) + 1)]
            else:
                raw += b'ne"}\n'
            path.write_bytes(raw)
            os.utime(path, ns=(step * 10**9, (step + 1) * 10**9))  # a new stamp every step
            got = lines.names("s.jsonl", "sessions")
            fresh = FileLineLengths(tmp_path).names("s.jsonl", "sessions")
            assert got is not None and fresh is not None
            assert (got.lengths, got.speakers, got.names, got.people) == (fresh.lengths, fresh.speakers, fresh.names, fresh.people)
    finally:
        filelines.resume = real_resume  # type: ignore[attr-defined]
    assert sum(1 for n in parsed[::2] if n < 200) > 20  # appends parsed only what was appended (the cache's calls)


def test_message_times_of_a_growing_transcript_equal_a_fresh_read(tmp_path: Path) -> None:
    import json
    import os
    import random

    from mdrecall.search.dating import FileTimes

    rng = random.Random(4)
    path = tmp_path / "s.jsonl"
    raw = b""
    times = FileTimes(tmp_path)
    for step in range(60):
        action = rng.random()
        if action < 0.75:
            for _ in range(rng.randint(1, 4)):
                stamp = rng.choice([None, "2026-11-14T10:00:00Z", 1763114400 + step])
                record = {"role": "user", "content": "hi", **({"timestamp": stamp} if stamp is not None else {})}
                raw += json.dumps(record).encode() + b"\n"
            if rng.random() < 0.2:
                raw += b'{"role": "user", "content": "x", "timestamp": 17631'  # unfinished
            elif rng.random() < 0.2:  # a whole record without its newline: what follows joins its line
                raw += json.dumps({"role": "user", "content": "y", "timestamp": 1763114400}).encode()
        elif action < 0.85:
            raw = raw[: rng.randrange(len(raw) + 1)]
        else:
            raw = raw.replace(b"2026-11-14", b"2026-11-15", 1)
        path.write_bytes(raw)
        os.utime(path, ns=(step * 10**9, (step + 1) * 10**9))
        assert times.messages("s.jsonl") == FileTimes(tmp_path).messages("s.jsonl")


def test_a_file_checked_under_the_same_unchanged_token_is_not_checked_again(tmp_path: Path) -> None:
    import os

    from mdrecall.search.filelines import files_unchanged

    note = tmp_path / "a.md"
    note.write_text("- Caroline: hi\n", encoding="utf-8")
    lines = FileLineLengths(tmp_path)
    with files_unchanged(("w", 1)):
        assert lines("a.md", "memory") == [14, 0]
    note.write_text("- Caroline: a longer line\n", encoding="utf-8")
    os.utime(note, ns=(1, 10**9))
    with files_unchanged(("w", 1)):  # no change seen since: taken from the cache without a stat
        assert lines("a.md", "memory") == [14, 0]
    with files_unchanged(("w", 2)):  # a change seen: checked, read again
        assert lines("a.md", "memory") == [25, 0]
    note.write_text("- Caroline: shorter\n", encoding="utf-8")
    os.utime(note, ns=(1, 2 * 10**9))
    assert lines("a.md", "memory") == [19, 0]  # outside a search that knows: always checked


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_fifo_put_where_a_note_was_is_not_waited_on(tmp_path: Path) -> None:
    """An indexed note replaced by a FIFO: reading it for a citation's lines must not hang the search."""
    import os
    import threading

    from mdrecall.search.dating import FileTimes

    (tmp_path / "memory").mkdir()
    os.mkfifo(tmp_path / "memory" / "a.md")
    lines, times = FileLineLengths(tmp_path), FileTimes(tmp_path)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.extend([lines("memory/a.md", "memory"), times.messages("memory/a.md"),
                                                           times.mtime("memory/a.md")]), daemon=True)  # fmt: skip
    reader.start()
    reader.join(5)
    if reader.is_alive():
        with open(tmp_path / "memory" / "a.md", "wb"):
            pass
        pytest.fail("a FIFO was waited on")
    assert found == [None, None, None]


def test_lines_a_sync_read_are_kept_and_a_search_does_not_read_them_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prime`` (the sync's ``on_read``) keeps what a search's own read would: the same lines, checked
    by stamp, read again only once the file changed; and only while the cache has room."""
    import os

    from mdrecall.search import filelines

    note = tmp_path / "memory" / "a.md"
    note.parent.mkdir()
    note.write_text("- Caroline: hi\n- Melanie: hello there\n- Caroline: bye\n", encoding="utf-8")
    st = note.stat()
    want = FileLineLengths(tmp_path).names("memory/a.md", "memory")
    reads: list[str] = []
    real = filelines.read_inside
    monkeypatch.setattr(filelines, "read_inside", lambda full, root: reads.append(full) or real(full, root))
    lines = FileLineLengths(tmp_path)
    lines.prime("memory/a.md", (st.st_mtime_ns, st.st_size), note.read_bytes())
    got = lines.names("memory/a.md", "memory")
    assert got is not None and want is not None and reads == []
    assert (got.lengths, got.speakers, got.names, got.people) == (want.lengths, want.speakers, want.names, want.people)
    note.write_text("- Caroline: changed\n", encoding="utf-8")
    os.utime(note, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))
    again = lines.names("memory/a.md", "memory")
    assert again is not None and again.lengths == [19, 0] and len(reads) == 1
    full = FileLineLengths(tmp_path, max_files=1)
    full.names("memory/a.md", "memory")
    full.prime("memory/b.md", (1, 1), b"- x\n")
    assert list(full._cache) == ["memory/a.md"]  # nothing a search used is pushed out
    few = FileLineLengths(tmp_path, max_lines=16)  # primed up to a quarter of its lines: 4
    few.prime("memory/b.md", (1, 1), b"- x\n")  # 2 lines: held 2
    few.prime("memory/c.md", (1, 1), b"- y\n")  # held 2: not yet a quarter; now 4
    few.prime("memory/d.md", (1, 1), b"- z\n")  # a quarter held: not kept
    few.prime("memory/e.md", (1, 1), b"x" * (filelines.PRIME_MAX_BYTES + 1))  # too large to keep
    assert list(few._cache) == ["memory/b.md", "memory/c.md"]


def test_a_managers_sync_hands_the_files_it_read_to_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a file written within the racy window (index/indexer.py ``is_racy``): its bytes may not be
    the ones its stamp names, so a search reads it itself."""
    import os
    import time

    from mdrecall import open_manager
    from mdrecall.search import filelines

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The cat is called Miso.\n", encoding="utf-8")
    (ws / "memory" / "2026-01-05.md").write_text("# 2026-01-05\n\n- Miso had a vet visit.\n", encoding="utf-8")
    for note in (ws / "MEMORY.md", ws / "memory" / "2026-01-05.md"):  # written a while ago: not racy
        os.utime(note, (time.time() - 3600, time.time() - 3600))
    reads: list[str] = []
    real = filelines.read_inside
    monkeypatch.setattr(filelines, "read_inside", lambda full, root: reads.append(full) or real(full, root))
    with open_manager(ws, {"provider": "none"}, use_global_config=False) as m:
        m.sync()
        found = m.search("Miso")
        assert {h.path for h in found.results} == {"MEMORY.md", "memory/2026-01-05.md"}
    assert reads == []
