"""Forgetting with ``backend: qmd``: QMD re-indexes the files (and its transcript exports) from the
new text, and its own SQLite index is scrubbed like ours: no byte of the fact is left in QMD's home."""

from __future__ import annotations

from pathlib import Path

import pytest
from forgethelpers import NOTE_PATH, TOKEN, holding

from mdrecall import open_manager
from mdrecall.backends.qmd.layout import find_binary
from mdrecall.backends.qmd.settings import QmdSettings
from mdrecall.forget import forget


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_qmd_forgets_too(fact_ws: Path, tmp_path: Path) -> None:
    if find_binary(QmdSettings()) is None:
        pytest.skip("QMD is not installed (scripts/install-qmd.sh)")
    config = {"backend": "qmd", "provider": "none", "store": {"path": str(tmp_path / "builtin.sqlite")},
              "sync": {"watch": False}, "sources": ["memory", "sessions"], "sessions": {"visibility": "all"},
              "qmd": {"indexDir": str(tmp_path / "qmd")}}  # fmt: skip
    with open_manager(fact_ws, config, use_global_config=False) as manager:
        manager.sync()
        assert any(TOKEN in h.snippet for h in manager.search(TOKEN).results)
        assert holding([TOKEN], [], tmp_path / "qmd")  # QMD's index (and its transcript export) hold it
        report = forget(manager, TOKEN, yes=True)
        assert report.verified, report.to_dict()
        assert any(s.store == "qmd" and "vacuumed" in s.notes for s in report.stores)
        assert holding([TOKEN], [], tmp_path / "qmd", tmp_path / "builtin.sqlite", fact_ws) == {}
        assert not any(TOKEN in h.snippet for h in manager.search(TOKEN).results)
        assert any(NOTE_PATH in h.path for h in manager.search("Fly Postgres").results)
