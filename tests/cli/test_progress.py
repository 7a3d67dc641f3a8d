"""The progress line of ``mdrecall index`` (cli/options.py ``ProgressLine``) where stderr is not a terminal."""

from __future__ import annotations

import io

from mdrecall.cli.options import ProgressLine
from mdrecall.types import SyncProgress


def test_plain_progress_prints_each_finished_step_once() -> None:
    """A log or a pipe gets a line per finished step (and one every few seconds); the indexer reports
    a finished step again after its last batch, which printed "Embedding chunks… 33/33" twice."""
    out = io.StringIO()
    line = ProgressLine(out)
    assert not line.tty
    for p in [SyncProgress(0, 22, "Scanning memory files…"), SyncProgress(1, 33, "Embedding chunks… 1/33"),
              SyncProgress(33, 33, "Embedding chunks… 33/33"), SyncProgress(33, 33, "Embedding chunks… 33/33"),
              SyncProgress(22, 22, "Done 22/22")]:  # fmt: skip
        line(p)
    assert out.getvalue().splitlines() == ["Scanning memory files…", "Embedding chunks… 33/33", "Done 22/22"]
