"""The Postgres team store under faults (docs/reliability.md, "Postgres under faults"), against a real
server of this module's own (tests/pghelpers.py ``fault_server``) that the tests restart, stop,
starve of disk and make read-only; the session's shared server is never touched.

Each fault is placed where it hurts: a sync is held at a known file by the owner's open transaction
(an uncommitted row for a new file, a row lock on a stored one), and the fault strikes while it waits,
with the files before it committed. Every test checks that
the command fails in one line (no traceback) or answers, that the next sync makes the store equal
to a fresh sync of the same workspaces, and that no agent ever sees another's private rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from mdrecall import open_manager
from mdrecall.errors import StoreError
from pghelpers import FaultServer, PgDatabase, fault_server, pg_config, snapshot

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fault server's Unix socket and tmpfs are Linux's")

WORKER = Path(__file__).with_name("team_worker.py")
PROGRESS = ("Scanning", "Indexing memory files…", "Embedding chunks…")


@pytest.fixture(scope="module")
def fserver() -> Iterator[FaultServer]:
    server = fault_server()
    yield server
    server.close()


@pytest.fixture
def fdb(fserver: FaultServer) -> Iterator[PgDatabase]:
    if not fserver.running():  # a test that failed with the server stopped must not take the rest down
        fserver.start()
    yield fserver.new_database()
    if not fserver.running():
        fserver.start()


# -- helpers ----------------------------------------------------------------------------------------

def _notes(ws: Path, agent: str, count: int, *, start: int = 0) -> Path:
    (ws / "memory" / "shared").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text(f"# Memory\n- PRIVATE-{agent} kestrel root note\n", encoding="utf-8")
    for i in range(start, start + count):
        (ws / "memory" / f"n{i:03d}.md").write_text(
            f"# Note {i}\n" + "".join(f"- PRIVATE-{agent} kestrel fact {i}.{j} about the harbour\n" for j in range(6)),
            encoding="utf-8")
    (ws / "memory" / "shared" / "team.md").write_text(f"# Team\n- TEAM-{agent} kestrel shared plan\n", encoding="utf-8")
    return ws


def _role(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["user"])


def _command(ws: Path, dsn: str, agent: str, args: tuple[str, ...], config: tuple[str, ...]) -> list[str]:
    # The store is the workspace's own config, as deployed (a one-shot -c provider=none would only read).
    settings = {"backend": "postgres", "provider": "none", "postgres": {"dsn": dsn, "agentId": agent}}
    (ws / ".mdrecall.yaml").write_text(json.dumps(settings), encoding="utf-8")
    return [sys.executable, "-m", "mdrecall", *args, "-w", str(ws), *(x for o in config for x in ("-c", o))]


def _cli(ws: Path, dsn: str, agent: str, *args: str, config: tuple[str, ...] = (),
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(ws, dsn, agent, args, config), capture_output=True, text=True, timeout=timeout)


def _cli_start(ws: Path, dsn: str, agent: str, *args: str, config: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(_command(ws, dsn, agent, args, config), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _one_line(stderr: str) -> str:
    """The one line a failed command printed (progress lines aside): never a traceback."""
    lines = [line for line in stderr.strip().split("\n") if line and not line.startswith(PROGRESS)]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("mdrecall: ") and "unexpected error" not in lines[0], lines[0]
    return lines[0]


def _sync(ws: Path, dsn: str, agent: str) -> None:
    """One sync in this process (what the next `mdrecall index` does, without starting Python again)."""
    with open_manager(ws, pg_config(dsn, agent), use_global_config=False) as manager:
        manager.sync()


def _fresh(fserver: FaultServer, workspaces: dict[str, Path], team: str = "core") -> dict[str, list[tuple[Any, ...]]]:
    """What a fresh sync of the same workspaces stores, in a new database."""
    fresh = fserver.new_database()
    for agent, ws in workspaces.items():
        with open_manager(ws, pg_config(fresh.add_agent(agent, team), agent), use_global_config=False) as manager:
            manager.sync()
    return snapshot(fresh)


@contextmanager
def _holding(db: PgDatabase, agent: str, path: str, team: str = "core") -> Iterator[psycopg.Connection[Any]]:
    """The owner holds ``path`` of ``agent`` in an open transaction (an uncommitted row for a new
    file, a row lock on a stored one): that agent's sync waits there when it reaches that file (its
    insert needs the same key, its delete the same row), after committing the files before it."""
    conn = psycopg.connect(db.admin_dsn)
    key = (team, agent, path)
    conn.execute(
        "INSERT INTO mdrecall.files(team_id, agent_id, path, source, hash, mtime, size, indexed_at, visibility) "
        "VALUES (%s, %s, %s, 'memory', 'held', 0, 0, 0, 'private') ON CONFLICT DO NOTHING", key)
    conn.execute("SELECT 1 FROM mdrecall.files WHERE team_id = %s AND agent_id = %s AND path = %s FOR UPDATE", key)
    try:
        yield conn
    finally:
        try:
            conn.rollback()
            conn.close()
        except psycopg.Error:
            pass  # the server restarted under it: the row was never committed


def _await_lock_wait(db: PgDatabase, role: str, proc: subprocess.Popen[str] | None = None) -> None:
    """Until a session of ``role`` waits on a lock (the held row)."""
    deadline = time.monotonic() + 90
    with db.admin() as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND datname = %s AND wait_event_type = 'Lock'",
                (role, db.name)).fetchone()[0]
            if waiting:
                return
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"the command ended before it reached the held file: {proc.communicate()}")
            time.sleep(0.05)
    raise AssertionError(f"no session of {role} ever waited on the held row")


def _own_files(db: PgDatabase, agent: str) -> int:
    with db.admin() as conn:
        return int(conn.execute("SELECT count(*) FROM mdrecall.files WHERE agent_id = %s", (agent,)).fetchone()[0])


def _chunks_per_file(db: PgDatabase, agent: str) -> dict[str, int]:
    with db.admin() as conn:
        rows = conn.execute("SELECT f.path, count(c.id) FROM mdrecall.files f LEFT JOIN mdrecall.chunks c "
                            "ON c.agent_id = f.agent_id AND c.team_id = f.team_id AND c.path = f.path "
                            "WHERE f.agent_id = %s GROUP BY f.path", (agent,)).fetchall()
    return {str(p): int(n) for p, n in rows}


def _chunks_per_file_in(rows: dict[str, list[tuple[Any, ...]]], agent: str) -> dict[str, int]:
    """``_chunks_per_file`` of a :func:`snapshot`."""
    counts = {str(f[1]): 0 for f in rows["files"] if f[0] == agent}
    for chunk in rows["chunks"]:
        if chunk[0] == agent:
            counts[str(chunk[2])] += 1
    return counts


def _terminate(db: PgDatabase, role: str) -> int:
    """``pg_terminate_backend`` on every session of ``role`` in ``db`` (waiting until each has ended)."""
    with db.admin() as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s AND datname = %s",
            (role, db.name)).fetchall())


def _leaks(paths_and_snippets: list[tuple[str, str]], me: str, others: tuple[str, ...]) -> list[str]:
    """Hits that show another agent's private memory (its token, or a path outside its shared folder)."""
    bad = []
    for path, snippet in paths_and_snippets:
        if any(f"PRIVATE-{o}" in snippet for o in others if o != me):
            bad.append(path)
        if path.startswith("@") and not path.split("/", 1)[1].startswith("memory/shared/"):
            bad.append(path)
    return bad


