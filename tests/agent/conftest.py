"""Fixtures for the agent tests: a private copy of the example workspace (MDRECALL_HOME is isolated by tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

EXAMPLE_WORKSPACE = Path(__file__).resolve().parents[2] / "examples" / "workspace"


def make_workspace(target: Path) -> Path:
    """Copy examples/workspace to ``target``; if it is missing, write a small stand-in with the same facts."""
    if (EXAMPLE_WORKSPACE / "MEMORY.md").is_file():
        shutil.copytree(EXAMPLE_WORKSPACE, target, symlinks=True)
        return target
    (target / "memory").mkdir(parents=True)
    (target / "MEMORY.md").write_text(
        "# MEMORY\n\n## Decisions (with dates)\n"
        "- 2026-10-27: Use Postgres full-text search instead of adding Meilisearch; revisit above 100k recipes.\n"
        "- 2026-11-09: Release v0.4 ships without the meal-planner; the planner moves to v0.5.\n"
    )
    (target / "memory" / "2026-11-09.md").write_text(
        "# 2026-11-09\n\n## Standup / scope decision\n- v0.4 ships without the meal planner; the planner moves to v0.5.\n"
    )
    (target / "memory" / "people.md").write_text("# People\n- Tomás Ribeiro: backend, owns the importer.\n")
    return target


@pytest.fixture(scope="module")
def example_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("example") / "workspace")
