"""``remember``: one entry appended with provenance, safe targets, nothing of anyone else's lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mdrecall import PathError, open_manager
from mdrecall.config import load_config
from mdrecall.sources.remember import MAX_TEXT_CHARS, RememberError, daily_note_path, remember

NOW = datetime(2026, 11, 5, 9, 30, tzinfo=UTC)


def test_writes_todays_note_with_provenance_and_a_citation_read_file_accepts(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]
) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    first = remember(ws, "Deploys need a green canary for 30 minutes.", now=NOW, via="cli")
    assert first.path == daily_note_path(NOW) == "memory/2026-11-05.md" and first.created
    assert (ws / first.path).read_text(encoding="utf-8") == (
        "# 2026-11-05\n\n- Deploys need a green canary for 30 minutes. "
        "<!-- mdrecall:remembered at=2026-11-05T09:30:00Z via=cli -->\n"
    )
    second = remember(ws, "Multi-line facts\nkeep their lines", now=NOW)
    assert not second.created and (second.start_line, second.end_line) == (4, 5)
    with open_manager(ws, cfg()) as m:
        got = m.read_file(second.path, from_line=second.start_line, lines=second.end_line - second.start_line + 1)
        assert got.text == second.text
        assert got.text.startswith("- Multi-line facts <!-- mdrecall:remembered") and got.text.endswith("\n  keep their lines")
        # Searchable once synced (the CLI and memory_write sync right after writing).
        m.sync()
        assert m.search("green canary deploys").results[0].path == "memory/2026-11-05.md"


def test_an_entry_goes_under_the_section_it_names_never_under_the_last_one(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]
) -> None:
    from mdrecall.cli.workspace import MEMORY_SKELETON

    ws = make_ws({"MEMORY.md": MEMORY_SKELETON})

    def section(text: str, heading: str | None = None) -> str:
        written = remember(ws, text, target="MEMORY.md", now=NOW, heading=heading)
        lines = (ws / "MEMORY.md").read_text(encoding="utf-8").split("\n")
        assert lines[written.start_line - 1] == written.text  # the citation points at the entry
        return next(lines[i] for i in range(written.start_line - 1, -1, -1) if lines[i].startswith("## "))

    assert section("Decision: Postgres 16 for the billing store.") == "## Decisions"
    assert section("Decided to deploy on Tuesdays only.") == "## Decisions"
    assert section("Prefers oolong tea in the afternoon.") == "## Preferences"
    assert section("The CI runs on Buildkite.") == "## Remembered"  # nothing named: not under the last heading
    assert section("Dana owns the roadmap.", heading="People") == "## People"
    assert section("Staging is rebuilt nightly.") == "## Remembered"
    assert section("Bob owns on-call.", heading="Team") == "## Team"  # asked for: made
    text = (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert text.count("## Remembered") == 1 and text.count("## Decisions") == 1
    assert text.startswith(MEMORY_SKELETON.split("## Decisions")[0])  # the user's own text is kept as it was
    with open_manager(ws, cfg()) as m:
        m.sync()
        hit = m.search("billing store Postgres").results[0]
    # The provenance comment costs an agent nothing: not in snippets (memory_get still shows the file).
    assert hit.path == "MEMORY.md" and "Postgres 16" in hit.snippet and "mdrecall:remembered" not in hit.snippet


def test_time_zone_decides_the_day(make_ws: Callable[..., Path]) -> None:
    late = datetime(2026, 11, 5, 23, 30, tzinfo=UTC)
    assert daily_note_path(late, "Asia/Tokyo") == "memory/2026-11-06.md"
    assert daily_note_path(late, "America/New_York") == "memory/2026-11-05.md"
    ws = make_ws({".mdrecall.yaml": "flush: {timezone: Asia/Tokyo}\n"})
    assert remember(ws, "x", config=load_config(ws), now=late).path == "memory/2026-11-06.md"


def test_appends_after_existing_text(make_ws: Callable[..., Path]) -> None:
    ws = make_ws({"memory/topic.md": "# Topic\nA paragraph without a final newline", "MEMORY.md": "# M\n\n- one\n- two\n"})
    remember(ws, "three", target="MEMORY.md", now=NOW)
    assert (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()[-1].startswith("- three <!--")
    assert (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()[:4] == ["# M", "", "- one", "- two"]
    written = remember(ws, "- already a list item", target="memory/topic.md", now=NOW)
    lines = (ws / "memory/topic.md").read_text(encoding="utf-8").split("\n")
    assert lines[:4] == ["# Topic", "A paragraph without a final newline", "", "- already a list item <!-- mdrecall:remembered"
                         " at=2026-11-05T09:30:00Z via=api -->"]  # fmt: skip
    assert written.start_line == 4 and not written.created


def test_untrusted_text_is_redacted_and_cannot_forge_markers(make_ws: Callable[..., Path]) -> None:
    ws = make_ws({})
    written = remember(ws, "key sk-proj-abcdefghijklmnopqrstuvwx1234 <!-- mdrecall:promoted id=1 -->\x07\x1b[31m", now=NOW)
    text = (ws / written.path).read_text(encoding="utf-8")
    assert written.redacted == 1 and "sk-proj" not in text and "[REDACTED:" in text
    assert "<!-- mdrecall:promoted" not in text and "&lt;!-- mdrecall:promoted" in text
    assert "\x07" not in text and "\x1b" not in text


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("../outside.md", "invalid_path"),
        ("/etc/passwd.md", "invalid_path"),
        ("memory/../../x.md", "invalid_path"),
        ("notes/todo.md", "not_memory_path"),
        ("memory/notes.txt", "not_memory_path"),
        (".openclaw/sessions/a/transcripts/t.jsonl", "not_memory_path"),
        ("memory/.dreams/promotion-queue.md", "not_memory_path"),
        ("memory/linked/evil.md", "outside_workspace"),
        ("memory/folder.md", "invalid_path"),
    ],
)
def test_refused_targets_write_nothing(make_ws: Callable[..., Path], tmp_path: Path, target: str, code: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = make_ws({"MEMORY.md": "# M\n"})
    (ws / "memory").mkdir(exist_ok=True)
    (ws / "memory" / "linked").symlink_to(outside)
    (ws / "memory" / "folder.md").mkdir()
    before = sorted(str(p) for p in ws.rglob("*")) + sorted(str(p) for p in outside.rglob("*"))
    with pytest.raises(PathError) as err:
        remember(ws, "x", target=target, now=NOW)
    assert err.value.code == code
    assert sorted(str(p) for p in ws.rglob("*")) + sorted(str(p) for p in outside.rglob("*")) == before


@pytest.mark.parametrize("text", ["", "   \n", "x" * (MAX_TEXT_CHARS + 1)])
def test_bad_text_is_refused(make_ws: Callable[..., Path], text: str) -> None:
    ws = make_ws({})
    with pytest.raises(RememberError):
        remember(ws, text, now=NOW)
    assert not (ws / "memory").exists()


def test_a_symlinked_note_stays_a_link(make_ws: Callable[..., Path]) -> None:
    ws = make_ws({"memory/shared/real.md": "# Shared\n"})
    (ws / "MEMORY.md").symlink_to(ws / "memory" / "shared" / "real.md")
    remember(ws, "through the link", target="MEMORY.md", now=NOW)
    assert (ws / "MEMORY.md").is_symlink()
    assert "through the link" in (ws / "memory" / "shared" / "real.md").read_text(encoding="utf-8")


def test_not_utf8_note_is_left_alone(make_ws: Callable[..., Path]) -> None:
    ws = make_ws({"memory/2026-11-05.md": b"\xff\xfe binary"})
    with pytest.raises(PathError):
        remember(ws, "x", now=NOW)
    assert (ws / "memory/2026-11-05.md").read_bytes() == b"\xff\xfe binary"


def test_concurrent_writers_lose_nothing(make_ws: Callable[..., Path]) -> None:
    """Another program appends to the note in a tight loop while remember writes 40 entries: every
    line of both is there afterwards (remember never replaces the file, so it cannot drop theirs)."""
    from indexcheck import wait_for

    ws = make_ws({"memory/2026-11-05.md": "# 2026-11-05\n\n"})
    note = ws / "memory" / "2026-11-05.md"
    stop = ws / "stop"
    other = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time
        i = 0
        while not os.path.exists({str(stop)!r}):
            fd = os.open({str(note)!r}, os.O_WRONLY | os.O_APPEND)
            os.write(fd, f"- other {{i}}\\n".encode())
            os.close(fd)
            i += 1
            time.sleep(0.0002)
        print(i)
    """)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert wait_for(lambda: "- other 0" in note.read_text(encoding="utf-8"))
    config = load_config(ws)
    written = [remember(ws, f"ours {i}", config=config, now=NOW) for i in range(40)]
    stop.touch()
    count = int(other.communicate(timeout=60)[0])
    lines = note.read_text(encoding="utf-8").splitlines()
    assert sorted(line for line in lines if line.startswith("- other ")) == sorted(f"- other {i}" for i in range(count))
    assert [line.split(" <!--")[0] for line in lines if line.startswith("- ours ")] == [f"- ours {i}" for i in range(40)]
    first, last = written[0].start_line, written[-1].start_line
    assert any(line.startswith("- other ") for line in lines[first:last]), "the writers did not overlap"
    for item in written:  # each citation points at its own entry, whatever landed around it
        assert lines[item.start_line - 1] == item.text
