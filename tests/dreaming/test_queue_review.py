"""Decisions on the review queue made outside an editor (dreaming.review.decide), and the promotion
history read back from MEMORY.md (promotion_history): what the web inspector does."""

from __future__ import annotations

from pathlib import Path

import pytest
from dreamhelpers import at, hit

from mdrecall.dreaming import apply, record_recalls, stage
from mdrecall.dreaming.blocks import text_hash
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.queue import parse_queue
from mdrecall.dreaming.review import ReviewConflict, decide, promotion_history

CFG = {"timezone": "UTC"}
PG = "Infra: Postgres 16 runs on db-2, port 5433."
NOW = at(days=2, hours=14)


def staged(ws: Path) -> str:
    """The Postgres fact recalled on three days by three queries, staged; returns its queue key."""
    for day, query in enumerate(["postgres port", "which port does postgres listen on", "postgres on db-2"]):
        record_recalls(ws, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=CFG)
    (item,) = stage(ws, CFG, NOW).added
    return item.key


def queue_items(ws: Path) -> list[tuple[str, str]]:
    return [(i.status, i.text) for i in parse_queue(queue_path(ws).read_text(encoding="utf-8")).items]


def test_approve_then_apply_writes_memory(workspace: Path) -> None:
    key = staged(workspace)
    decide(workspace, key, status="approved", seen=text_hash(PG), config=CFG)
    assert "- [x] " + PG in queue_path(workspace).read_text(encoding="utf-8")
    assert queue_items(workspace) == [("approved", PG)]
    result = apply(workspace, CFG, NOW)
    assert [p.text for p in result.applied] == [PG]
    (line,) = promotion_history((workspace / "MEMORY.md").read_text(encoding="utf-8"))
    assert (line.text, line.day, line.source, line.recalls) == (PG, "2026-03-04", "memory/2026-03-02.md:6-6", 3)
    assert line.id and line.score is not None and line.line == 5


def test_reject_and_undecide(workspace: Path) -> None:
    key = staged(workspace)
    decide(workspace, key, status="rejected", config=CFG)
    assert "- [-] " + PG in queue_path(workspace).read_text(encoding="utf-8")
    decide(workspace, key, status="pending", config=CFG)
    assert queue_items(workspace) == [("pending", PG)]


def test_an_edit_is_what_gets_written(workspace: Path) -> None:
    key = staged(workspace)
    item = decide(workspace, key, text="  Postgres 16:\n db-2, port 5433  ", config=CFG)
    assert item.text == "Postgres 16: db-2, port 5433" and item.edited
    decide(workspace, key, status="approved", seen=text_hash(item.text), config=CFG)
    result = apply(workspace, CFG, NOW)
    assert [p.text for p in result.applied] == ["Postgres 16: db-2, port 5433"]
    assert result.applied[0].edited


def test_a_decision_on_text_the_reviewer_did_not_see_is_refused(workspace: Path) -> None:
    key = staged(workspace)
    path = queue_path(workspace)
    # Someone edits the item in their editor after the page showed it.
    path.write_text(path.read_text(encoding="utf-8").replace("port 5433", "port 6543"), encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(ReviewConflict, match="changed since it was shown"):
        decide(workspace, key, status="approved", seen=text_hash(PG), config=CFG)
    assert path.read_bytes() == before


def test_an_edit_saved_right_after_the_last_check_is_merged_not_overwritten(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue is checked unchanged, then replaced: a save landing in between (an editor, another
    tab) is merged in by the shared writer instead of being overwritten by the decision."""
    import mdrecall.dreaming.review as review

    key = staged(workspace)
    path = queue_path(workspace)
    real = review.write_markdown

    def save_then_write(target: Path, new: str, *, base: str | None) -> object:
        with path.open("a", encoding="utf-8") as handle:  # the reviewer's note, saved just now
            handle.write("\nReviewed with Dana on Monday.\n")
        return real(target, new, base=base)

    monkeypatch.setattr(review, "write_markdown", save_then_write)
    decide(workspace, key, status="approved", seen=text_hash(PG), config=CFG)
    text = path.read_text(encoding="utf-8")
    assert "- [x] " + PG in text and "Reviewed with Dana on Monday." in text


def test_unknown_items_and_bad_text_are_refused(workspace: Path) -> None:
    with pytest.raises(ReviewConflict, match="no promotion queue"):
        decide(workspace, "memory:nothing#0", status="approved", config=CFG)
    key = staged(workspace)
    before = queue_path(workspace).read_bytes()
    with pytest.raises(ReviewConflict, match="no longer in the queue"):
        decide(workspace, key + "x", status="approved", config=CFG)
    for text in ("", "   ", "fact <!-- mdrecall:promoted id=abc -->", "a --> b"):
        with pytest.raises(ValueError):
            decide(workspace, key, text=text, config=CFG)
    with pytest.raises(ValueError):
        decide(workspace, key, config=CFG)
    assert queue_path(workspace).read_bytes() == before


def test_history_reads_both_marker_kinds_in_file_order() -> None:
    memory = (
        "# Long-term memory\n\n- hand-written fact\n\n"
        "## Promoted from short-term memory (2026-03-01)\n\n"
        "- First <!-- mdrecall:promoted id=aaaaaaaaaaaa source=memory/2026-02-27.md:3-4 score=0.71 recalls=5 -->\n"
        "- Legacy fact <!-- openclaw-memory-promotion:memory:memory/2026-02-01.md:1:2 -->\n\n"
        "## Notes\n\n"
        "- Later <!-- mdrecall:promoted id=bbbbbbbbbbbb source=memory/x.md:1-1 score=bad recalls=2 -->\n"
    )
    first, legacy, later = promotion_history(memory)
    assert (first.text, first.day, first.score, first.recalls, first.line) == ("First", "2026-03-01", 0.71, 5, 7)
    assert (legacy.origin, legacy.text, legacy.day) == ("openclaw", "Legacy fact", "2026-03-01")
    assert (later.day, later.score, later.recalls) == (None, None, 2)  # outside a promotion section; bad number