def _hits(response: Any) -> list[tuple[str, str]]:
    return [(r.path, r.snippet) for r in response.results]


# -- a server restart in the middle of a sync --------------------------------------------------------

def test_restart_mid_sync_fails_in_one_line_and_the_next_index_resumes(
        fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    dsn = fdb.add_agent("alice", "core")
    ws = _notes(tmp_path / "alice", "alice", 40)
    with _holding(fdb, "alice", "memory/n020.md"):
        proc = _cli_start(ws, dsn, "alice", "index")
        _await_lock_wait(fdb, _role(dsn), proc)
        done_before = _own_files(fdb, "alice")
        fserver.stop("fast")  # a restart: every session is told and cut
        fserver.start()
        _out, err = proc.communicate(timeout=120)
    assert 0 < done_before < 43  # it really was cut in the middle
    assert proc.returncode == 1
    line = _one_line(err)
    assert "connection to the Postgres store" in line and "was lost" in line and fserver.socket_dir.as_posix() in line
    assert "connection is closed" not in err  # releasing the sync lock did not mask the real error
    assert _own_files(fdb, "alice") >= done_before  # what was committed stays

    _sync(ws, dsn, "alice")  # the next index carries on
    synced = snapshot(fdb)
    assert synced == _fresh(fserver, {"alice": ws})  # nothing lost, nothing duplicated

    # A rebuild is one transaction: cut by a crash, it leaves the old rows, and says so.
    errors: list[BaseException] = []
    with open_manager(ws, pg_config(dsn, "alice"), use_global_config=False) as manager:
        with _holding(fdb, "alice", "memory/n030.md"):
            thread = threading.Thread(target=lambda: _catch(lambda: manager.sync(force=True), errors))
            thread.start()
            _await_lock_wait(fdb, _role(dsn))
            fserver.stop("immediate")
            fserver.start()
            thread.join(60)
    assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
    assert "the rebuild was rolled back, the old rows still answer" in str(errors[0])
    assert snapshot(fdb) == synced


# -- connections cut under a running process ---------------------------------------------------------

def test_terminated_connections_are_replaced_and_a_cut_sync_says_so(
        fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    dsns = {a: fdb.add_agent(a, "core") for a in ("alice", "bob")}
    ws = {a: _notes(tmp_path / a, a, 3) for a in dsns}
    with open_manager(ws["bob"], pg_config(dsns["bob"], "bob"), use_global_config=False) as bob:
        bob.sync()
    config = pg_config(dsns["alice"], "alice", postgres={"poolMin": 3, "poolMax": 4})
    with open_manager(ws["alice"], config, use_global_config=False) as alice:
        alice.sync()
        before = _hits(alice.search("kestrel harbour", min_score=0, max_results=50))
        assert before and any(p.startswith("@bob/memory/shared/") for p, _ in before)
        for _round in range(2):  # every pooled connection dead, twice over
            assert _terminate(fdb, _role(dsns["alice"])) >= 1
            assert _hits(alice.search("kestrel harbour", min_score=0, max_results=50)) == before
        assert _terminate(fdb, _role(dsns["alice"])) >= 1
        assert alice.status().files == 5

        # A sync whose connection is cut while it writes: one clear StoreError, lock released.
        _notes(ws["alice"], "alice", 6, start=3)
        errors: list[BaseException] = []
        with _holding(fdb, "alice", "memory/n006.md"):
            thread = threading.Thread(target=lambda: _catch(alice.sync, errors))
            thread.start()
            _await_lock_wait(fdb, _role(dsns["alice"]))
            _terminate(fdb, _role(dsns["alice"]))
            thread.join(60)
        assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
        assert "was lost" in str(errors[0]) and "\n" not in str(errors[0])
        alice.sync()  # the same process syncs again at once: its lock was released with the session
        after = _hits(alice.search("kestrel harbour", min_score=0, max_results=50))
        assert not _leaks(before + after, "alice", ("bob",))
    assert snapshot(fdb) == _fresh(fserver, ws)


def _catch(work: Callable[[], object], errors: list[BaseException]) -> None:
    try:
        work()
    except BaseException as exc:  # the test inspects it
        errors.append(exc)


# -- statement timeouts under a lock another session holds ------------------------------------------

def test_statement_timeout_under_a_held_lock_is_one_line_and_loses_nothing(
        fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    dsn = fdb.add_agent("alice", "core")
    ws = _notes(tmp_path / "alice", "alice", 30)
    short = ("postgres.statementTimeoutMs=500",)
    with _holding(fdb, "alice", "memory/n015.md"):
        index = _cli(ws, dsn, "alice", "index", config=short)
        done_before = _own_files(fdb, "alice")
    assert index.returncode == 1
    assert "postgres.statementTimeoutMs (500 ms)" in _one_line(index.stderr)
    assert 0 < done_before < 33  # the files before the held one are kept, whole
    fresh = _fresh(fserver, {"alice": ws})
    assert _chunks_per_file(fdb, "alice").items() <= _chunks_per_file_in(fresh, "alice").items()

    _sync(ws, dsn, "alice")
    assert snapshot(fdb) == fresh
    with fdb.admin() as owner, owner.transaction():
        owner.execute("LOCK TABLE mdrecall.chunks IN ACCESS EXCLUSIVE MODE")  # what a VACUUM FULL holds
        search = _cli(ws, dsn, "alice", "search", "kestrel harbour", config=short)
    assert search.returncode == 1
    assert "postgres.statementTimeoutMs (500 ms)" in _one_line(search.stderr)


# -- the server down ---------------------------------------------------------------------------------

def test_server_down_fails_fast_in_one_line_and_a_running_process_recovers(
        fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    dsn = fdb.add_agent("alice", "core")
    bob = fdb.add_agent("bob", "core")
    ws = _notes(tmp_path / "alice", "alice", 3)
    with open_manager(_notes(tmp_path / "bob", "bob", 2), pg_config(bob, "bob"), use_global_config=False) as manager:
        manager.sync()
    # A password in the DSN (trust authentication ignores it) must never be printed.
    secret_dsn = dsn.replace(":@", ":hunter2-pw@", 1)
    _sync(ws, dsn, "alice")
    # A pool that would wait for the whole statement timeout (ten minutes) instead of saying why.
    patient = ("postgres.statementTimeoutMs=600000",)
    with open_manager(ws, pg_config(dsn, "alice", postgres={"poolMin": 2, "poolMax": 3}),
                      use_global_config=False) as alice:
        assert alice.search("kestrel harbour", min_score=0).results
        fserver.stop("fast")
        try:
            for command in (["search", "kestrel harbour"], ["status"]):
                done = _cli(ws, secret_dsn, "alice", *command, config=patient, timeout=60)
                assert done.returncode == 1
                line = _one_line(done.stderr)
                assert line.startswith("mdrecall: cannot reach the Postgres store at ")
                assert fserver.socket_dir.as_posix() in line and "hunter2" not in done.stderr + done.stdout
            for attempt in (alice.search, lambda *_a, **_k: alice.status()):
                with pytest.raises(StoreError) as failed:
                    attempt("kestrel harbour", min_score=0)
                assert "cannot reach the Postgres store" in str(failed.value) and "\n" not in str(failed.value)
        finally:
            fserver.start()
        again = _hits(alice.search("kestrel harbour", min_score=0, max_results=50))  # the pool reconnected itself
        assert again and not _leaks(again, "alice", ("bob",))
        (ws / "memory" / "n000.md").write_text("# Note 0\n- PRIVATE-alice kestrel osprey after the outage\n")
        alice.sync()
        assert "osprey" in alice.search("osprey", min_score=0).results[0].snippet


# -- the server's disk fills ---------------------------------------------------------------------------

@pytest.fixture
def small_tablespace(fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> Iterator[Path]:
    """The store's tables and indexes moved onto a 3 MiB tmpfs (a tablespace): a real full disk
    under the rows, while the server's WAL and catalogs keep room (a full WAL disk stops the server:
    the restart tests cover that)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = fserver.socket_dir / f"small-{fdb.name}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    space = f"small_{fdb.name}"
    try:
        if fserver.system_user:
            subprocess.run(["chown", fserver.system_user, str(mount)], check=True)
        with psycopg.connect(fserver.server.uri, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE \"{space}\" LOCATION '{mount}'")
        with fdb.admin() as conn:
            conn.execute(f'ALTER TABLE ALL IN TABLESPACE pg_default SET TABLESPACE "{space}"')
            conn.execute(f'ALTER INDEX ALL IN TABLESPACE pg_default SET TABLESPACE "{space}"')
        yield mount
    finally:
        # Gone from the catalog and past a checkpoint before the disk goes: the server must never
        # write to, or replay WAL into, a tablespace whose disk was unmounted.
        with psycopg.connect(fserver.server.uri, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{fdb.name}" WITH (FORCE)')
            conn.execute(f'DROP TABLESPACE IF EXISTS "{space}"')
            conn.execute("CHECKPOINT")
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_full_disk_fails_in_one_line_nothing_half_written_and_recovers(
        fserver: FaultServer, fdb: PgDatabase, small_tablespace: Path, tmp_path: Path) -> None:
    dsn = fdb.add_agent("alice", "core")
    ws = tmp_path / "alice"
    (ws / "memory").mkdir(parents=True)
    words = "kestrel harbour osprey lantern quarry meridian cobalt tundra sorrel juniper".split()
    for i in range(120):  # about 6 MiB of rows and index: twice the room there is
        body = "".join(f"- PRIVATE-alice {' '.join(words[(i + j + k) % 10] + str(i * 97 + j * 13 + k) for k in range(40))}\n"
                       for j in range(40))
        (ws / "memory" / f"big{i:03d}.md").write_text(f"# Big {i}\n- kestrel harbour log\n{body}", encoding="utf-8")
    full = _cli(ws, dsn, "alice", "index")
    assert full.returncode == 1
    assert "is out of disk space" in _one_line(full.stderr)
    stored = _chunks_per_file(fdb, "alice")
    fresh = _fresh(fserver, {"alice": ws})
    expected = _chunks_per_file_in(fresh, "alice")
    assert stored and len(stored) < len(expected)
    assert stored.items() <= expected.items()  # each stored file has all its chunks: nothing half-written
    # Searches still answer from what is there.
    config = pg_config(dsn, "alice", sync={"watch": False, "onSearch": False})
    with open_manager(ws, config, use_global_config=False) as manager:
        assert manager.search("kestrel harbour", min_score=0).results

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_tablespace)], check=True)  # room again
    _sync(ws, dsn, "alice")
    assert snapshot(fdb) == fresh


# -- a read-only store ---------------------------------------------------------------------------------

def test_read_only_store_answers_searches_and_refuses_syncs_in_one_line(
        fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    dsn = fdb.add_agent("alice", "core")
    ws = _notes(tmp_path / "alice", "alice", 5)
    _sync(ws, dsn, "alice")
    with fdb.admin() as conn:  # what a hot standby, or a store put in maintenance, looks like to a session
        conn.execute(f'ALTER DATABASE "{fdb.name}" SET default_transaction_read_only = on')
    (ws / "memory" / "n001.md").write_text("# Note 1\n- PRIVATE-alice kestrel osprey changed\n", encoding="utf-8")
    before = snapshot(fdb)

    index = _cli(ws, dsn, "alice", "index")
    assert index.returncode == 1
    assert "is read-only" in _one_line(index.stderr)
    with open_manager(ws, pg_config(dsn, "alice"), use_global_config=False) as manager:
        answer = manager.search("kestrel harbour", min_score=0)  # it tries to sync first, and says why it could not
        assert answer.results and answer.stale and any("read-only" in w for w in answer.warnings), answer
        with pytest.raises(StoreError, match="is read-only"):
            manager.sync()
    assert snapshot(fdb) == before  # nothing written, nothing half-written

    with psycopg.connect(fserver.server.uri, autocommit=True) as conn:  # the owner's own sessions there are read-only too
        conn.execute(f'ALTER DATABASE "{fdb.name}" RESET default_transaction_read_only')
    _sync(ws, dsn, "alice")
    assert snapshot(fdb) == _fresh(fserver, {"alice": ws})


# -- many agents syncing while the server restarts -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_many_agents_syncing_through_restarts(fserver: FaultServer, fdb: PgDatabase, tmp_path: Path) -> None:
    agents = ("alice", "bob", "carol", "dave")
    dsns = {a: fdb.add_agent(a, "core") for a in agents}
    workspaces = {a: _notes(tmp_path / a, a, 2) for a in agents}
    seconds = 16.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(workspaces[a]), dsns[a], a, str(seconds),
                               "--through-faults", ",".join(agents)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for a in agents]
    try:
        for proc in procs:  # every agent has opened the store and started its loop
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate()
        time.sleep(3)
        fserver.stop("fast")  # a clean restart
        fserver.start()
        time.sleep(4)
        fserver.stop("immediate")  # a crash: sessions cut without a word, recovery from the WAL
        time.sleep(1)  # down for a second
        fserver.start()
        outputs = [p.communicate(timeout=seconds + 120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        if not fserver.running():
            fserver.start()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, f"{out}\n{err[-3000:]}"
    stats = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert all(not s["violations"] and not s["errors"] for s in stats), stats
    assert sum(s["outages"] for s in stats) > 0, stats  # the faults did reach the agents
    assert all(s["synced_after_last_outage"] for s in stats), stats  # each pool recovered by itself
    assert snapshot(fdb) == _fresh(fserver, workspaces)
