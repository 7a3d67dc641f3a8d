"""The ``dreaming`` section of the memory config: keys, defaults and validation.

``MemoryConfig.dreaming`` is a free-form mapping so this feature owns its keys; they are checked here
with the same rule as the rest of the config: an unknown key or a bad value fails with a message that
names it, so a typo never silently falls back to a default.

The promotion thresholds' defaults are calibrated in ``docs/dreaming.md`` ("Calibration").
"""

from __future__ import annotations

import difflib
from datetime import tzinfo
from typing import Any, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mdrecall.errors import ConfigError


class DreamingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # Master switch: recall tracking on every search, and the promote/dream commands.
    enabled: bool = True
    # Record recalls on searches (kept separate so promotion can be used on an existing store only).
    tracking: bool = True
    # Hits on session transcripts (source "sessions") count as short-term material too.
    trackSessions: bool = True
    # IANA zone for the day buckets of recallDays; None: the machine's local zone.
    timezone: str | None = None
    # The same query surfacing the same fact twice on one day is one recall (retries and loops
    # would otherwise inflate counts).
    dedupeByQueryPerDay: bool = True
    # Recall store bound; single-recall and already-promoted entries are evicted first.
    maxEntries: int = Field(default=2000, ge=50, le=200_000)

    # Promotion thresholds (all must hold). Calibrated defaults, see docs/dreaming.md.
    minScore: float = Field(default=0.5, ge=0, le=1)
    minRecallCount: int = Field(default=3, ge=1)
    minUniqueQueries: int = Field(default=2, ge=1, le=32)
    minRecallDays: int = Field(default=2, ge=1, le=16)
    # Entries not recalled for longer than this are not promoted; -1 disables the check.
    maxAgeDays: float = Field(default=30, ge=-1)
    recencyHalfLifeDays: float = Field(default=14, gt=0)

    # How many new candidates one stage/apply/dream run handles.
    limit: int = Field(default=10, ge=1, le=500)
    # false: `promote --apply` and `dream` write only candidates a person approved in the queue.
    # true: they also write every candidate that passes the thresholds.
    autoApply: bool = False
    # MEMORY.md is loaded at every session start; promotion refuses to grow it past this.
    memoryMaxChars: int = Field(default=20_000, ge=500)
    # A candidate longer than this is never written without a person shortening it in the queue.
    maxCandidateChars: int = Field(default=400, ge=40)
    # The light phase re-checks entries recalled within this many days against their live notes.
    lightLookbackDays: float = Field(default=2, ge=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Europe/Berlin')") from exc
        return value

    def tz(self) -> tzinfo | None:
        return ZoneInfo(self.timezone) if self.timezone else None


_KEYS = sorted(DreamingConfig.model_fields)


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(_KEYS)})"
            parts.append(f"unknown key 'dreaming.{key}'{hint}")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"'dreaming.{key}': {msg} (got {err.get('input')!r})")
    return "invalid dreaming config: " + "; ".join(parts)


def parse_dreaming_config(section: Mapping[str, Any] | DreamingConfig | None) -> DreamingConfig:
    """Validate a ``dreaming`` mapping; raises ConfigError naming the bad key."""
    if isinstance(section, DreamingConfig):
        return section
    if section is None:
        return DreamingConfig()
    if not isinstance(section, Mapping):
        raise ConfigError(f"invalid dreaming config: expected a mapping, got {type(section).__name__}")
    try:
        return DreamingConfig.model_validate(dict(section))
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None


def dreaming_config(config: Any) -> DreamingConfig:
    """The dreaming settings of a MemoryConfig, of a memory-section mapping (one with a ``dreaming``
    key, as given to ``open_manager``), or of a bare ``dreaming`` mapping."""
    if isinstance(config, Mapping) and isinstance(config.get("dreaming"), Mapping):
        return parse_dreaming_config(config["dreaming"])
    if isinstance(config, DreamingConfig) or config is None or isinstance(config, Mapping):
        return parse_dreaming_config(config)
    return parse_dreaming_config(getattr(config, "dreaming", None))


def sessions_dir(config: Any) -> str | None:
    """The transcripts directory of a MemoryConfig or memory-section mapping, if it says."""
    if isinstance(config, Mapping):
        sessions = config.get("sessions")
        return sessions.get("dir") if isinstance(sessions, Mapping) else None
    return getattr(getattr(config, "sessions", None), "dir", None)
