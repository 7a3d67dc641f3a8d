"""The manager: visible degradation (each capability really removed), corrupt-index recovery,
bounded reads, status, probes, listeners and asyncio."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from indexcheck import scramble_index_page, wait_for
from mdrecall import MdrecallError, PathError, open_manager
from mdrecall.builtin.manager import BuiltinMemoryManager
from mdrecall.config import load_config
from mdrecall.store.db import IndexDB, StoreOptions

NOTES = {
    "MEMORY.md": "# Memory\n\n- Decision: we picked Postgres as the database for recipes.\n- Hosting is on Fly.io in Madrid.\n",
    "memory/people.md": "# People\n\n- Priya designs the meal planner screens.\n- Tomás owns the importer and the migrations.\n",
    "memory/pets.md": "# Pets\n\n- Mira's cat is called Biscuit and jumps on keyboards during calls.\n",
    "memory/food.md": "# Food\n\n- Wang Lei drinks green tea and never coffee.\n- Team dinner idea: Peking duck.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- The importer crashed on malformed CSV rows; Tomás added validation.\n",
    "memory/2026-01-06.md": "# 2026-01-06\n\n- Release v0.4 ships without the meal planner.\n",
    "memory/travel.md": "# Travel\n\n- Offsite candidates: Porto and Sintra in December.\n",
}
QUERIES = ["which database do we use?", "what is the cat called?", "who fixed the CSV importer?", "where is the offsite?"]


def _paths(resp: Any) -> list[str]:
    return [r.path for r in resp.results]


def deny_fts5(conn: apsw.Connection) -> None:
    """Refuse to create FTS5 tables on this connection, as a SQLite built without FTS5 would."""

    def authorizer(op: int, p1: str | None, p2: str | None, db_name: str | None, trigger: str | None) -> int:
        if op == apsw.SQLITE_CREATE_VTABLE and p2 == "fts5":
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK

    conn.authorizer = authorizer


# --- degradation step 1: sqlite-vec cannot load ---------------------------------------------------


def test_without_sqlite_vec_vectors_are_searched_in_process(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A new index stores float16 vectors, which sqlite-vec cannot read anyway: without the
    extension, searches rank the same and are not degraded; status still says it did not load.
    (A float32 index without it is degraded: tests/store/test_schema_migration.py.)"""
    ws = make_ws(NOTES)
    missing = tmp_path / "no-such-dir" / "vec0.so"
    with open_manager(ws, cfg(db="full.sqlite", provider="counting")) as full, open_manager(
        ws, cfg(db="novec.sqlite", provider="counting", store={"vector": {"extensionPath": str(missing)}})
    ) as novec:
        status = novec.status()
        assert status.details["vector"]["available"] is False
        assert "sqlite-vec unavailable" in status.details["vector"]["loadError"]
        assert any("sqlite-vec not loaded" in r for r in status.mode_reasons)
        assert full.status().details["vector"]["available"] is True
        assert novec.probe_vector_availability() is False and full.probe_vector_availability() is True
        for query in QUERIES:
            a, b = full.search(query, min_score=0), novec.search(query, min_score=0)
            assert a.results, query
            assert _paths(a)[:3] == _paths(b)[:3], query
            assert [r.score for r in a.results[:3]] == pytest.approx([r.score for r in b.results[:3]], abs=1e-4)
            assert b.mode == "hybrid" and not b.degraded and not a.degraded
        for m in (full, novec):
            assert m.status().details["vector"]["backend"] == "in-process"
            assert m.status().details["vector"]["encoding"] == "float16"


# --- degradation step 2: no embedding provider -----------------------------------------------------


