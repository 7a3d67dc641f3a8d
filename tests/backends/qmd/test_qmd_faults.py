"""QMD misbehaving at start and mid-session, with the real ``qmd`` behind a wrapper script: a slow
start, a garbled handshake, a process stopped (SIGSTOP, not killed) before it answers or while warm, a
binary that is missing and then appears.

Every search answers within ``qmd.timeoutMs`` (the builtin engine in QMD's place, saying why), never
waiting for ``qmd.startTimeoutMs``; a failed start counts as a failure (backoff); QMD comes back by
itself once it works again. The bound asserted is generous (``timeoutMs`` + 2 s, for the builtin's
answer on a loaded machine); the configured start timeouts are longer than that bound, so a search
that waited for a start cannot pass.
"""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qmdhelpers import PLANTED_PATH, PLANTED_QUESTION, open_qmd, qmd_config, wait_for

from mdrecall import open_manager

TIMEOUT_MS = 800
BOUND_S = TIMEOUT_MS / 1000 + 2.0
#: Longer than BOUND_S: a search that waited for a start (the old behaviour) cannot pass.
START_TIMEOUT_MS = 4000

#: What the wrapper does instead of ``qmd mcp`` (every other command runs the real qmd).
#: Shell loops, not tr/awk, so QMD's lines are passed on one by one, as it writes them.
MCP_FAULTS = {
    "garbled-handshake": "\"$QMD\" \"$@\" | while IFS= read -r line; do printf '%s\\n' \"$line\" | tr '{}' '<>'; done",
    "stopped-at-start": 'kill -STOP $$; exec "$QMD" "$@"',
}
#: Slow (4 s: past the bound, within the test's startTimeoutMs), and junk lines between QMD's messages.
SLOW_JUNK = ("sleep 4; \"$QMD\" \"$@\" | while IFS= read -r line; do echo 'qmd: warming up [junk, not json]'; "
             "printf '%s\\n' \"$line\"; done")
HEALTHY = 'exec "$QMD" "$@"'


def _wrapper(path: Path, qmd_binary: Path, mcp_body: str, first: str = "") -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        "#!/bin/sh\n"
        f'QMD="{qmd_binary}"\n'
        f"{first}\n"
        'case " $* " in *" mcp "*) ;; *) exec "$QMD" "$@";; esac\n'
        f"{mcp_body}\n"
    )
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR)
    tmp.replace(path)  # atomic: a start never runs a half-written script
    return path


def _prebuild_fallback(workspace: Path, tmp: Path) -> None:
    """The fallback's index built beforehand (as in any session after the first), so the bound
    measures QMD's part, not the builtin's first index."""
    with open_manager(workspace, qmd_config(tmp, backend="builtin"), use_global_config=False) as builtin:
        builtin.sync()


@pytest.fixture
def faulty(qmd_workspace: Path, tmp_path: Path, qmd_binary: Path) -> Iterator[Any]:
    """``faulty(mcp_body, **qmd)``: a QMD manager whose ``qmd mcp`` is the wrapper; closed after the test."""
    opened: list[Any] = []

    def factory(mcp_body: str | None, first: str = "", sync: dict[str, Any] | None = None, **qmd: Any) -> Any:
        binary = tmp_path / "qmd-wrapper"
        if mcp_body is not None:
            _wrapper(binary, qmd_binary, mcp_body, first)
        _prebuild_fallback(qmd_workspace, tmp_path)
        settings = {"binary": str(binary), "timeoutMs": TIMEOUT_MS, "startTimeoutMs": START_TIMEOUT_MS, **qmd}
        manager = open_qmd(qmd_workspace, tmp_path, qmd=settings, sync=sync or {})
        opened.append(manager)
        return manager

    yield factory
    for manager in opened:
        proc = manager.process
        if proc is not None and proc.pid:
            try:
                os.killpg(proc.pid, signal.SIGCONT)  # our own child's group, if a test stopped it
            except (ProcessLookupError, PermissionError):
                pass
        manager.close()


def _timed_search(manager: Any) -> tuple[Any, float]:
    started = time.monotonic()
    response = manager.search(PLANTED_QUESTION)
    return response, time.monotonic() - started


