"""gcpause.py: the garbage collector's automatic runs are held off while a search runs, and only
then: the collector is on again after it (also after an error, and after overlapping searches on
several threads), and a process that turned it off keeps it off."""

from __future__ import annotations

import gc
import threading
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