def test_provider_none_is_keyword_only(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    with open_manager(make_ws(NOTES), cfg()) as m:
        resp = m.search("which database do we use?")
        assert _paths(resp)[0] == "MEMORY.md"
        assert resp.mode == "keyword-only" and resp.provider == "none"
        status = m.status()
        assert status.search_mode == "keyword-only"
        assert any("provider is 'none'" in r for r in status.mode_reasons)
        probe = m.probe_embedding_availability()
        assert probe.ok is False and "none" in (probe.error or "")
        assert m.probe_vector_availability() is False


def test_auto_without_a_loadable_model_is_keyword_only(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path) -> None:
    missing_model = tmp_path / "models" / "not-here"
    with open_manager(make_ws(NOTES), cfg(provider="auto", local={"model": str(missing_model)})) as m:
        resp = m.search("what is the cat called?")
        assert _paths(resp)[0] == "memory/pets.md"
        assert resp.mode == "keyword-only" and resp.degraded
        status = m.status()
        assert status.provider == "none" and status.search_mode == "keyword-only"
        skipped = {s["provider"]: s["reason"] for s in status.details["providerSelection"]["skipped"]}
        assert "cannot load local model" in skipped["local"]
        assert any("no embedding provider" in r and "local" in r for r in status.mode_reasons)


def test_explicit_local_that_cannot_load_fails_closed(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path) -> None:
    with open_manager(make_ws(NOTES), cfg(provider="local", local={"model": str(tmp_path / "nope")})) as m:
        assert _paths(m.search("who fixed the CSV importer?"))[0] == "memory/2026-01-05.md"
        selection = m.status().details["providerSelection"]
        assert selection["failedClosed"] is True and "cannot load local model" in selection["unavailableReason"]


def test_auto_picks_the_bundled_local_model(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    # The one manager in this file that loads the model itself (through the registry's real factory).
    with open_manager(make_ws(NOTES), cfg(provider="auto")) as m:
        resp = m.search("which pet jumps on the keyboard?")
        assert resp.mode == "hybrid" and not resp.degraded
        assert _paths(resp)[0] == "memory/pets.md"
        status = m.status()
        assert (status.provider, status.model, status.dims, status.search_mode) == ("local", "all-MiniLM-L6-v2", 384, "hybrid")
        assert status.details["vector"]["backend"] == "in-process" and status.details["vector"]["dims"] == 384
        assert status.details["vector"]["encoding"] == "float16"
        probe = m.probe_embedding_availability()
        assert probe.ok and probe.dims == 384


def test_in_memory_vectors_answer_like_sqlite_vec(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    """The in-memory copy of the vectors (within ``store.vector.memoryCacheMiB``) ranks exactly as
    the scan of the stored vectors does; with a budget of 0 every KNN scans them and nothing is loaded."""
    ws = make_ws(NOTES)
    queries = ["which pet jumps on the keyboard?", "who fixed the CSV importer?", "what is the cat called?"]
    answers = {}
    for budget in (128, 0):
        with open_manager(ws, cfg(db=f"i{budget}.sqlite", provider="counting", store={"vector": {"memoryCacheMiB": budget}})) as m:
            m.sync()
            answers[budget] = [[(r.path, r.start_line, round(r.score, 5)) for r in m.search(q).results] for q in queries]
            cache = m.status().details["vector"]["memoryCache"]
            assert (cache["loadedVectors"] > 0) == (budget > 0)
    assert answers[128] == answers[0] and all(answers[0])


# --- degradation step 3: the query embedding fails for one query ----------------------------------


def test_failed_query_embedding_degrades_that_query_only(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    with open_manager(make_ws(NOTES), cfg(provider="counting")) as m:
        m.sync()
        counting_provider.fail_queries = True
        resp = m.search("who fixed the CSV importer?")
        assert _paths(resp)[0] == "memory/2026-01-05.md"
        assert resp.degraded and resp.mode == "keyword-only"
        assert any("query embedding failed" in w and "simulated outage" in w for w in resp.warnings)
        counting_provider.fail_queries = False
        healthy = m.search("who fixed the CSV importer?")
        assert healthy.mode == "hybrid" and not healthy.degraded and healthy.results


# --- degradation step 4: no FTS5 -------------------------------------------------------------------


def test_without_fts_vectors_still_answer(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    ws = make_ws(NOTES)
    config = load_config(ws, cfg(provider="counting"))
    with BuiltinMemoryManager(ws, config, store_options=StoreOptions(connection_hook=deny_fts5)) as m:
        resp = m.search("what is the cat called?")
        assert resp.mode == "vector-only" and resp.degraded
        assert _paths(resp)[0] == "memory/pets.md"
        status = m.status()
        assert status.search_mode == "vector-only"
        assert status.details["fts"]["available"] is False and "FTS5 unavailable" in status.details["fts"]["error"]
        assert any("FTS5 not available" in r for r in status.mode_reasons)


def test_without_fts_or_provider_files_are_scanned(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    config = load_config(ws, cfg())
    with BuiltinMemoryManager(ws, config, store_options=StoreOptions(connection_hook=deny_fts5)) as m:
        for query, expected in [("which database do we use?", "MEMORY.md"), ("offsite candidates", "memory/travel.md")]:
            resp = m.search(query)
            assert resp.mode == "file-scan" and resp.degraded
            assert _paths(resp)[0] == expected
            assert all(0 <= r.score <= 1 for r in resp.results)
        status = m.status()
        assert status.search_mode == "file-scan" and status.details["fts"]["available"] is False
        assert any("FTS5 not available" in r for r in status.mode_reasons)


# --- corrupt index -----------------------------------------------------------------------------------


def _tear_pages(db_path: Path) -> None:
    """Move the WAL into the file, then scramble every page but the header page."""
    con = apsw.Connection(str(db_path))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db_path.read_bytes())
    for offset in range(4096, len(data), 4096):
        data[offset : offset + 200] = os.urandom(200)
    db_path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "torn-pages"])
def test_corrupt_index_is_moved_aside_and_rebuilt(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path, damage: str) -> None:
    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg()) as m:
        m.sync()
    if damage == "garbage":  # the whole file, header included (a file mdrecall never wrote is refused instead)
        db_path.write_bytes(os.urandom(64 * 1024))
    else:
        _tear_pages(db_path)
    with open_manager(ws, cfg()) as m:
        recovered = m.status().details["recovered"]
        assert recovered and str(db_path) in recovered
        assert _paths(m.search("which database do we use?"))[0] == "MEMORY.md"
        assert m.status().files == len(NOTES)
    assert list(tmp_path.glob("index.sqlite.corrupt-*"))


@pytest.mark.parametrize("kind", ["notes", "folder"])
def test_a_store_path_that_is_not_an_index_is_refused_and_left_alone(make_ws: Callable[..., Path], cfg: Callable[..., dict],
                                                                     tmp_path: Path, kind: str) -> None:  # fmt: skip
    from mdrecall.errors import StoreError

    ws = make_ws(NOTES)
    target = tmp_path / ("notes.txt" if kind == "notes" else "indexes")
    if kind == "notes":
        target.write_text("my own notes, not a database\n", encoding="utf-8")
    else:
        (target / "keep.md").parent.mkdir()
        (target / "keep.md").write_text("kept\n", encoding="utf-8")
    for _ in range(2):  # the refusal leaves nothing behind that would make a second run think it is ours
        with pytest.raises(StoreError, match="mdrecall does not move or overwrite it"):
            open_manager(ws, cfg(store={"path": str(target)}))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(target.name)) == [target.name]
    if kind == "notes":
        assert target.read_text(encoding="utf-8") == "my own notes, not a database\n"
    else:
        assert [p.name for p in target.iterdir()] == ["keep.md"]


def test_damage_the_open_probe_misses_is_found_by_the_background_check(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path
) -> None:
    """Opening runs a cheap probe (first and last row of every table) instead of reading the whole
    file; the full ``quick_check`` runs in the background and recovers what the probe cannot see."""
    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg()) as m:
        m.sync()
        assert wait_for(lambda: m.status().details["integrityCheck"] == "ok")
    scramble_index_page(db_path)  # an index page: no table read touches it
    probe = IndexDB(db_path, StoreOptions())
    try:
        assert probe.probe_ok() and not probe.integrity_ok()
    finally:
        probe.close()
    with open_manager(ws, cfg()) as m:
        assert wait_for(lambda: m.status().details["integrityCheck"].startswith("failed"))
        assert wait_for(lambda: bool(m.status().details["recovered"]))
        assert _paths(m.search("which database do we use?"))[0] == "MEMORY.md"
        assert m.status().files == len(NOTES)
    assert list(tmp_path.glob("index.sqlite.corrupt-*"))


