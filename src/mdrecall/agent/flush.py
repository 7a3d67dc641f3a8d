"""The pre-compaction memory flush: when to run it and what to tell the model.

Before a long session is compacted, the agent gets one silent turn to write durable memories to
today's note, ``memory/YYYY-MM-DD.md``, append-only. Bootstrap files such as ``MEMORY.md`` stay
read-only (curated, long-term memory is promoted deliberately, never rewritten in a hurry).

- :func:`build_flush_plan` resolves settings and today's date into prompts and thresholds.
- :func:`should_flush` decides for one turn: tokens at or past
  ``context_window - reserve_tokens_floor - soft_threshold_tokens`` (176,000 for a 200k window), or a
  transcript of at least 2 MiB, and no flush yet in this compaction cycle.
- :class:`FlushState` tracks the cycle so a flush happens once per cycle, every cycle (OpenClaw's
  flush ran only on alternate cycles because it stamped the *next* cycle as done; issue #12590).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mdrecall.config import FlushConfig, parse_section
from mdrecall.errors import ConfigError

SILENT_REPLY_TOKEN = "NO_REPLY"
DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_RESERVE_TOKENS_FLOOR = 20_000
DEFAULT_SOFT_THRESHOLD_TOKENS = 4_000
DEFAULT_FORCE_FLUSH_TRANSCRIPT_BYTES = FlushConfig().forceFlushTranscriptBytes

_DATE_PLACEHOLDER = "YYYY-MM-DD"

TARGET_HINT = f"Store durable memories only in memory/{_DATE_PLACEHOLDER}.md (create memory/ if needed)."
READ_ONLY_HINT = (
    "Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and AGENTS.md "
    "as read-only during this flush; never overwrite, replace, or edit them."
)
APPEND_ONLY_HINT = (
    f"If memory/{_DATE_PLACEHOLDER}.md already exists, APPEND new content only and do not overwrite existing entries."
)
CANONICAL_NAME_HINT = (
    f"Do NOT create timestamped variant files (e.g., {_DATE_PLACEHOLDER}-HHMM.md); always use the canonical "
    f"{_DATE_PLACEHOLDER}.md filename."
)
SAFETY_HINTS = (TARGET_HINT, READ_ONLY_HINT, APPEND_ONLY_HINT)

DEFAULT_FLUSH_PROMPT = " ".join(
    [
        "Pre-compaction memory flush.",
        TARGET_HINT,
        READ_ONLY_HINT,
        APPEND_ONLY_HINT,
        CANONICAL_NAME_HINT,
        f"If nothing to store, reply with {SILENT_REPLY_TOKEN}.",
    ]
)
DEFAULT_FLUSH_SYSTEM_PROMPT = " ".join(
    [
        "Pre-compaction memory flush turn.",
        "The session is near auto-compaction; capture durable memories to disk.",
        *SAFETY_HINTS,
        f"You may reply, but usually {SILENT_REPLY_TOKEN} is correct.",
    ]
)
_NO_REPLY_HINT = f"\n\nIf no user-visible reply is needed, start with {SILENT_REPLY_TOKEN}."



@dataclass(frozen=True, slots=True)
class FlushSettings:
    """Flush configuration; ``None`` thresholds mean "defaults, sized to the context window".

    Keys accepted by :meth:`from_mapping` follow OpenClaw's ``compaction.memoryFlush`` section plus
    ``reserveTokensFloor`` and ``timezone``.
    """

    enabled: bool = True
    soft_threshold_tokens: int | None = None
    reserve_tokens_floor: int | None = None
    force_flush_transcript_bytes: int = DEFAULT_FORCE_FLUSH_TRANSCRIPT_BYTES
    prompt: str | None = None
    system_prompt: str | None = None
    timezone: str | None = None

    @classmethod
    def from_config(cls, config: FlushConfig) -> FlushSettings:
        return cls(
            enabled=config.enabled,
            soft_threshold_tokens=config.softThresholdTokens,
            reserve_tokens_floor=config.reserveTokensFloor,
            force_flush_transcript_bytes=config.forceFlushTranscriptBytes,
            prompt=config.prompt or None,
            system_prompt=config.systemPrompt or None,
            timezone=config.timezone or None,
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | FlushConfig | None) -> FlushSettings:
        """From a ``flush`` mapping (validated like the config file's ``flush`` section)."""
        return cls.from_config(parse_section(FlushConfig, data, "flush"))


def default_reserve_and_soft(context_window: int) -> tuple[int, int]:
    """Reserve floor and soft threshold for a window: 20,000/4,000 from 32k tokens up.

    Small windows get smaller margins (as later OpenClaw versions do) so that the threshold stays
    positive: under 16k 4,000/2,000; under 24k 8,000/4,000; under 32k 16,000/4,000.
    """
    if context_window >= 32_000:
        return DEFAULT_RESERVE_TOKENS_FLOOR, DEFAULT_SOFT_THRESHOLD_TOKENS
    if context_window >= 24_000:
        return 16_000, 4_000
    if context_window >= 16_000:
        return 8_000, 4_000
    return 4_000, 2_000


def with_safety_hints(text: str) -> str:
    """A custom flush prompt with any missing safety hint appended, plus the NO_REPLY hint if absent."""
    result = text.rstrip()
    for hint in SAFETY_HINTS:
        if hint not in result:
            result += " " + hint
    if SILENT_REPLY_TOKEN not in result:
        result += _NO_REPLY_HINT
    return result


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def format_current_time(now: datetime, tz_name: str) -> str:
    """``Monday, April 13th, 2026 — 8:07 PM (America/New_York) / 2026-04-14 00:07 UTC``."""
    hour = now.hour % 12 or 12
    local = f"{now.strftime('%A, %B')} {_ordinal(now.day)}, {now.year} — {hour}:{now.minute:02d} {now.strftime('%p')}"
    utc = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{local} ({tz_name}) / {utc}"


def _resolve_zone(name: str | None) -> tuple[tzinfo | None, str]:
    if not name:
        return None, "local"
    try:
        return ZoneInfo(name), name
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown timezone {name!r} for the memory flush: {exc}") from None


@dataclass(frozen=True, slots=True)
class FlushPlan:
    """What a flush turn needs: thresholds, today's target file and the two prompts."""

    soft_threshold_tokens: int
    reserve_tokens_floor: int
    force_flush_transcript_bytes: int
    date_stamp: str
    relative_path: str
    prompt: str
    system_prompt: str
    #: True when the thresholds are the window-sized defaults rather than configured values.
    window_sized: bool = True

    def threshold(self, context_window: int = DEFAULT_CONTEXT_WINDOW) -> int:
        """Token count at which the flush triggers for this window (never below zero)."""
        reserve, soft = self.margins(context_window)
        return max(0, context_window - reserve - soft)

    def margins(self, context_window: int) -> tuple[int, int]:
        if self.window_sized:
            return default_reserve_and_soft(context_window)
        return self.reserve_tokens_floor, self.soft_threshold_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "softThresholdTokens": self.soft_threshold_tokens,
            "reserveTokensFloor": self.reserve_tokens_floor,
            "forceFlushTranscriptBytes": self.force_flush_transcript_bytes,
            "dateStamp": self.date_stamp,
            "relativePath": self.relative_path,
            "prompt": self.prompt,
            "systemPrompt": self.system_prompt,
        }


