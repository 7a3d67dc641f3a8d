"""Fixtures for the dreaming tests: fixed clocks, tmp workspaces, SearchHit builders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dreamhelpers import DAILY


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-03-02.md").write_text(DAILY, encoding="utf-8")
    return ws


@pytest.fixture
def dconfig() -> dict[str, Any]:
    """The dreaming section used by unit tests: UTC day buckets, everything else default."""
    return {"timezone": "UTC"}


@pytest.fixture
def manager_config(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    def make(**dreaming: Any) -> dict[str, Any]:
        return {
            "provider": "none",
            "store": {"path": str(tmp_path / "index.sqlite")},
            "dreaming": {"timezone": "UTC", **dreaming},
        }

    return make