def test_a_large_index_is_checked_once_the_first_search_ended(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full check reads the whole file (~0.7 s of CPU at 100k chunks): for a large tree it waits
    for the process's first search to end, which then has the cores to itself; a process closed
    before then skips it instead of running it during close()."""
    from mdrecall.freshness import monitor
    from mdrecall.index import recovery

    monkeypatch.setattr(recovery, "VERIFY_AFTER_S", 0.0)  # only the hold for the first search
    monkeypatch.setattr(monitor, "HOLD_ATTACH_ABOVE_FILES", 1)  # this tree counts as large
    monkeypatch.setattr(monitor, "ATTACH_HOLD_S", 60.0)
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
    with open_manager(ws, cfg()) as m:
        time.sleep(0.3)  # a check of this small file ends in milliseconds when it is not held
        assert m.index.integrity == "pending"
        assert _paths(m.search("which database do we use?"))[0] == "MEMORY.md"
        assert wait_for(lambda: m.index.integrity == "ok", what="the check after the first search")
    started = time.monotonic()
    with open_manager(ws, cfg()) as m:
        pass
    assert time.monotonic() - started < 5 and m.index.integrity == "pending"


def test_a_one_shot_command_never_starts_the_full_check(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that opens, searches and closes within ``VERIFY_AFTER_S`` (a CLI search without a
    daemon) runs no ``quick_check``: it could only be interrupted at close, CPU spent for nothing. A
    manager kept open past it gets the verdict."""
    from mdrecall.index import recovery

    monkeypatch.setattr(recovery, "VERIFY_AFTER_S", 0.8)
    checks: list[str] = []
    real_connection = apsw.Connection

    def counting(path: str, *args: Any, **kwargs: Any) -> apsw.Connection:
        if threading.current_thread().name == "mdrecall-verify-index":
            checks.append(path)
        return real_connection(path, *args, **kwargs)

    monkeypatch.setattr(recovery.apsw, "Connection", counting)
    ws = make_ws(NOTES)  # a small tree: nothing holds the check for the first search
    with open_manager(ws, cfg()) as m:
        m.sync()
        assert _paths(m.search("which database do we use?"))[0] == "MEMORY.md"
        time.sleep(0.3)  # a check of this small file ends in milliseconds once started
        assert m.index.integrity == "pending"
    assert m.index.integrity == "pending" and checks == []
    with open_manager(ws, cfg()) as m:
        assert wait_for(lambda: m.index.integrity == "ok", what="the check of a manager kept open")
    assert len(checks) == 1


def test_a_recovery_is_announced_only_after_the_monitor_knows(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path
) -> None:
    """Whoever sees ``recovered`` (status, a test, a health page) and then searches must get a sync,
    not the fresh empty index taken as up to date: the monitor hears of the rebuild first."""
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
        seen: list[str | None] = []
        invalidate = m.monitor.invalidate

        def spy() -> None:
            seen.append(m.index.recovered)
            invalidate()

        m.index._on_recovered = spy
        _tear_pages(tmp_path / "index.sqlite")
        m.index.recover_in_use(apsw.CorruptError("database disk image is malformed"), lock_held=False)
        assert seen and seen[0] is None and m.index.recovered
        assert _paths(m.search("which database do we use?"))[0] == "MEMORY.md"


def test_a_search_that_straddles_a_recovery_says_so(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path
) -> None:
    """The index is replaced between a search's freshness check and its read (the background check
    recovering): the answer is marked stale with a warning instead of passing an empty index off as fresh."""
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        m.sync()
        before_search = m.monitor.before_search

        def then_damage(session_key: str | None) -> tuple[bool, list[str]]:
            answer = before_search(session_key)
            _tear_pages(tmp_path / "index.sqlite")
            m.index.recover_in_use(apsw.CorruptError("database disk image is malformed"), lock_held=False)
            return answer

        m.monitor.before_search = then_damage  # type: ignore[method-assign]
        resp = m.search("which database do we use?")
        assert resp.stale and resp.freshness.stale
        assert any("rebuilt from the files during this search" in w for w in resp.warnings)
        m.monitor.before_search = before_search  # type: ignore[method-assign]
        again = m.search("which database do we use?")
        assert not again.stale and _paths(again)[0] == "MEMORY.md"


def test_index_damaged_while_in_use_is_rebuilt(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path) -> None:
    """A long-lived manager whose index file gets damaged under it (a bad disk, an overwrite) rebuilds
    it from the files on the next search instead of failing every search from then on."""
    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg()) as m:
        m.sync()
        _tear_pages(db_path)
        (ws / "memory" / "otters.md").write_text("# Otters\n- The otter census is on Friday.\n", encoding="utf-8")
        resp = m.search("when is the otter census?")
        assert _paths(resp)[:1] == ["memory/otters.md"]
        assert any("moved to" in w for w in resp.warnings)
        status = m.status()
        assert status.details["recovered"] and status.files == len(NOTES) + 1 and status.clean
    assert list(tmp_path.glob("index.sqlite.corrupt-*"))


