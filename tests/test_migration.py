"""Switching the embedding model: no mixed vectors, keyword answers meanwhile, visible progress."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mdrecall import open_manager

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws, ignore=shutil.ignore_patterns(".dreams"))
    return ws


def test_model_switch_pauses_vectors_until_rebuilt(workspace: Path, tmp_path: Path) -> None:
    store = {"path": str(tmp_path / "index.sqlite")}
    with open_manager(workspace, {"provider": "local", "store": store}) as first:
        first.sync()
        assert first.search("which database do we run?").mode == "hybrid"

    # A different max sequence length changes what the vectors mean: a new provider identity.
    changed = {"provider": "local", "local": {"maxSeqLength": 128}, "store": store, "sync": {"onSearch": False}}
    with open_manager(workspace, changed) as second:
        during = second.search("which database do we run?")
        assert during.mode == "keyword-only"
        assert during.degraded
        assert any("vector search paused" in w for w in during.warnings)
        assert during.results, "keyword results keep coming while the model changes"

        seen: list[dict] = []

        def progress(_p) -> None:  # type: ignore[no-untyped-def]
            migration = second.status().details["migration"]
            if migration is not None:
                seen.append(migration)

        report = second.sync(progress=progress)
        assert report.full_rebuild
        assert "providerKey" in (report.rebuild_reason or "")
        assert seen and seen[-1]["to"]["model"] == "all-MiniLM-L6-v2"
        assert seen[0]["from"]["provider"] == "local"
        assert second.status().details["migration"] is None

        after = second.search("which database do we run?")
        assert after.mode == "hybrid"
        assert not any("paused" in w for w in after.warnings)