def build_flush_plan(settings: FlushSettings | None = None, *, now: datetime | None = None) -> FlushPlan | None:
    """Resolve the flush plan for ``now`` (default: the current time), or ``None`` when disabled.

    The date stamp uses ``settings.timezone`` (an IANA name) or, without one, the time zone of
    ``now`` (the machine's local zone for naive or missing ``now``). Every ``YYYY-MM-DD`` in the
    prompts becomes the stamp, and the user prompt ends with a ``Current time:`` line.
    """
    settings = settings or FlushSettings()
    if not settings.enabled:
        return None
    zone, zone_name = _resolve_zone(settings.timezone)
    if now is None:
        now = datetime.now(UTC)
    if now.tzinfo is None:
        now = now.astimezone()  # naive means local wall-clock time
    local = now.astimezone(zone) if zone is not None else now.astimezone(now.tzinfo)
    if zone is None:
        zone_name = local.tzname() or "local"
    stamp = local.strftime("%Y-%m-%d")

    user = with_safety_hints(settings.prompt) if settings.prompt else DEFAULT_FLUSH_PROMPT
    system = with_safety_hints(settings.system_prompt) if settings.system_prompt else DEFAULT_FLUSH_SYSTEM_PROMPT
    user = user.replace(_DATE_PLACEHOLDER, stamp) + f"\nCurrent time: {format_current_time(local, zone_name)}"
    system = system.replace(_DATE_PLACEHOLDER, stamp)

    window_sized = settings.reserve_tokens_floor is None and settings.soft_threshold_tokens is None
    return FlushPlan(
        soft_threshold_tokens=(
            DEFAULT_SOFT_THRESHOLD_TOKENS if settings.soft_threshold_tokens is None else settings.soft_threshold_tokens
        ),
        reserve_tokens_floor=(
            DEFAULT_RESERVE_TOKENS_FLOOR if settings.reserve_tokens_floor is None else settings.reserve_tokens_floor
        ),
        force_flush_transcript_bytes=settings.force_flush_transcript_bytes,
        date_stamp=stamp,
        relative_path=f"memory/{stamp}.md",
        prompt=user,
        system_prompt=system,
        window_sized=window_sized,
    )


FlushReason = Literal["tokens", "transcript-size"]


