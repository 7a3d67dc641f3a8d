"""``mdrecall.doctor``: every degraded state, created for real, is named with a fix.

Each test puts the engine into one state the way it happens in the field (a missing model path, an
unloadable extension, an SQLite without FTS5, a torn index file, a provider answering errors, a
watcher that cannot start, ...), then checks that :func:`diagnose` names that state and says what to do.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import apsw
import pytest

from mdrecall import open_manager
from mdrecall.builtin.manager import BuiltinMemoryManager
from mdrecall.config import load_config
from mdrecall.doctor import STATES, Finding, diagnose, diagnose_workspace, worst
from mdrecall.store.db import StoreOptions
from mdrecall.testing import FakeProvider, plugin, registered
from mdrecall.types import SyncProgress

sys.path.insert(0, str(Path(__file__).parent / "embeddings"))
from provider_servers import Fault, OpenAIServer

NOTES = {
    "MEMORY.md": "# Memory\n\n- Decision: we use Postgres 16 as the main database.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- The importer crashed on malformed CSV rows.\n",
}


def states(findings: list[Finding]) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for f in findings:
        assert f.state in STATES, f.state
        out.setdefault(f.state, f)
    return out


def check(manager: Any, state: str, *words: str, session_key: str | None = None) -> Finding:
    found = states(diagnose(manager.status(), config=manager.config, session_key=session_key))
    assert state in found, f"{state} not in {sorted(found)}"
    finding = found[state]
    for word in words:
        assert word in finding.message + " " + (finding.fix or ""), (word, finding)
    return finding


@pytest.fixture
def fake() -> Iterator[None]:
    with registered(plugin(providers={
        "fake": lambda config: FakeProvider(model=config.model or "fake-a"),
        "fake-b": lambda config: FakeProvider(model="fake-b"),
    })):  # fmt: skip
        yield


def test_healthy_workspace_has_no_warnings(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], fake: None) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(provider="fake")) as m:
        m.sync()
        findings = diagnose(m.status(), config=m.config, environment=False)
    assert findings == [] and worst(findings) is None


def test_empty_workspace(tmp_path: Path, cfg: Callable[..., dict[str, Any]]) -> None:
    (tmp_path / "empty").mkdir()
    with open_manager(tmp_path / "empty", cfg()) as m:
        m.sync()
        f = check(m, "empty-workspace", "mdrecall init", "remember")
    assert f.severity == "warning"


def test_index_missing_then_pending_changes(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        check(m, "index-missing", "mdrecall index")
        assert "pending-changes" not in states(diagnose(m.status(), config=m.config))  # no index: one finding, not two
        m.sync()
        (ws / "memory" / "2026-01-06.md").write_text("# 2026-01-06\n\n- New fact.\n", encoding="utf-8")
        check(m, "pending-changes", "1 file change", "mdrecall index")


def test_keyword_only_by_choice_is_info(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(make_ws(NOTES), cfg()) as m:
        m.sync()
        assert check(m, "keyword-only", "provider: auto").severity == "info"


def test_no_provider_and_model_missing(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    # auto with a local model that is not there and no API keys: nothing can embed.
    config = cfg(provider="auto", local={"model": str(tmp_path / "no-such-model")})
    with open_manager(make_ws(NOTES), config) as m:
        m.sync()
        assert check(m, "no-provider", "keyword-only", "[local]' && ").severity == "warning"
        check(m, "model-missing", "no-such-model", "local.model")


def test_provider_failed_closed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(make_ws(NOTES), cfg(provider="openai")) as m:
        f = check(m, "provider-failed-closed", "OPENAI_API_KEY", "fallback")
    assert f.severity == "error"


def test_provider_fallback(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], fake: None) -> None:
    with open_manager(make_ws(NOTES), cfg(provider="openai", fallback="fake")) as m:
        m.sync()
        check(m, "provider-fallback", "'openai'", "'fake'", "docs/providers.md")


def test_provider_error_and_sync_failed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    # A hosted provider (a local server speaking OpenAI's wire format) that refuses the documents.
    with OpenAIServer() as server:
        server.queue(*[Fault(400, {"error": {"message": "input rejected", "type": "invalid_request_error"}})] * 4)
        config = cfg(provider="openai-compatible", model="m",
                     providers={"openai-compatible": {"baseUrl": server.base_url + "/v1", "dimensions": 8}})  # fmt: skip
        with open_manager(make_ws(NOTES), config) as m:
            with pytest.raises(Exception, match="input rejected"):
                m.sync()
            check(m, "sync-failed", "input rejected", "mdrecall index")
            check(m, "provider-error", "input rejected")


def test_watcher_errors(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    from indexcheck import wait_for

    # The watcher's sync fails (the provider refuses every document): the watcher counts it and goes on.
    with OpenAIServer() as server:
        server.queue(*[Fault(400, {"error": {"message": "input rejected", "type": "invalid_request_error"}})] * 50)
        config = cfg(provider="openai-compatible", model="m", sync={"watch": True, "watchDebounceMs": 50},
                     providers={"openai-compatible": {"baseUrl": server.base_url + "/v1", "dimensions": 8}})  # fmt: skip
        ws = make_ws(NOTES)
        with open_manager(ws, config) as m:
            assert m.watcher is not None and m.watcher.wait_ready(30) and m.watcher.running
            (ws / "memory" / "2026-01-07.md").write_text("# 2026-01-07\n\n- A change for the watcher.\n", encoding="utf-8")
            assert wait_for(lambda: m.status().details["watcher"]["errors"] > 0)
            check(m, "watcher-errors", "error(s)")


def test_sqlite_vec_missing(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], fake: None, tmp_path: Path) -> None:
    config = cfg(provider="fake", store={"vector": {"extensionPath": str(tmp_path / "nowhere" / "vec0.so")}})
    with open_manager(make_ws(NOTES), config) as m:
        m.sync()
        # A float16 index loses nothing without sqlite-vec: said, not warned about.
        assert check(m, "sqlite-vec-missing", "in process", "extensionPath").severity == "info"


def test_vectors_and_fts_disabled(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], fake: None) -> None:
    config = cfg(provider="fake", store={"vector": {"enabled": False}}, query={"fts": {"enabled": False}})
    with open_manager(make_ws(NOTES), config) as m:
        m.sync()
        assert check(m, "vectors-disabled", "store.vector.enabled").severity == "info"
        check(m, "fts-disabled", "query.fts.enabled")


def test_no_fts5(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    def deny_fts5(conn: apsw.Connection) -> None:  # as an SQLite built without FTS5
        def authorizer(op: int, p1: str | None, p2: str | None, db_name: str | None, trigger: str | None) -> int:
            return apsw.SQLITE_DENY if op == apsw.SQLITE_CREATE_VTABLE and p2 == "fts5" else apsw.SQLITE_OK

        conn.authorizer = authorizer

    ws = make_ws(NOTES)
    with BuiltinMemoryManager(ws, load_config(ws, cfg()), store_options=StoreOptions(connection_hook=deny_fts5)) as m:
        m.sync()
        check(m, "no-fts5", "FTS5", "apsw")


def test_rebuild_needed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
    with open_manager(ws, cfg(chunking={"tokens": 120, "overlap": 20})) as m:
        check(m, "rebuild-needed", "chunkTokens", "mdrecall index")


def test_vectors_paused_by_a_model_switch(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], fake: None) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(provider="fake")) as m:
        m.sync()
    with open_manager(ws, cfg(provider="fake-b")) as m:
        check(m, "vectors-paused", "keyword-only", "mdrecall index")
        assert "rebuild-needed" not in states(diagnose(m.status(), config=m.config))


def test_rebuild_running(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws(NOTES)
    inside, release = threading.Event(), threading.Event()

    def progress(p: SyncProgress) -> None:
        inside.set()
        release.wait(20)

    with open_manager(ws, cfg()) as m:
        sync = threading.Thread(target=m.sync, kwargs={"force": True, "progress": progress})
        sync.start()
        try:
            assert inside.wait(20)
            check(m, "rebuild-running", "rebuilding")
        finally:
            release.set()
            sync.join(20)


def test_index_recovered(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
    # A damaged index file (an index mdrecall wrote: a file it never wrote is refused instead).
    (tmp_path / "index.sqlite").write_bytes(os.urandom(64 * 1024))
    with open_manager(ws, cfg()) as m:
        check(m, "index-recovered", "moved to", "rebuilt")


def test_integrity_failed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    from indexcheck import scramble_index_page, wait_for

    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg()) as m:
        m.sync()
    scramble_index_page(db_path)  # only the full check reads it (the open probe passes)
    with open_manager(ws, cfg()) as m:
        assert wait_for(lambda: str(m.status().details["integrityCheck"]).startswith("failed"))
        f = check(m, "integrity-failed", "mdrecall index --force")
        assert f.severity == "error"


def test_a_doctor_run_checks_the_whole_index_itself(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]],
                                                    tmp_path: Path) -> None:  # fmt: skip
    """``mdrecall doctor`` closes its manager long before the background check would start: it runs
    the full check itself, finds the damage the open probe misses, and the index is rebuilt."""
    from indexcheck import scramble_index_page
    from mdrecall.doctor import diagnose_workspace

    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg()) as m:
        m.sync()
    findings, status = diagnose_workspace(ws, cfg())
    assert status is not None and status.details["integrityCheck"] == "ok"
    assert not [f for f in findings if f.state in ("integrity-failed", "index-recovered")]
    scramble_index_page(db_path)
    findings, status = diagnose_workspace(ws, cfg())
    codes = {f.state for f in findings}
    assert status is not None and str(status.details["integrityCheck"]).startswith("failed"), status.details
    assert {"integrity-failed", "index-recovered"} <= codes, codes
    assert list(tmp_path.glob("index.sqlite.corrupt-*"))


def test_watcher_failed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # the package is missing: import fails
    with open_manager(make_ws(NOTES), cfg(sync={"watch": True})) as m:
        check(m, "watcher-failed", "watchfiles", "sync.watchPolling")


def test_skipped_files(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws({**NOTES, "memory/huge.md": "x" * 5000, "memory/blob.md": b"\x00\x01binary"})
    with open_manager(ws, cfg(limits={"maxFileBytes": 4096})) as m:
        m.sync()
        found = [f for f in diagnose(m.status(), config=m.config) if f.state == "skipped-files"]
    by_file = {f.message.split(" ")[0]: f for f in found}
    assert "limits.maxFileBytes" in (by_file["memory/huge.md"].fix or "")
    assert "UTF-8" in (by_file["memory/blob.md"].fix or "")


def test_recall_tracking_error(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws(NOTES)
    (ws / "memory" / ".dreams").write_text("not a directory", encoding="utf-8")  # the recall store cannot be created
    with open_manager(ws, cfg()) as m:
        m.sync()
        assert m.search("why did the importer crash?").results  # a daily note: a recall to record
        m.flush()
        check(m, "recall-tracking-error", "memory/.dreams")


def test_hidden_by_scope(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    transcript = '{"type":"message","message":{"role":"user","content":"the deploy password rotates monthly"}}\n'
    ws = make_ws({**NOTES, ".openclaw/sessions/agent:main:main/transcripts/s1.jsonl": transcript})
    with open_manager(ws, cfg(sources=["memory", "sessions"])) as m:
        m.sync()
        f = check(m, "hidden-by-scope", "--session-key", "sessions.visibility")
        assert f.severity == "warning"
        assert check(m, "hidden-by-scope", "agent:main:main", session_key="agent:main:main").severity == "info"
    with open_manager(ws, cfg(sources=["memory", "sessions"], sessions={"visibility": "all"})) as m:
        assert "hidden-by-scope" not in states(diagnose(m.status(), config=m.config))


def test_plugin_error(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    class Broken:
        from mdrecall.plugins import hookimpl

        @hookimpl
        def register_backends(self, register: Callable[..., None]) -> None:
            raise RuntimeError("backend module half-installed")

    with registered(Broken(), name="broken-backend"):
        with open_manager(make_ws(NOTES), cfg()) as m:
            f = check(m, "plugin-error", "broken-backend", "half-installed", "mdrecall plugins")
    assert f.severity == "error"


def test_open_failed(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    ws = make_ws(NOTES)
    findings, status = diagnose_workspace(ws, cfg(query={"maxResults": 0}))
    assert status is None
    f = states(findings)["open-failed"]
    assert "query.maxResults" in f.message and "config validate" in (f.fix or "")
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    findings, _ = diagnose_workspace(ws, cfg(store={"path": str(tmp_path / "a-file" / "index.sqlite")}))
    assert "store.path" in (states(findings)["open-failed"].fix or "")


def test_backend_warnings_pass_through(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    # Another backend's own warning (the builtin engine reports its states in typed fields instead).
    from mdrecall.testing import FakeBackend

    ws = make_ws(NOTES)
    status = FakeBackend(ws, load_config(ws, cfg())).status()
    found = states(diagnose(replace(status, warnings=["remote index is read-only"]), environment=False))
    assert found["backend-warning"].message == "remote index is read-only"


def test_every_state_is_documented() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [state for state in STATES if f"`{state}`" not in doc]
    assert not missing, f"docs/cli.md does not list doctor states {missing}"


def test_a_ctrl_c_during_the_doctors_check_stops_it_at_once(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """SQLite holds the thread that runs ``quick_check`` until the whole file is read (seconds at 1M
    chunks): the doctor's check runs on a thread of its own, so a Ctrl-C stops the command at once
    and closing the index interrupts the check. Here the check is a statement that never ends."""
    import signal
    import time

    from mdrecall.doctor import diagnose_workspace
    from mdrecall.index.recovery import IndexHandle

    class Stopped(BaseException):  # as KeyboardInterrupt is: no "except Exception" keeps it
        pass

    def endless_check(self: IndexHandle) -> None:
        conn = apsw.Connection(":memory:")
        self._verify_conn = conn
        watchdog = threading.Timer(10.0, conn.interrupt)  # a check never interrupted fails the test, not hangs it
        watchdog.start()
        try:
            if not self._closing.is_set():
                conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c").fetchone()
        except apsw.InterruptError:
            self.integrity = "interrupted"
        finally:
            watchdog.cancel()
            self._verify_conn = None
            conn.close()

    def stop(signum: int, frame: object) -> None:
        raise Stopped

    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
    monkeypatch.setattr(IndexHandle, "_check", endless_check)
    previous = signal.signal(signal.SIGINT, stop)
    ctrl_c = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    try:
        ctrl_c.start()
        with pytest.raises(Stopped):
            diagnose_workspace(ws, cfg())
    finally:
        ctrl_c.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 3.0
    assert not [t for t in threading.enumerate() if t.name == "mdrecall-check-index" and t.is_alive()]  # closing ended it
