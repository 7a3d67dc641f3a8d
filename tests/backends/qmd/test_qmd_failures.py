"""When QMD cannot answer: a process killed mid-session, a timeout, a broken or missing binary.
The builtin engine answers with a warning, status() says why, and QMD comes back after the backoff."""

from __future__ import annotations

import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qmdhelpers import PLANTED_PATH, PLANTED_QUESTION, open_qmd, wait_for

from mdrecall.cli.memory import _print_status


@pytest.fixture(scope="module")
def manager(qmd_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    m = open_qmd(qmd_workspace, tmp_path_factory.mktemp("qmd-failures"), qmd={"timeoutMs": 1500})
    assert m.wait_warm(60)
    yield m
    m.close()


def _wait_retry(manager: Any) -> None:
    wait_for(lambda: manager.backoff.ready(), 10, "the retry time")


def _answers_from_qmd(manager: Any) -> None:
    # QMD starts in the background (at the retry time, or when a search finds none): a search waits
    # for a start only within qmd.timeoutMs, so wait for it here rather than race it.
    manager.supervisor.start()
    assert manager.supervisor.wait_started(30)
    response = manager.search(PLANTED_QUESTION)
    assert response.provider == "qmd" and not response.degraded, response.warnings
    assert response.results[0].path == PLANTED_PATH
    details = manager.status().details
    assert details["answeredBy"] == "qmd" and details["fallback"] is None


def test_killed_process_falls_back_then_qmd_again(manager: Any) -> None:
    _answers_from_qmd(manager)
    pid = manager.process.pid
    os.kill(pid, signal.SIGKILL)  # our own child, by its id
    wait_for(lambda: not manager.process.alive, 5, "QMD to die")

    response = manager.search(PLANTED_QUESTION)
    assert response.provider != "qmd" and response.degraded
    assert response.warnings[0].startswith("QMD failed (exited: QMD process exited with code -9")
    assert "answered by the builtin engine" in response.warnings[0] and "retried in" in response.warnings[0]
    assert response.results[0].path == PLANTED_PATH  # the builtin finds it too
    status = manager.backoff.to_dict()  # (status() itself would retry QMD once the backoff passed)
    assert status["failures"] == 1 and status["lastErrorKind"] == "exited"

    _wait_retry(manager)
    _answers_from_qmd(manager)
    assert manager.process.pid != pid
    assert manager.backoff.failures == 0  # one success resets the backoff


def test_status_explains_a_fallback(manager: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from mdrecall.timefmt import shown  # status prints times for people (local, to the second)

    os.kill(manager.process.pid, signal.SIGKILL)
    wait_for(lambda: not manager.process.alive, 5, "QMD to die")
    manager.search(PLANTED_QUESTION)
    manager.backoff.retry_at = time.time() + 60  # hold the retry so status() shows the fallback state
    status = manager.status()
    details = status.details
    assert details["answeredBy"] == "builtin"
    assert details["fallback"]["from"] == "qmd" and details["fallback"]["to"] == "builtin"
    assert "exited" in details["fallback"]["reason"]
    health = details["health"]
    assert health["state"] == "backoff" and health["failures"] == 1 and health["retryAt"]
    assert any("QMD failing" in reason for reason in status.mode_reasons)
    assert details["fallbackEngine"]["opened"] is True and details["fallbackEngine"]["dbPath"]
    # `mdrecall status` prints who answered and why QMD did not.
    _print_status(status.to_dict())
    printed = capsys.readouterr().out.splitlines()
    assert "answered:  builtin (last search)" in printed
    fallback_line = next(line for line in printed if line.startswith("fallback:"))
    assert fallback_line.startswith("fallback:  qmd -> builtin: QMD failed (exited") and shown(details["fallback"]["at"]) in fallback_line
    manager.backoff.retry_at = time.time()
    _answers_from_qmd(manager)


def test_timeout_answers_from_builtin(manager: Any) -> None:
    _answers_from_qmd(manager)
    pid = manager.process.pid
    os.kill(pid, signal.SIGSTOP)  # QMD alive but silent: every request runs into qmd.timeoutMs
    try:
        started = time.monotonic()
        response = manager.search(PLANTED_QUESTION)
        waited = time.monotonic() - started
        assert response.degraded and response.warnings[0].startswith("QMD failed (timeout: QMD did not answer")
        assert response.results[0].path == PLANTED_PATH
        assert 1.4 < waited < 1.5 + 2.0  # qmd.timeoutMs, and the builtin's answer
        with pytest.raises(ProcessLookupError):  # the silent process was killed (and reaped), not left behind
            os.kill(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        raise
    _wait_retry(manager)
    _answers_from_qmd(manager)


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_broken_binary_falls_back_and_recovers_when_fixed(qmd_workspace: Path, tmp_path: Path, qmd_binary: Path) -> None:
    fake = _script(tmp_path / "qmd", 'echo "qmd: cannot load better-sqlite3 (ERR_DLOPEN_FAILED)" >&2; exit 3')
    m = open_qmd(qmd_workspace, tmp_path / "state", qmd={"binary": str(fake), "retryInitialMs": 200, "retryMaxMs": 10_000})
    try:
        m.wait_warm(60)
        report = m.sync()
        assert "QMD could not index" in (report.rebuild_reason or "") and "ERR_DLOPEN_FAILED" in report.rebuild_reason
        response = m.search(PLANTED_QUESTION)
        assert response.degraded and "ERR_DLOPEN_FAILED" in response.warnings[0]
        assert "answered by the builtin engine" in response.warnings[0]
        assert response.results[0].path == PLANTED_PATH
        status = m.status()
        assert status.details["answeredBy"] == "builtin" and "ERR_DLOPEN_FAILED" in status.details["fallback"]["reason"]
        assert "ERR_DLOPEN_FAILED" in (status.last_error or "")
        assert status.details["health"]["failures"] >= 2  # warm-up, sync (and status's retry when due)
        # The backoff doubles per consecutive failure, and never stops retrying (a search after the
        # retry time, or the background start at that time, tries again).
        first = m.backoff.failures
        # The background start may take the retry time itself (and fail again) before this sees it.
        wait_for(lambda: m.backoff.ready() or m.backoff.failures > first, 10, "a retry")
        m.search(PLANTED_QUESTION)
        failures = m.backoff.failures
        assert failures > first
        delay = m.backoff.retry_at - m.backoff.last_failure_at
        assert delay == pytest.approx(min(10.0, 0.2 * 2 ** (failures - 1)), rel=0.01)
        # Fix the binary: once the retry time passes QMD starts again, and answers.
        _script(fake, f'exec "{qmd_binary}" "$@"')
        m.backoff.retry_at = time.time()
        m.supervisor.start()
        assert m.supervisor.wait_started(30)
        response = m.search(PLANTED_QUESTION)
        assert response.provider == "qmd" and not response.degraded, response.warnings
        assert response.results[0].path == PLANTED_PATH
        details = m.status().details
        assert details["answeredBy"] == "qmd" and details["health"]["failures"] == 0
    finally:
        m.close()


def test_missing_binary_and_fail_closed_fallback(qmd_workspace: Path, tmp_path: Path) -> None:
    m = open_qmd(qmd_workspace, tmp_path / "a", qmd={"binary": str(tmp_path / "no-such-qmd"), "fallback": "none"})
    try:
        m.wait_warm(60)
        m.backoff.retry_at = time.time()
        response = m.search(PLANTED_QUESTION)
        assert response.results == [] and response.degraded
        assert "spawn" in response.warnings[0] and "no answer (qmd.fallback: none)" in response.warnings[0]
        details = m.status().details
        assert details["health"]["lastErrorKind"] == "spawn" and details["answeredBy"] is None
        assert details["fallback"]["to"] is None
        assert details["fallbackEngine"] is None  # never opened
    finally:
        m.close()
