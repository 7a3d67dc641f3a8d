"""gcpause.py: the garbage collector's automatic runs are held off while a search runs, and only
then: the collector is on again after it (also after an error, and after overlapping searches on
several threads), and a process that turned it off keeps it off."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.builtin import manager as builtin_manager
from mdrecall.gcpause import deferred_collection


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_after() -> None:
    with deferred_collection():
        assert not gc.isenabled()
        with deferred_collection():  # nested: still off, and the inner end does not turn it on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), deferred_collection():
        raise ValueError("a failed search")
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    with deferred_collection():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_searches_on_threads_turn_it_on_when_the_last_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with deferred_collection():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with deferred_collection():
            second_in.set()
            first_out.wait(10)
            seen.append(gc.isenabled())  # the first ended, this one still runs: still off
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_managers_search_runs_with_the_collector_held_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n\n- The cat is called Miso.\n", encoding="utf-8")
    during: list[bool] = []
    real = builtin_manager.run_search

    def recording(*args: object, **kwargs: object) -> object:
        during.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtin_manager, "run_search", recording)
    with open_manager(tmp_path, {"provider": "none"}, use_global_config=False) as m:
        m.sync()
        assert m.search("cat").results
    assert during == [False]
    assert gc.isenabled()


def test_searches_that_overlap_without_a_break_still_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose searches always overlap never has none running: once the pause has lasted
    ``MAX_PAUSE_S``, a search that ends runs the collection that was due, the others still running."""
    from mdrecall import gcpause

    monkeypatch.setattr(gcpause, "MAX_PAUSE_S", 0.05)
    collected: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(watch)
    try:
        with deferred_collection():  # a long search the others overlap
            with deferred_collection():
                junk = [[i] for i in range(5000)]  # allocations: a collection is due
            assert collected == []  # the pause has not lasted long enough yet
            time.sleep(0.06)
            with deferred_collection():
                junk = [[i] for i in range(5000)]
            assert len(collected) == 1  # the generation due by the counts (the youngest, mostly)
            assert not gc.isenabled()  # the long search still runs
            del junk
    finally:
        gc.callbacks.remove(watch)
    assert gc.isenabled()
