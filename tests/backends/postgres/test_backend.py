"""The Postgres backend beyond the shared contract suite (tests/contract/, which runs against it too):
the example workspace indexed, searched, cited, read back; status and its store health; incremental
syncs, on search and by the watcher; CJK keywords; a forced rebuild that other connections see only
once it is complete."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from indexcheck import wait_for
from mdrecall import PathError, ReadResult, Status, open_manager
from mdrecall.errors import MdrecallError
from mdrecall.types import SyncProgress
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
        assert isinstance(got, ReadResult)
        assert got.text == "\n".join(lines[hit.start_line - 1 : hit.end_line]) and got.path == "MEMORY.md"
        with pytest.raises(PathError) as err:
            manager.read_file("../../etc/passwd")
        assert err.value.code == "outside_workspace"

        status = manager.status()
        assert isinstance(status, Status)
        assert status.backend == "postgres" and status.files == on_disk and status.clean is True
        assert status.search_mode == "keyword-only" and status.last_error is None and status.last_sync_at
        assert status.location is not None and "password" not in status.location and pg_db.name in status.location
        health = status.details["postgres"]
        assert health["schemaVersion"] >= 1 and health["serverVersion"].startswith("18")
        assert health["pgvectorVersion"] and health["pool"]["max"] == 2 and health["agentId"] == "mira"
        assert status.to_dict()["postgres"] == health  # details are top-level keys of the JSON shape

        again = manager.sync()
        assert again.files_indexed == 0 and again.files_unchanged == on_disk and again.files_removed == 0

        (workspace / "memory" / "people.md").unlink()
        (workspace / "memory" / "2026-11-16.md").write_text("# 2026-11-16\n- Zebu retrospective moved.\n")
        changed = manager.sync()
        assert (changed.files_indexed, changed.files_removed) == (1, 1)
        assert manager.search("zebu retrospective").results[0].path == "memory/2026-11-16.md"
        assert manager.status().files == on_disk
    finally:
        manager.close()
    with pytest.raises(MdrecallError):
        manager.search("anything")


def test_searches_resync_changed_files_as_the_builtin_does(tmp_path: Path, pg_db: PgDatabase) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The walrus enclosure opens at nine.\n")
    config = pg_config(pg_db.add_agent("sam", "zoo"), "sam")  # sync.onSearch is on by default
    with open_manager(ws, config, use_global_config=False) as manager:
        assert manager.search("walrus enclosure").results[0].path == "MEMORY.md"  # first search indexes
        (ws / "memory" / "otters.md").write_text("- The otter pool drains on Tuesdays.\n")
        response = manager.search("otter pool")
        assert response.results[0].path == "memory/otters.md" and not response.stale
        assert response.freshness.files_indexed == 2


def test_the_watcher_keeps_the_store_fresh(tmp_path: Path, pg_db: PgDatabase) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- Nothing about birds yet.\n")
    sync = {"watch": True, "onSearch": False, "watchDebounceMs": 100}  # only the watcher may sync
    with open_manager(ws, pg_config(pg_db.add_agent("kit", "nest"), "kit", sync=sync), use_global_config=False) as manager:
        manager.sync()
        assert manager.status().freshness.watcher == "running"
        (ws / "memory" / "kestrels.md").write_text("- The kestrel box faces east.\n")
        wait_for(lambda: manager.status().files == 2, what="the watcher's sync of the new note")
        assert manager.search("kestrel box").results[0].path == "memory/kestrels.md"


def test_a_read_only_manager_never_writes_the_store(tmp_path: Path, pg_db: PgDatabase) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The heron pond freezes in January.\n")
    dsn = pg_db.add_agent("lee", "pond")
    with open_manager(ws, pg_config(dsn, "lee"), use_global_config=False) as writer:
        writer.sync()
    (ws / "memory" / "new.md").write_text("- Unsynced heron note.\n")
    with open_manager(ws, pg_config(dsn, "lee", store={"readOnly": True}), use_global_config=False) as reader:
        assert reader.sync().rebuild_reason == "the index is read-only here (store.readOnly)"
        response = reader.search("heron")
        assert {h.path for h in response.results} == {"MEMORY.md"} and response.stale
        assert any("read-only" in w for w in response.warnings)
        assert reader.status().files == 1


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


def test_a_forced_rebuild_is_seen_whole_or_not_at_all(tmp_path: Path, pg_db: PgDatabase) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(6):
        (ws / "memory" / f"topic{i}.md").write_text(f"# Topic {i}\n- Heron note {i}.\n")
    dsn = pg_db.add_agent("rae", "birds")

    def chunk_ids() -> set[int]:
        with pg_db.admin() as conn:
            return {r[0] for r in conn.execute("SELECT id FROM mdrecall.chunks WHERE agent_id = 'rae'")}

    with open_manager(ws, pg_config(dsn, "rae"), use_global_config=False) as manager:
        manager.sync()
        before = chunk_ids()
        seen_during: list[set[int]] = []
        other_agent_view: list[set[str]] = []

        def progress(p: SyncProgress) -> None:
            if p.label.startswith("Indexing") and p.completed in (1, 5):  # files rewritten, not committed
                seen_during.append(chunk_ids())
                other_agent_view.append({h.path for h in reader.search("heron note", min_score=0, max_results=20)})

        with open_manager(ws, pg_config(dsn, "rae", sync={"watch": False, "onSearch": False}),
                          use_global_config=False) as reader:
            report = manager.sync(force=True, progress=progress)
        assert report.full_rebuild and report.rebuild_reason == "forced" and report.files_indexed == 6
        after = chunk_ids()
    assert len(seen_during) == 2 and all(ids == before for ids in seen_during)  # the old rows, untouched
    assert all(paths == {f"memory/topic{i}.md" for i in range(6)} for paths in other_agent_view)
    assert len(after) == len(before) and not after & before  # then every row replaced at once
