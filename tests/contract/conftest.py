"""The ``backend`` fixture: every backend in backends_under_test.BACKENDS, on a fresh workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backends_under_test import BACKENDS, BackendUnderTest


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: Any, tmp_path: Path) -> Iterator[BackendUnderTest]:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Memory\n\n- The team writes weekly notes.\n", encoding="utf-8")
    yield from BACKENDS[request.param](tmp_path, workspace)
