"""The behaviour every backend shares (the future tests/contract/ suite), run against Postgres:
index the example workspace, find a planted fact with a correct citation, read the citation back,
status fields, an idempotent sync, close."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.errors import MdrecallError, PathError

from pghelpers import PgDatabase, pg_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace"
FACT = "- 2026-10-27: Quokka-ledger migration moves billing to Postgres row-level security.\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as fh:
        fh.write("\n## Planted\n" + FACT)
    return ws


def test_index_search_cite_read_status_idempotent_close(workspace: Path, pg_db: PgDatabase) -> None:
    dsn = pg_db.add_agent("mira", "pebble")
    manager = open_manager(workspace, pg_config(dsn, "mira", "pebble"), use_global_config=False)
    try:
        first = manager.sync()
        on_disk = len(list(workspace.rglob("*.md")))
        assert first.files_indexed == on_disk and first.chunks_written > 0

        response = manager.search("quokka ledger billing migration")
        assert response.mode == "keyword-only" and not response.stale
        hit = response.results[0]
        assert hit.path == "MEMORY.md" and "Quokka-ledger" in hit.snippet
        lines = (workspace / "MEMORY.md").read_text(encoding="utf-8").split("\n")
        planted = next(i for i, line in enumerate(lines, 1) if "Quokka-ledger" in line)
        assert hit.start_line <= planted <= hit.end_line
        assert hit.citation == f"MEMORY.md#L{hit.start_line}-L{hit.end_line}"

        got = manager.read_file(hit.path, hit.start_line, hit.end_line - hit.start_line + 1)
        assert got["text"] == "\n".join(lines[hit.start_line - 1 : hit.end_line]) and got["path"] == "MEMORY.md"
        with pytest.raises(PathError) as err:
            manager.read_file("../../etc/passwd")
        assert err.value.code == "outside_workspace"

        status = manager.status()
        for key in ("backend", "workspaceDir", "files", "chunks", "provider", "model", "searchMode", "modeReasons",
                    "clean", "lastSyncAt", "lastError"):
            assert key in status
        assert status["backend"] == "postgres" and status["files"] == on_disk and status["clean"] is True
        assert status["postgres"]["schemaVersion"] >= 1 and status["postgres"]["serverVersion"].startswith("18")
        assert status["postgres"]["pgvectorVersion"] and status["postgres"]["pool"]["max"] == 2

        again = manager.sync()
        assert again.files_indexed == 0 and again.files_unchanged == on_disk and again.files_removed == 0

        (workspace / "memory" / "people.md").unlink()
        (workspace / "memory" / "2026-11-16.md").write_text("# 2026-11-16\n- Zebu retrospective moved.\n")
        changed = manager.sync()
        assert (changed.files_indexed, changed.files_removed) == (1, 1)
        assert manager.search("zebu retrospective").results[0].path == "memory/2026-11-16.md"
        assert manager.status()["files"] == on_disk
    finally:
        manager.close()
    with pytest.raises(MdrecallError):
        manager.search("anything")


def test_cjk_keywords(tmp_path: Path, pg_db: PgDatabase) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "团队.md").write_text("# 团队笔记\n- 王磊喜欢绿茶，不喝咖啡。\n- 东京の会議は水曜日です。\n", encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n- 서울 사무실은 월요일에 닫습니다.\n", encoding="utf-8")
    dsn = pg_db.add_agent("wang", "cn")
    with open_manager(ws, pg_config(dsn), use_global_config=False) as manager:
        manager.sync()
        assert manager.search("王磊喝什么茶？", min_score=0).results[0].path == "memory/团队.md"
        assert manager.search("会議", min_score=0).results[0].path == "memory/团队.md"
        assert manager.search("사무실", min_score=0).results[0].path == "MEMORY.md"
        assert manager.search("红茶咖啡馆", min_score=0).results[0].path == "memory/团队.md"  # 咖啡 matches
        assert manager.search("上海", min_score=0).results == []
