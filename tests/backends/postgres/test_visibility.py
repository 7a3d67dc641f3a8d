"""Who sees what: private memories, shared folders, ``visibility: team`` front matter, transcripts,
another team; enforced by the database for search, get, status and raw SQL from an agent's role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.errors import PathError
from pghelpers import PgDatabase, pg_config

psycopg = pytest.importorskip("psycopg")

SESSION = ".openclaw/sessions/main/transcripts/t1.jsonl"


def _transcript(text: str) -> str:
    return json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\n"


def _alice_files() -> dict[str, str]:
    return {
        "MEMORY.md": "# Memory\n- Alice private: the walrus vault code is 4417.\n",
        "memory/shared/deploy.md": "# Deploy\n- Team: deploys freeze on walrus fridays.\n",
        "memory/roadmap.md": "---\ntitle: Roadmap\nvisibility: team\n---\n# Roadmap\n- Team: walrus launch in March.\n",
        "memory/shared/diary.md": "---\nvisibility: private\n---\n- Alice only: walrus diary entry.\n",
        SESSION: _transcript("alice transcript mentions the walrus password hunter2"),
    }


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def team(tmp_path: Path, pg_db: PgDatabase):  # type: ignore[no-untyped-def]
    alice_ws = _write(tmp_path / "alice", _alice_files())
    bob_ws = _write(tmp_path / "bob", {"MEMORY.md": "# Memory\n- Bob private: walrus allergy.\n",
                                        SESSION: _transcript("bob transcript walrus")})
    carol_ws = _write(tmp_path / "carol", {"memory/shared/x.md": "- Carol's team: walrus elsewhere.\n"})
    dsns = {"alice": pg_db.add_agent("alice", "core"), "bob": pg_db.add_agent("bob", "core"),
            "carol": pg_db.add_agent("carol", "other")}
    managers = {
        name: open_manager(ws, pg_config(dsns[name], name, sources=["memory", "sessions"]), use_global_config=False)
        for name, ws in (("alice", alice_ws), ("bob", bob_ws), ("carol", carol_ws))
    }
    for manager in managers.values():
        manager.sync()
    yield managers, dsns, pg_db
    for manager in managers.values():
        manager.close()


def _paths(manager, query: str, **kwargs) -> set[str]:  # type: ignore[no-untyped-def]
    return {r.path for r in manager.search(query, min_score=0, max_results=50, **kwargs).results}


def test_search_sees_own_and_team_shared_only(team) -> None:  # type: ignore[no-untyped-def]
    managers, _, _ = team
    assert _paths(managers["bob"], "walrus", session_key="main") == {
        "MEMORY.md", ".openclaw/sessions/main/transcripts/t1.jsonl",
        "@alice/memory/shared/deploy.md", "@alice/memory/roadmap.md",
    }
    assert _paths(managers["alice"], "walrus", session_key="main") == {
        "MEMORY.md", "memory/shared/deploy.md", "memory/roadmap.md", "memory/shared/diary.md", SESSION,
    }
    assert _paths(managers["carol"], "walrus") == {"memory/shared/x.md"}
    # Query text cannot widen anything: a secret only in alice's private notes stays hidden.
    assert _paths(managers["bob"], "4417 vault code") == set()
    assert _paths(managers["bob"], "hunter2 password", session_key="main") == set()


def test_get_serves_team_files_from_the_store_and_nothing_private(team) -> None:  # type: ignore[no-untyped-def]
    managers, _, _ = team
    bob = managers["bob"]
    hit = next(r for r in bob.search("deploys freeze fridays", min_score=0).results if r.path.startswith("@alice/"))
    got = bob.read_file(hit.path, hit.start_line, hit.end_line - hit.start_line + 1)
    assert got.path == "@alice/memory/shared/deploy.md" and "deploys freeze" in got.text
    assert bob.read_file("@alice/memory/roadmap.md").total_lines == 6
    for crafted in ("@alice/MEMORY.md", "@alice/memory/shared/diary.md", "@alice/" + SESSION.replace(".jsonl", ".md"),
                    "@carol/memory/shared/x.md", "@nobody/memory/x.md"):
        with pytest.raises(PathError) as err:
            bob.read_file(crafted)
        assert err.value.code == "not_found", crafted  # private and absent read the same: no oracle
    for crafted in ("@alice/../alice/MEMORY.md", "@alice/memory/../MEMORY.md", "@alice//etc/passwd.md", "@alice/"):
        with pytest.raises(PathError) as err:
            bob.read_file(crafted)
        assert err.value.code == "invalid_path", crafted
    with pytest.raises(PathError) as err:
        bob.read_file("../alice/MEMORY.md")  # another workspace on the same disk
    assert err.value.code == "outside_workspace"
    assert "Bob private" in bob.read_file("@bob/MEMORY.md").text  # one's own, by either name


def test_status_counts_what_the_agent_may_see(team) -> None:  # type: ignore[no-untyped-def]
    managers, _, _ = team
    alice, bob = managers["alice"].status(), managers["bob"].status()
    assert alice.files == 5 and alice.details["postgres"]["visible"]["ownSharedFiles"] == 2
    assert bob.files == 2
    assert bob.details["postgres"]["visible"]["teamFiles"] == 2  # alice's shared folder file + front matter file
    assert managers["carol"].status().details["postgres"]["visible"]["teamFiles"] == 0


def test_visibility_follows_edits(team, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    managers, _, _ = team
    roadmap = tmp_path / "alice" / "memory" / "roadmap.md"
    roadmap.write_text("# Roadmap\n- Now private: walrus launch slips.\n", encoding="utf-8")
    managers["alice"].sync()
    assert "@alice/memory/roadmap.md" not in _paths(managers["bob"], "walrus launch")
    with pytest.raises(PathError):
        managers["bob"].read_file("@alice/memory/roadmap.md")


def test_database_enforces_it_against_raw_sql(team) -> None:  # type: ignore[no-untyped-def]
    _, dsns, db = team
    with psycopg.connect(dsns["bob"], autocommit=True) as conn:
        rows = conn.execute("SELECT agent_id, path FROM mdrecall.chunks ORDER BY 1, 2").fetchall()
        assert {r[0] for r in rows} == {"alice", "bob"}
        assert {p for a, p in rows if a == "alice"} == {"memory/shared/deploy.md", "memory/roadmap.md"}
        assert conn.execute("SELECT count(*) FROM mdrecall.files WHERE content LIKE '%4417%'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM mdrecall.meta WHERE agent_id = 'alice'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM mdrecall.agents").fetchone()[0] == 1  # own mapping only
        # Settings cannot change who the role is; the role cannot become alice; writes cannot claim her.
        conn.execute("SET mdrecall.agent_id = 'alice'")
        assert conn.execute("SELECT mdrecall.current_agent()").fetchone()[0] == "bob"
        alice_role = psycopg.conninfo.conninfo_to_dict(dsns["alice"])["user"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f'SET ROLE "{alice_role}"')
        assert conn.execute("UPDATE mdrecall.files SET visibility = 'team' WHERE agent_id = 'alice'").rowcount == 0
        assert conn.execute("DELETE FROM mdrecall.chunks WHERE agent_id = 'alice'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO mdrecall.files(agent_id, path, source, hash, mtime, size, indexed_at, visibility) "
                         "VALUES ('alice', 'memory/x.md', 'memory', 'h', 0, 0, 0, 'team')")
        with pytest.raises(psycopg.errors.CheckViolation):  # transcripts are never shared
            conn.execute("INSERT INTO mdrecall.files(path, source, hash, mtime, size, indexed_at, visibility, content) "
                         "VALUES ('t.jsonl', 'sessions', 'h', 0, 0, 0, 'team', 'x')")
        # The keyword function refuses to act for a role this login is not.
        stolen = conn.execute(
            "SELECT count(*) FROM mdrecall.keyword_candidates(%s, ARRAY['''vault'''], 'english', 50, NULL, NULL, 100)",
            (alice_role,),
        ).fetchone()[0]
        assert stolen == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE mdrecall.leak AS SELECT 1")
    with db.admin() as admin:  # and alice's rows are intact
        assert admin.execute("SELECT count(*) FROM mdrecall.files WHERE agent_id = 'alice'").fetchone()[0] == 5
        assert admin.execute("SELECT count(*) FROM mdrecall.chunks WHERE agent_id = 'alice' AND visibility = 'team'"
                             ).fetchone()[0] == 2
