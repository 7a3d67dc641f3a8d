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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_step_says_about_how_long_it_has_left() -> None:
    """From the step's own pace once it has run a few seconds: 300 of 1,200 chunks in 30 s leaves
    about 90 s; a new step starts its own count; nothing is guessed before or after."""
    out, clock = io.StringIO(), _Clock()
    line = ProgressLine(out, clock=clock)
    steps = [(0.0, SyncProgress(0, 40, "Scanning memory files…")), (0.5, SyncProgress(0, 1200, "Embedding chunks… 0/1200")),
             (1.0, SyncProgress(10, 1200, "Embedding chunks… 10/1200")),  # too soon to say
             (30.5, SyncProgress(300, 1200, "Embedding chunks… 300/1200")),
             (400.5, SyncProgress(1200, 1200, "Embedding chunks… 1200/1200")),
             (401.0, SyncProgress(0, 40, "Indexing memory files… 0/40")),
             (402.0, SyncProgress(40, 40, "Done 40/40"))]  # fmt: skip
    for at, progress in steps:
        clock.now = 100.0 + at
        line(progress)
    assert out.getvalue().splitlines() == [  # a log gets a line every 2 s at most, and each finished step
        "Scanning memory files…",
        "Embedding chunks… 300/1200, about 1m 30s left",
        "Embedding chunks… 1200/1200",
        "Done 40/40",
    ]


def test_remaining_times_read_as_a_person_would_say_them() -> None:
    from mdrecall.cli.options import _duration

    assert [_duration(s) for s in (0.2, 44.6, 60, 190, 3599.4, 3600, 3 * 3600 + 5 * 60 + 59)] == [
        "1s", "45s", "1m 00s", "3m 10s", "59m 59s", "1h 00m", "3h 05m"]  # fmt: skip


def test_on_a_terminal_each_step_is_timed_from_its_own_start() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, clock = Terminal(), _Clock()
    line = ProgressLine(out, clock=clock)
    for at, progress in [(0.0, SyncProgress(0, 1200, "Embedding chunks… 0/1200")),
                         (60.0, SyncProgress(600, 1200, "Embedding chunks… 600/1200")),
                         (120.0, SyncProgress(0, 40, "Indexing memory files… 0/40")),
                         (125.0, SyncProgress(20, 40, "Indexing memory files… 20/40"))]:  # fmt: skip
        clock.now = 100.0 + at
        line(progress)
    drawn = [part.rstrip() for part in out.getvalue().split("\r") if part]
    assert drawn[1].endswith("Embedding chunks… 600/1200, about 1m 00s left")
    assert drawn[2].endswith("Indexing memory files… 0/40")  # a new step: nothing to go on yet
    assert drawn[3].endswith("Indexing memory files… 20/40, about 5s left")  # its own pace, not the embedding's


def test_a_note_can_be_erased_on_a_terminal_and_is_a_line_elsewhere() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, plain = Terminal(), io.StringIO()
    for out in (tty, plain):
        line = ProgressLine(out)
        line.note("checking the workspace and its index…")
        line.clear()
    assert tty.getvalue().endswith("\r") and tty.getvalue().rsplit("\r", 2)[-2].strip() == ""  # erased, cursor at the start
    assert plain.getvalue() == "checking the workspace and its index…\n"
