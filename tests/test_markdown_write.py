"""Replacing user Markdown: compare-and-swap with merge, concurrent writers, symlinks, modes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mdrecall.markdown_write as mw
from mdrecall.errors import StoreError
from mdrecall.markdown_write import merge3, read_markdown, write_markdown
from writers import Appender

# --- merge3 ---------------------------------------------------------------------------------------


def test_merge_appends_on_both_sides_keeps_both_theirs_first() -> None:
    base = "# Memory\n\n- a\n"
    ours = base + "- promoted\n"
    theirs = base + "- typed by the user\n"
    assert merge3(base, ours, theirs) == "# Memory\n\n- a\n- typed by the user\n- promoted\n"


def test_merge_edits_in_different_places() -> None:
    base = "# Memory\n\n## People\n- Dana\n\n## Promoted (2026-03-04)\n- one\n"
    ours = base.replace("- one\n", "- one\n- two\n")
    theirs = base.replace("- Dana\n", "- Dana\n- Lee\n") + "\n## Notes\n- later\n"
    # Both appended after "- one": their lines stay right where they put them, ours follow.
    merged = merge3(base, ours, theirs)
    assert merged == "# Memory\n\n## People\n- Dana\n- Lee\n\n## Promoted (2026-03-04)\n- one\n\n## Notes\n- later\n- two\n"
    middle = base.replace("- Dana\n", "- Dana\n- Kim\n")
    assert merge3(base, ours, middle) == middle.replace("- one\n", "- one\n- two\n")


def test_merge_conflict_keeps_every_added_line() -> None:
    base = "- x\n- y\n"
    ours = "- x (ours)\n- y\n"
    theirs = "- x (theirs)\n- y\n"
    assert merge3(base, ours, theirs) == "- x (theirs)\n- x (ours)\n- y\n"


def test_merge_same_change_once_and_deletions() -> None:
    base = "a\nb\nc\n"
    assert merge3(base, "a\nb\nc\nd\n", "a\nb\nc\nd\n") == "a\nb\nc\nd\n"
    assert merge3(base, "a\nc\n", "a\nb\nc\ne\n") == "a\nc\ne\n"
    assert merge3(base, base, "z\n") == "z\n"
    assert merge3("", "new\n", "typed\n") == "typed\nnew\n"


def test_merge_without_final_newline_does_not_glue_lines() -> None:
    assert merge3("a", "a\nours\n", "a\ntheirs\n") == "a\ntheirs\nours\n"


# --- write_markdown -------------------------------------------------------------------------------


def test_creates_replaces_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    result = write_markdown(path, "# Memory\n", base=None)
    assert result.changed and path.read_text() == "# Memory\n" and path.stat().st_mode & 0o777 == 0o644
    path.chmod(0o640)
    write_markdown(path, "# Memory\n- a\n", base="# Memory\n")
    assert path.read_text() == "# Memory\n- a\n" and path.stat().st_mode & 0o777 == 0o640
    assert not write_markdown(path, "# Memory\n- a\n", base="# Memory\n- a\n").changed
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]  # no temp files left


def test_an_edit_made_since_the_read_is_merged(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n")
    base = read_markdown(path)
    with path.open("a") as handle:  # the user appends after we read
        handle.write("- typed\n")
    result = write_markdown(path, "# Memory\n- promoted\n", base=base)
    assert result.merged and path.read_text() == "# Memory\n- typed\n- promoted\n"


def test_writes_through_a_symlink(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    target = notes / "long-term.md"
    target.write_text("# Memory\n")
    link = tmp_path / "MEMORY.md"
    link.symlink_to(target)
    result = write_markdown(link, "# Memory\n- promoted\n", base="# Memory\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "# Memory\n- promoted\n" and result.path == target
    assert sorted(p.name for p in notes.iterdir()) == ["long-term.md"]


def test_undecodable_bytes_survive(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"# Memory\n- caf\xe9\n")
    base = read_markdown(path)
    assert base is not None
    write_markdown(path, base + "- promoted\n", base=base)
    assert path.read_bytes() == b"# Memory\n- caf\xe9\n- promoted\n"


def _our_insert(text: str, line: str) -> str:
    """Insert right after the heading (a change in the middle, not an append)."""
    head, _, rest = text.partition("\n")
    return f"{head}\n{line}\n{rest}"


def test_no_append_lost_under_a_concurrent_appender(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n")
    ours = [f"- ours {i}" for i in range(150)]
    with Appender(path, "theirs") as appender:
        appender.wait_started()
        for line in ours:
            base = read_markdown(path)
            assert base is not None
            write_markdown(path, _our_insert(base, line), base=base)
        appender.stop()
    text = path.read_text()
    lost = appender.lost(text)
    assert appender.count > 20 and lost == [], f"{len(lost)} of {appender.count} concurrent appends lost"
    assert [line for line in ours if line not in text.split("\n")] == []
    assert not list(tmp_path.glob(".MEMORY.md.*"))


def _editor_save(path: Path, line: str) -> None:
    """An editor's save: write a temp file, rename it over the original."""
    tmp = path.with_name(".edit.tmp")
    tmp.write_text(path.read_text() + line + "\n")
    os.replace(tmp, path)


