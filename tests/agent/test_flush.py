"""The pre-compaction flush plan: thresholds, once per cycle, prompts, append-only writes."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from mdrecall.agent.flush import (
    DEFAULT_FLUSH_PROMPT,
    DEFAULT_FLUSH_SYSTEM_PROMPT,
    FlushSettings,
    FlushState,
    append_flush_note,
    build_flush_plan,
    should_flush,
    with_safety_hints,
)
from mdrecall.config import parse_byte_size
from mdrecall.errors import ConfigError

NOW = datetime(2026, 4, 14, 0, 7, tzinfo=UTC)
NY = FlushSettings(timezone="America/New_York")


def test_default_prompts_exact() -> None:
    plan = build_flush_plan(NY, now=NOW)
    assert plan is not None
    assert plan.date_stamp == "2026-04-13"  # the user's date, not UTC's
    assert plan.relative_path == "memory/2026-04-13.md"
    assert plan.prompt == (
        "Pre-compaction memory flush. Store durable memories only in memory/2026-04-13.md (create memory/ if "
        "needed). Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and "
        "AGENTS.md as read-only during this flush; never overwrite, replace, or edit them. If memory/2026-04-13.md "
        "already exists, APPEND new content only and do not overwrite existing entries. Do NOT create timestamped "
        "variant files (e.g., 2026-04-13-HHMM.md); always use the canonical 2026-04-13.md filename. If nothing to "
        "store, reply with NO_REPLY.\n"
        "Current time: Monday, April 13th, 2026 — 8:07 PM (America/New_York) / 2026-04-14 00:07 UTC"
    )
    assert plan.system_prompt == (
        "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories to disk. "
        "Store durable memories only in memory/2026-04-13.md (create memory/ if needed). Treat workspace "
        "bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and AGENTS.md as read-only "
        "during this flush; never overwrite, replace, or edit them. If memory/2026-04-13.md already exists, APPEND "
        "new content only and do not overwrite existing entries. You may reply, but usually NO_REPLY is correct."
    )
    assert "YYYY" not in plan.prompt + plan.system_prompt


def test_prompts_never_target_memory_md_for_writing() -> None:
    for text in (DEFAULT_FLUSH_PROMPT, DEFAULT_FLUSH_SYSTEM_PROMPT):
        assert "only in memory/YYYY-MM-DD.md" in text
        assert "MEMORY.md" in text and "read-only" in text and "APPEND" in text


def test_default_threshold_is_window_minus_20000_minus_4000() -> None:
    plan = build_flush_plan(now=NOW)
    assert plan is not None
    assert plan.threshold() == 176_000
    assert plan.threshold(128_000) == 104_000
    assert should_flush(plan, tokens=175_999).flush is False
    decision = should_flush(plan, tokens=176_000)
    assert decision.flush and decision.reason == "tokens" and decision.threshold == 176_000


def test_configured_margins_are_used_as_is() -> None:
    plan = build_flush_plan(FlushSettings(reserve_tokens_floor=30_000, soft_threshold_tokens=10_000), now=NOW)
    assert plan is not None and plan.threshold(200_000) == 160_000
    assert plan.threshold(32_000) == 0  # never negative


@pytest.mark.parametrize(
    ("window", "threshold"), [(8_000, 2_000), (16_000, 4_000), (24_000, 4_000), (32_000, 8_000), (1_000_000, 976_000)]
)
def test_small_windows_get_smaller_default_margins(window: int, threshold: int) -> None:
    plan = build_flush_plan(now=NOW)
    assert plan is not None and plan.threshold(window) == threshold


def test_forced_at_two_mib_of_transcript() -> None:
    plan = build_flush_plan(now=NOW)
    assert plan is not None and plan.force_flush_transcript_bytes == 2 * 1024 * 1024
    assert not should_flush(plan, tokens=10, transcript_bytes=2 * 1024 * 1024 - 1)
    decision = should_flush(plan, tokens=10, transcript_bytes=2 * 1024 * 1024)
    assert decision.flush and decision.reason == "transcript-size"


def test_force_flush_zero_disables_the_size_trigger() -> None:
    plan = build_flush_plan(FlushSettings.from_mapping({"forceFlushTranscriptBytes": 0}), now=NOW)
    assert plan is not None and not should_flush(plan, tokens=10, transcript_bytes=50 * 1024 * 1024)


def test_once_per_compaction_cycle_and_again_next_cycle() -> None:
    plan = build_flush_plan(now=NOW)
    state = FlushState()
    assert state.decide(plan, tokens=180_000).flush
    state.record_flush(at=NOW)
    second = state.decide(plan, tokens=190_000)
    assert not second.flush and second.skipped == "already-flushed-this-cycle"
    assert not state.decide(plan, tokens=10, transcript_bytes=5 * 1024 * 1024).flush
    state.record_compaction()
    assert not state.decide(plan, tokens=50_000)  # fresh cycle, below threshold
    assert state.decide(plan, tokens=176_500).flush  # ...and it flushes again when it gets there


def test_compaction_during_the_flush_does_not_skip_the_next_cycle() -> None:
    # OpenClaw issue #12590: stamping the post-compaction count made every other cycle skip its flush.
    plan = build_flush_plan(now=NOW)
    state = FlushState()
    cycle = state.compaction_count
    assert state.decide(plan, tokens=180_000)
    state.record_compaction()  # compaction finished while the flush turn ran
    state.record_flush(cycle=cycle, at=NOW)
    assert state.decide(plan, tokens=180_000).flush


def test_disabled_plan() -> None:
    assert build_flush_plan(FlushSettings.from_mapping({"enabled": False}), now=NOW) is None
    assert should_flush(None, tokens=10**9).skipped == "disabled"


def test_custom_prompts_get_safety_hints_and_no_reply() -> None:
    settings = FlushSettings.from_mapping({"prompt": "Write down what matters.", "systemPrompt": "Flush now. NO_REPLY ok."})
    plan = build_flush_plan(settings, now=NOW)
    assert plan is not None
    assert plan.prompt.startswith("Write down what matters. Store durable memories only in memory/2026-04-14.md")
    assert "read-only during this flush" in plan.prompt and "APPEND new content only" in plan.prompt
    assert "\n\nIf no user-visible reply is needed, start with NO_REPLY." in plan.prompt
    assert plan.system_prompt.count("NO_REPLY") == 1  # already there: not added again
    assert with_safety_hints(DEFAULT_FLUSH_PROMPT) == DEFAULT_FLUSH_PROMPT  # idempotent on the default


def test_byte_sizes() -> None:
    assert parse_byte_size("2mb") == 2 * 1024 * 1024
    assert parse_byte_size("512 KiB") == 512 * 1024
    assert parse_byte_size("1.5m") == int(1.5 * 1024 * 1024)
    assert parse_byte_size(100) == 100
    for bad in ("lots", "-1", "2 parsecs"):
        with pytest.raises(ValueError):
            parse_byte_size(bad)


def test_settings_reject_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="softThresholdToken"):
        FlushSettings.from_mapping({"softThresholdToken": 10})
    with pytest.raises(ConfigError, match="reserveTokensFloor"):
        FlushSettings.from_mapping({"reserveTokensFloor": "many"})
    with pytest.raises(ConfigError, match="timezone"):
        build_flush_plan(FlushSettings(timezone="Mars/Olympus"), now=NOW)


# --- the only write a flush may make -------------------------------------------------------------


def test_append_flush_note_appends_and_never_overwrites(tmp_path) -> None:
    plan = build_flush_plan(now=NOW)
    assert plan is not None
    (tmp_path / "MEMORY.md").write_text("# curated\n")
    target = append_flush_note(tmp_path, plan, "- first durable fact")
    assert target == tmp_path / "memory" / "2026-04-14.md"
    append_flush_note(tmp_path, plan, "- second fact\n", rel_path="memory/2026-04-14.md")
    assert target.read_text() == "- first durable fact\n\n- second fact\n"
    assert (tmp_path / "MEMORY.md").read_text() == "# curated\n"


@pytest.mark.parametrize(
    "rel_path", ["MEMORY.md", "memory/2026-04-13.md", "memory/2026-04-14-2359.md", "../memory/2026-04-14.md", "SOUL.md"]
)
def test_append_flush_note_refuses_other_targets(tmp_path, rel_path: str) -> None:
    plan = build_flush_plan(now=NOW)
    with pytest.raises(PermissionError, match="only append to memory/2026-04-14.md"):
        append_flush_note(tmp_path, plan, "x", rel_path=rel_path)
    assert not (tmp_path / "memory").exists()


def test_append_flush_note_refuses_a_symlinked_note(tmp_path) -> None:
    plan = build_flush_plan(now=NOW)
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    os.symlink(outside, ws / "memory" / "2026-04-14.md")
    with pytest.raises(PermissionError):
        append_flush_note(ws, plan, "overwrite attempt")
    assert outside.read_text() == "secret\n"


def test_append_flush_note_refuses_a_symlinked_memory_dir(tmp_path) -> None:
    plan = build_flush_plan(now=NOW)
    (tmp_path / "elsewhere").mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(tmp_path / "elsewhere", ws / "memory")
    with pytest.raises(PermissionError, match="symlink"):
        append_flush_note(ws, plan, "x")
