"""The ``dreaming`` settings of whatever a caller holds: a MemoryConfig, a memory-section mapping, or
a bare ``dreaming`` mapping (the API functions accept all three). The model itself lives in the one
config tree, :class:`mdrecall.config.DreamingConfig`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mdrecall.config import DreamingConfig, MemoryConfig, parse_section


def parse_dreaming_config(section: Mapping[str, Any] | DreamingConfig | None) -> DreamingConfig:
    """Validate a ``dreaming`` mapping; raises ConfigError naming the bad key."""
    return parse_section(DreamingConfig, section, "dreaming")


def dreaming_config(config: MemoryConfig | Mapping[str, Any] | DreamingConfig | None) -> DreamingConfig:
    if isinstance(config, MemoryConfig):
        return config.dreaming
    if isinstance(config, Mapping) and isinstance(config.get("dreaming"), Mapping):
        return parse_dreaming_config(config["dreaming"])
    return parse_dreaming_config(config)


def sessions_dir(config: MemoryConfig | Mapping[str, Any] | None) -> str | None:
    """The transcripts directory of a MemoryConfig or memory-section mapping, if it says."""
    if isinstance(config, MemoryConfig):
        return config.sessions.dir
    if isinstance(config, Mapping):
        sessions = config.get("sessions")
        return sessions.get("dir") if isinstance(sessions, Mapping) else None
    return None


__all__ = ["DreamingConfig", "dreaming_config", "parse_dreaming_config", "sessions_dir"]