def _fell_back(response: Any, elapsed: float, reason: str) -> None:
    assert elapsed < BOUND_S, f"the search took {elapsed:.2f} s (qmd.timeoutMs {TIMEOUT_MS} ms)"
    assert response.provider != "qmd" and response.degraded, response.warnings
    assert response.warnings[0].startswith(reason), response.warnings
    assert "answered by the builtin engine" in response.warnings[0]
    assert response.results[0].path == PLANTED_PATH  # the fallback answered


def _qmd_answers_again(manager: Any, within: float = 30.0) -> None:
    """Searches (each within the bound) until QMD answers; QMD restarts by itself in the background."""
    deadline = time.monotonic() + within
    while True:
        response, elapsed = _timed_search(manager)
        assert elapsed < BOUND_S, f"a search took {elapsed:.2f} s while QMD recovered"
        if response.provider == "qmd":
            assert not response.degraded and response.results[0].path == PLANTED_PATH, response.warnings
            assert manager.status().details["health"]["failures"] == 0  # one success resets the backoff
            return
        assert time.monotonic() < deadline, f"QMD did not come back: {response.warnings}"
        time.sleep(0.3)


def test_slow_start_falls_back_within_timeout_then_qmd_answers(faulty: Any) -> None:
    m = faulty(SLOW_JUNK, startTimeoutMs=15_000)
    wait_for(lambda: m.last_sync_at is not None, 30, "the first qmd update")
    response, elapsed = _timed_search(m)
    _fell_back(response, elapsed, "QMD is starting (")
    # status() does not wait for the start either.
    started = time.monotonic()
    details = m.status().details
    assert time.monotonic() - started < BOUND_S
    assert details["process"]["starting"] is True and details["fallback"]["reason"].startswith("QMD is starting")
    # A slow start is not a failure: once it is up (junk lines and all), QMD answers.
    assert m.supervisor.wait_started(20)
    response, elapsed = _timed_search(m)
    assert response.provider == "qmd" and not response.degraded, response.warnings
    assert response.results[0].path == PLANTED_PATH and elapsed < BOUND_S
    assert m.backoff.failures == 0 and m.starts == 1