@dataclass(frozen=True, slots=True)
class FlushDecision:
    flush: bool
    #: Why it flushes, or None.
    reason: FlushReason | None
    #: Why it does not although a trigger fired ("already-flushed-this-cycle"), or None.
    skipped: str | None
    threshold: int
    tokens: int
    transcript_bytes: int

    def __bool__(self) -> bool:
        return self.flush


def should_flush(
    plan: FlushPlan | None,
    *,
    tokens: int,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    transcript_bytes: int = 0,
    compaction_count: int = 0,
    last_flush_compaction_count: int | None = None,
) -> FlushDecision:
    """Decide whether this turn runs the flush.

    ``tokens`` is the session's current context size (last usage plus the new prompt's estimate).
    The flush fires when ``tokens >= threshold`` or the transcript reaches
    ``force_flush_transcript_bytes`` (0 disables that trigger), unless a flush already ran in this
    compaction cycle (``last_flush_compaction_count == compaction_count``).
    """
    if plan is None:
        return FlushDecision(False, None, "disabled", 0, tokens, transcript_bytes)
    threshold = plan.threshold(context_window)
    reason: FlushReason | None = None
    if tokens >= threshold:
        reason = "tokens"
    elif plan.force_flush_transcript_bytes > 0 and transcript_bytes >= plan.force_flush_transcript_bytes:
        reason = "transcript-size"
    if reason is None:
        return FlushDecision(False, None, None, threshold, tokens, transcript_bytes)
    if last_flush_compaction_count is not None and last_flush_compaction_count == compaction_count:
        return FlushDecision(False, None, "already-flushed-this-cycle", threshold, tokens, transcript_bytes)
    return FlushDecision(True, reason, None, threshold, tokens, transcript_bytes)


@dataclass(slots=True)
class FlushState:
    """Per-session bookkeeping for "once per compaction cycle".

    Call :meth:`record_flush` after a flush turn and :meth:`record_compaction` after each compaction.
    The flush is stamped with the cycle it ran in, even if a compaction finished during it, so the
    next cycle flushes again.
    """

    compaction_count: int = 0
    last_flush_compaction_count: int | None = None
    last_flush_at: datetime | None = None
    history: list[tuple[int, datetime]] = field(default_factory=list)

    def decide(
        self, plan: FlushPlan | None, *, tokens: int, context_window: int = DEFAULT_CONTEXT_WINDOW,
        transcript_bytes: int = 0,
    ) -> FlushDecision:  # fmt: skip
        return should_flush(
            plan,
            tokens=tokens,
            context_window=context_window,
            transcript_bytes=transcript_bytes,
            compaction_count=self.compaction_count,
            last_flush_compaction_count=self.last_flush_compaction_count,
        )

    def record_flush(self, *, cycle: int | None = None, at: datetime | None = None) -> None:
        """Mark the cycle the flush *started in* (pass ``cycle`` if compaction may have run since)."""
        at = at or datetime.now(UTC)
        self.last_flush_compaction_count = self.compaction_count if cycle is None else cycle
        self.last_flush_at = at
        self.history.append((self.last_flush_compaction_count, at))

    def record_compaction(self) -> None:
        self.compaction_count += 1


def append_flush_note(workspace: str | Path, plan: FlushPlan, text: str, *, rel_path: str | None = None) -> Path:
    """Append ``text`` to the plan's daily note, the only file a flush may write.

    For hosts that give the flush turn a dedicated write tool instead of general file access:
    ``rel_path`` (what the model asked for) must equal ``plan.relative_path``; ``memory/`` and the
    note must not be symlinks; the file is opened append-only, so existing entries cannot be lost.
    """
    if rel_path is not None and rel_path.replace("\\", "/").removeprefix("./") != plan.relative_path:
        raise PermissionError(
            f"the memory flush may only append to {plan.relative_path}, not {rel_path!r} "
            "(MEMORY.md and other bootstrap files are read-only during a flush)"
        )
    root = Path(workspace)
    memory_dir = root / "memory"
    if memory_dir.is_symlink():
        raise PermissionError(f"{memory_dir} is a symlink; refusing to write memories through it")
    memory_dir.mkdir(exist_ok=True)
    target = root / plan.relative_path
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        raise PermissionError(f"cannot append to {plan.relative_path}: {exc}") from exc
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        existing = target.stat().st_size
        chunk = text if text.endswith("\n") else text + "\n"
        if existing > 0:
            chunk = "\n" + chunk  # keep entries separated from what is already there
        handle.write(chunk)
    return target


__all__ = [
    "append_flush_note",
    "APPEND_ONLY_HINT",
    "DEFAULT_FLUSH_PROMPT",
    "DEFAULT_FLUSH_SYSTEM_PROMPT",
    "FlushDecision",
    "FlushPlan",
    "FlushSettings",
    "FlushState",
    "READ_ONLY_HINT",
    "SILENT_REPLY_TOKEN",
    "TARGET_HINT",
    "build_flush_plan",
    "default_reserve_and_soft",
    "should_flush",
    "with_safety_hints",
]