# --- read_file ---------------------------------------------------------------------------------------


def test_read_file_bounds_and_continuation(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    long_lines = "\n".join(f"line {i}" for i in range(1, 301)) + "\n"
    wide = "\n".join(("w" * 999) for _ in range(50)) + "\n"
    ws = make_ws({**NOTES, "memory/long.md": long_lines, "memory/wide.md": wide})
    with open_manager(ws, cfg()) as m:
        first = m.read_file("memory/long.md")
        assert (first.from_line, first.lines, first.truncated, first.next_from) == (1, 120, True, 121)
        assert first.text.split("\n")[0] == "line 1" and first.text.split("\n")[-1] == "line 120"
        second = m.read_file("memory/long.md", from_line=first.next_from, lines=500)  # capped at 120
        assert (second.lines, second.next_from) == (120, 241)
        last = m.read_file("memory/long.md", from_line=241)
        assert last.lines == 60 and not last.truncated and last.next_from is None
        assert last.text.endswith("line 300")
        window = m.read_file("memory/long.md", from_line=10, lines=3)
        assert window.text == "line 10\nline 11\nline 12" and window.next_from == 13
        past_end = m.read_file("memory/long.md", from_line=1000)
        assert past_end.text == "" and past_end.lines == 0

        capped = m.read_file("memory/wide.md")
        assert len(capped.text) <= 12_000 and capped.lines == 12 and capped.next_from == 13

        assert m.read_file("./memory/../MEMORY.md").path == "MEMORY.md"
        for bad, code in [("../etc/passwd.md", "outside_workspace"), ("memory/none.md", "not_found"), (".mdrecall.yaml", "not_memory_path")]:
            with pytest.raises(PathError) as info:
                m.read_file(bad)
            assert info.value.code == code
        with pytest.raises(PathError):
            m.read_file("memory/long.md", from_line=0)


# --- status, listeners, lifecycle, asyncio ----------------------------------------------------------


def test_status_reports_pending_changes(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        assert m.status().clean is False and m.status().details["meta"] is None
        m.sync()
        status = m.status()
        assert status.clean is True and status.files == len(NOTES) and status.chunks >= len(NOTES)
        assert status.details["meta"]["chunkTokens"] == 200 and status.details["meta"]["ftsTokenizer"] == "unicode61"
        (ws / "memory/new.md").write_text("- new\n", encoding="utf-8")
        (ws / "memory/travel.md").unlink()
        pending = m.status().details["pendingChanges"]
        assert pending["new"] == ["memory/new.md"] and pending["deleted"] == ["memory/travel.md"]
        assert m.status().details["dirty"] is True


def test_listeners_and_closed_manager(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    calls: list[tuple[str, int, str | None]] = []
    m = open_manager(make_ws(NOTES), cfg())
    m.add_search_listener(lambda q, resp, key, now: calls.append((q, len(resp.results), key)))
    m.add_search_listener(lambda *a: 1 / 0)  # a broken listener never breaks search
    m.search("Postgres database", session_key="s1")
    assert calls == [("Postgres database", 1, "s1")]
    m.close()
    m.close()  # idempotent
    with pytest.raises(MdrecallError):
        m.search("Postgres")


def test_open_manager_requires_a_directory(tmp_path: Path) -> None:
    with pytest.raises(MdrecallError, match="not a directory"):
        open_manager(tmp_path / "missing", {"provider": "none"})


def test_asyncio_usage(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)

    async def main() -> tuple[Any, ...]:
        with open_manager(ws, cfg()) as m:
            report = await m.async_sync()
            results = await asyncio.gather(*(m.asearch(q) for q in QUERIES))
            excerpt = await m.aread_file("MEMORY.md", 1, 2)
            status = await m.astatus()
            return report, results, excerpt, status

    report, results, excerpt, status = asyncio.run(main())
    assert report.files_indexed == len(NOTES)
    assert [_paths(r)[0] for r in results] == ["MEMORY.md", "memory/pets.md", "memory/2026-01-05.md", "memory/travel.md"]
    assert excerpt.text == "# Memory\n" and excerpt.lines == 2
    assert status.files == len(NOTES)