@pytest.mark.parametrize("fault", sorted(MCP_FAULTS))
def test_failed_start_is_a_failure_with_backoff_and_never_stalls_a_search(faulty: Any, tmp_path: Path, qmd_binary: Path,
                                                                          fault: str) -> None:  # fmt: skip
    m = faulty(MCP_FAULTS[fault], retryInitialMs=1500, retryMaxMs=6000)
    wait_for(lambda: m.last_sync_at is not None, 30, "the first qmd update")
    # Two searches at once while the start hangs: neither waits for it, nor for the other.
    outcomes: list[tuple[Any, float]] = []
    threads = [threading.Thread(target=lambda: outcomes.append(_timed_search(m))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == 2
    for response, elapsed in outcomes:
        _fell_back(response, elapsed, "QMD is starting (")
    # The start fails after startTimeoutMs, with no search involved, and is recorded: backoff.
    wait_for(lambda: m.backoff.failures >= 1, START_TIMEOUT_MS / 1000 + 10, "the failed start to be recorded")
    health = m.backoff.to_dict()
    assert health["lastErrorKind"] == "timeout" and "initialize" in health["lastError"], health
    assert m.process is None
    # While QMD backs off, searches do not touch it: answered at once, saying why.
    response, elapsed = _timed_search(m)
    _fell_back(response, elapsed, "QMD unavailable (timeout: QMD did not answer initialize")
    # Fixed: QMD is started again at the retry time and answers.
    _wrapper(tmp_path / "qmd-wrapper", qmd_binary, HEALTHY)
    _qmd_answers_again(m)


def test_missing_binary_then_installed_recovers_by_itself(faulty: Any, tmp_path: Path, qmd_binary: Path) -> None:
    m = faulty(None, retryInitialMs=500, retryMaxMs=2000)  # tmp_path/qmd-wrapper does not exist yet
    wait_for(lambda: m.backoff.failures >= 1, 30, "the missing binary to be noticed")
    response, elapsed = _timed_search(m)
    _fell_back(response, elapsed, "QMD unavailable (spawn: cannot start")
    _wrapper(tmp_path / "qmd-wrapper", qmd_binary, HEALTHY)
    # No search needed: QMD is started in the background at the next retry time.
    wait_for(lambda: m.process is not None and m.process.alive, 20, "QMD to start by itself")
    _qmd_answers_again(m)


def test_stopped_warm_process_bounds_every_search_and_restarts_by_itself(faulty: Any) -> None:
    m = faulty(HEALTHY, retryInitialMs=500, retryMaxMs=2000)
    assert m.wait_warm(60) and m.process is not None
    response, _ = _timed_search(m)
    assert response.provider == "qmd", response.warnings
    pid = m.process.pid
    os.killpg(pid, signal.SIGSTOP)  # alive, silent: every request runs into qmd.timeoutMs
    try:
        outcomes: list[tuple[Any, float]] = []
        threads = [threading.Thread(target=lambda: outcomes.append(_timed_search(m))) for _ in range(2)]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        status = m.status()  # never waits behind a search's lock
        assert time.monotonic() - started < BOUND_S
        for thread in threads:
            thread.join(30)
        assert len(outcomes) == 2
        for response, elapsed in outcomes:
            assert elapsed < BOUND_S and response.provider != "qmd" and response.results[0].path == PLANTED_PATH
        assert any(r.warnings[0].startswith("QMD failed (timeout: QMD did not answer") for r, _ in outcomes)
        assert m.backoff.failures == 1, m.backoff.to_dict()  # one hung process, one failure
        assert status.details["health"]["failures"] <= 1
    finally:
        try:
            os.killpg(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # killed, as it should be
    with pytest.raises(ProcessLookupError):  # the stopped process was killed, not left behind
        os.kill(pid, 0)
    # A new process starts by itself at the retry time, no search needed.
    wait_for(lambda: m.process is not None and m.process.alive and m.process.pid != pid, 20, "a new QMD process")
    _qmd_answers_again(m)


@pytest.mark.slow
def test_stopped_qmd_update_never_holds_a_search(faulty: Any, tmp_path: Path, qmd_workspace: Path) -> None:
    flag = tmp_path / "stop-update"
    # `qmd update` stops itself (SIGSTOP) while the flag exists; `qmd mcp` and the rest are the real qmd.
    stop_update = f'case " $* " in *" update "*) [ -e "{flag}" ] && kill -STOP $$;; esac'
    m = faulty(HEALTHY, first=stop_update, sync={"searchWaitMs": 500}, updateTimeoutMs=6000, retryInitialMs=500,
               retryMaxMs=2000)  # fmt: skip
    assert m.wait_warm(60)
    response, _ = _timed_search(m)
    assert response.provider == "qmd", response.warnings
    flag.touch()
    note = qmd_workspace / "memory" / "2026-11-21.md"
    note.write_text("# 2026-11-21\n\n- The zeppelin hangar inspection moved to Thursday.\n", encoding="utf-8")

    def search_new_note() -> Any:
        started = time.monotonic()
        response = m.search("zeppelin hangar inspection")
        elapsed = time.monotonic() - started
        assert elapsed < 0.5 + BOUND_S, f"the search took {elapsed:.2f} s behind a stopped qmd update"
        return response

    try:
        # The search's re-index (qmd update) is stopped: the search waits sync.searchWaitMs for it, no
        # more, and QMD answers from its index as it is, marked stale.
        response = search_new_note()
        assert response.stale and any("another sync in this process is running" in w for w in response.warnings), response.warnings
        flag.unlink()
        # The stopped update is killed at updateTimeoutMs (a failure: backoff); then QMD indexes the
        # new note and finds it.
        deadline = time.monotonic() + 40
        while True:
            response = search_new_note()
            if response.provider == "qmd" and response.results and response.results[0].path == "memory/2026-11-21.md":
                break
            assert time.monotonic() < deadline, response.warnings
            time.sleep(0.3)
    finally:
        flag.unlink(missing_ok=True)
        note.unlink()
