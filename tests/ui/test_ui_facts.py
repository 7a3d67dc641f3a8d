"""The inspector's "why it came back" for knowledge updates (the page itself: test_ui_browser.py)."""

from __future__ import annotations

from mdrecall.ui.search import explained


def test_supersession_is_said_in_words() -> None:
    older = explained({"mode": "keyword-only", "supersession": {"supersededBy": "memory/2026-05-01.md#L4", "by": "markup"}})
    assert older == ["knowledge update: superseded by memory/2026-05-01.md#L4 (its supersedes markup)"]
    detected = explained({"supersession": {"supersededBy": "memory/b.md#L3", "by": "detected", "why": "value changed (7 → 14)"}})
    assert detected == ["knowledge update: superseded by memory/b.md#L3 (detection: value changed (7 → 14))"]
    newer = explained({"supersession": {"supersedes": ["memory/a.md#L3", "MEMORY.md#L4"], "moved": "raised above memory/a.md#L3"}})
    assert newer == ["knowledge update: supersedes memory/a.md#L3, MEMORY.md#L4", "knowledge update: raised above memory/a.md#L3"]
    unsure = explained({"supersession": {"possiblyRestatedBy": "memory/c.md#L2"}})
    assert unsure == ["knowledge update: possibly restated by memory/c.md#L2 (not marked: no changed value seen)"]
