"""migrate-store: a builtin SQLite index (real model vectors) copied into Postgres, no re-embedding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mdrecall import open_manager
from mdrecall.backends.postgres.cli import migrate_store, postgres
from mdrecall.backends.postgres.schema import LATEST
from mdrecall.cli import main
from pghelpers import PgDatabase, pg_config

psycopg = pytest.importorskip("psycopg")


def _workspace(root: Path) -> Path:
    (root / "memory" / "shared").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n- The espresso machine in room 4 is descaled on Mondays.\n")
    (root / "memory" / "shared" / "oncall.md").write_text("# On-call\n- Pager rotation hands over at 09:00 UTC.\n")
    (root / "memory" / "2026-01-05.md").write_text("# 2026-01-05\n- Chose Tigris for image uploads.\n")
    return root


def test_migrate_store_copies_without_reembedding(tmp_path: Path, pg_db: PgDatabase, counting_provider) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path / "ws")
    sqlite_path = tmp_path / "index.sqlite"
    builtin = {"provider": "counting", "store": {"path": str(sqlite_path)}, "sync": {"watch": False}}
    with open_manager(ws, builtin, use_global_config=False) as manager:
        manager.sync()
    assert counting_provider.documents > 0
    counting_provider.reset()

    dsn = pg_db.add_agent("ana", "ops")
    overrides = ["backend=postgres", "provider=counting", f"postgres.dsn={dsn}", f"store.path={sqlite_path}"]
    result = CliRunner().invoke(migrate_store, ["-w", str(ws), "--json", *sum((["-c", o] for o in overrides), [])])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["files"] == 3 and report["vectors"] == report["chunks"] > 0 and report["team_files"] == 1
    assert report["meta_rewritten"] is True
    assert counting_provider.documents == 0  # nothing embedded by the copy

    config = pg_config(dsn, "ana", "ops", provider="counting")
    with open_manager(ws, config, use_global_config=False) as manager:
        report = manager.sync()
        assert (report.files_indexed, report.files_unchanged, report.chunks_embedded) == (0, 3, 0)
        response = manager.search("when does the pager rotation hand over")
        assert response.mode == "hybrid" and response.results[0].path == "memory/shared/oncall.md"
        assert response.results[0].vector_score is not None
    assert counting_provider.documents == 0

    import apsw

    src = apsw.Connection(str(sqlite_path))
    # Schema 3: each vector once in embedding_cache, as float16 unit vectors; Postgres gets them as float32.
    assert src.execute("SELECT value FROM meta WHERE key = 'vector_encoding'").fetchone()[0] == "float16"
    expected = {path: np.frombuffer(blob, dtype=np.float16).astype(np.float32) for path, blob in
                src.execute("SELECT c.path, v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id "
                            "WHERE c.start_line = 1")}
    with pg_db.admin() as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        stored = dict(conn.execute("SELECT path, embedding FROM mdrecall.chunks WHERE start_line = 1").fetchall())
        assert conn.execute("SELECT visibility FROM mdrecall.files WHERE path = 'memory/shared/oncall.md'").fetchone()[0] == "team"
    assert set(stored) == set(expected)
    for path, vector in expected.items():
        assert np.array_equal(np.asarray(stored[path].to_numpy()), vector)


def test_cli_errors_and_admin_commands(tmp_path: Path, pg_db: PgDatabase) -> None:
    runner = CliRunner()
    ws = _workspace(tmp_path / "ws")
    bad = runner.invoke(migrate_store, ["-w", str(ws), "-c", "backend=postgres"])
    assert bad.exit_code == 2 and "postgres.dsn" in bad.output
    dsn = pg_db.add_agent("ana", "ops")
    missing = runner.invoke(migrate_store, ["-w", str(ws), "-c", f"postgres.dsn={dsn}", "--from", str(tmp_path / "no.sqlite")])
    assert missing.exit_code == 1 and "no SQLite index" in missing.output
    again = runner.invoke(postgres, ["migrate", "--dsn", pg_db.admin_dsn, "--json"])
    assert again.exit_code == 0 and json.loads(again.output) == {"applied": [], "version": LATEST}
    added = runner.invoke(postgres, ["add-agent", "ben", "--team", "ops", "--dsn", pg_db.admin_dsn, "--json"])
    assert added.exit_code == 0
    role = json.loads(added.output)["role"]
    with psycopg.connect(pg_db.server.dsn(pg_db.name, role), autocommit=True) as conn:
        assert conn.execute("SELECT mdrecall.current_agent(), mdrecall.current_team()").fetchone() == ("ben", "ops")
    with pg_db.admin() as conn:  # a store from a newer mdrecall is refused, not written
        conn.execute("INSERT INTO mdrecall.schema_migrations(version, name) VALUES (%s, 'future')", (LATEST + 1,))
    newer = runner.invoke(postgres, ["add-agent", "cy", "--team", "ops", "--dsn", pg_db.admin_dsn])
    assert newer.exit_code == 1 and "newer than this mdrecall" in newer.output


def test_the_plugin_adds_the_commands_to_mdrecall(pg_db: PgDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["postgres", "migrate", "--dsn", pg_db.admin_dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"applied": [], "version": LATEST}
    assert main(["migrate-store", "--help"]) == 0
    assert "without re-embedding" in capsys.readouterr().out