def test_a_save_by_rename_just_before_the_swap_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the exchange closes: a plain check-then-replace would overwrite this save."""
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n- a\n")
    real = mw._renameat2
    saves = []

    def racing(src: Path, dst: Path, flags: int) -> bool:
        if flags == mw._RENAME_EXCHANGE and len(saves) < 3:
            saves.append(f"- saved {len(saves)}")
            _editor_save(path, saves[-1])  # after our last look, before the swap
        return real(src, dst, flags)

    monkeypatch.setattr(mw, "_renameat2", racing)
    result = write_markdown(path, "# Memory\n- promoted\n- a\n", base="# Memory\n- a\n")
    assert result.merged
    lines = path.read_text().split("\n")
    # Lines added at the same place in different rounds may come out in another order; none is lost.
    assert lines[:3] == ["# Memory", "- promoted", "- a"] and sorted(lines[3:]) == ["", *saves]


def test_without_renameat2_appends_are_still_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n")
    real_replace = os.replace
    appended = []

    def replace(src: object, dst: object) -> None:
        if Path(str(dst)) == path and not appended:
            appended.append(True)
            with path.open("a") as handle:  # lands in the file being replaced
                handle.write("- typed\n")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(mw, "_renameat2", lambda src, dst, flags: False)
    monkeypatch.setattr(mw.os, "replace", replace)
    write_markdown(path, "# Memory\n- promoted\n", base="# Memory\n")
    assert path.read_text() == "# Memory\n- typed\n- promoted\n"
    new = tmp_path / "memory" / "new.md"
    write_markdown(new, "# New\n", base=None)  # creation falls back to link(): never over a file
    assert new.read_text() == "# New\n"


def test_a_writer_that_never_pauses_loses_nothing_even_when_we_give_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every swap races (simulated: an append lands in the file each time just before the swap):
    after the deadline the error names a file holding the merged text, and the live file plus that
    file hold every line."""
    path = tmp_path / "MEMORY.md"
    path.write_text("# Memory\n")
    real = mw._renameat2
    appended: list[str] = []

    def racing(src: Path, dst: Path, flags: int) -> bool:
        if flags == mw._RENAME_EXCHANGE:
            appended.append(f"- theirs {len(appended)}")
            with path.open("a") as handle:
                handle.write(appended[-1] + "\n")
        return real(src, dst, flags)

    monkeypatch.setattr(mw, "_renameat2", racing)
    monkeypatch.setattr(mw, "SWAP_DEADLINE_S", 0.5)
    with pytest.raises(StoreError, match="saved with ours in") as info:
        write_markdown(path, "# Memory\n- ours\n", base="# Memory\n")
    aside = Path(str(info.value).rsplit(" in ", 1)[1])
    everything = set(path.read_text().split("\n")) | set(aside.read_text().split("\n"))
    assert appended and [line for line in appended if line not in everything] == [] and "- ours" in everything
