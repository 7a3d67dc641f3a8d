"""Promotion for LanceDB users: entries recalled again and again go through dreaming's review queue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from mdrecall import open_manager
from mdrecall.config import load_config
from mdrecall.dreaming import promotion
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.store import RecallStore

DAY1 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
QUERIES = ["Which database does the billing service use?", "billing database version", "Postgres for billing, right?"]


def _recall_for_three_days(m: Any) -> None:
    for day, query in enumerate(QUERIES):
        assert m.search(query, now=DAY1 + timedelta(days=day)).results
    m.search("editor colour theme", now=DAY1)
    m.flush()


def test_recalled_entries_are_staged_and_promoted(local_model: Any, ltm_ws: Path, target: Any) -> None:
    (ltm_ws / ".mdrecall.yaml").write_text(yaml.safe_dump(target.config()), encoding="utf-8")
    with open_manager(ltm_ws) as m:
        pg = m.store_memory("We decided to use PostgreSQL 16 for the billing service.")["id"]
        m.store_memory("I prefer dark mode in every editor and terminal.")
        _recall_for_three_days(m)
        entries = RecallStore(ltm_ws).load().entries
        keys = [k for k in entries.all_keys() if f"ltm:{pg}" in k]
        assert len(keys) == 1 and entries[keys[0]].recall_count == 3
    # A fresh process (`mdrecall promote --stage`): the manager is closed, the plugin's reader opens the table.
    now = DAY1 + timedelta(days=2, hours=1)
    staged = promotion.stage(ltm_ws, load_config(ltm_ws), now=now)
    assert [i.text for i in staged.added] == ["We decided to use PostgreSQL 16 for the billing service."]
    assert staged.added[0].source == f"ltm:{pg}:1-1"
    queue = queue_path(ltm_ws).read_text(encoding="utf-8")
    queue_path(ltm_ws).write_text(queue.replace("- [ ] We decided", "- [x] We decided"), encoding="utf-8")
    applied = promotion.apply(ltm_ws, load_config(ltm_ws), now=now)
    assert [p.text for p in applied.applied] == ["We decided to use PostgreSQL 16 for the billing service."]
    memory = (ltm_ws / "MEMORY.md").read_text(encoding="utf-8")
    assert "- We decided to use PostgreSQL 16 for the billing service. <!-- mdrecall:promoted" in memory
    assert f"source=ltm:{pg}:1-1" in memory


def test_forget_removes_the_entry_from_recalls_and_queue(local_model: Any, ltm_ws: Path, target: Any) -> None:
    with open_manager(ltm_ws, target.config()) as m:
        pg = m.store_memory("We decided to use PostgreSQL 16 for the billing service.")["id"]
        _recall_for_three_days(m)
        staged = promotion.stage(ltm_ws, m.config, now=DAY1 + timedelta(days=2, hours=1))
        assert len(staged.added) == 1
        assert m.forget(memory_id=pg)["action"] == "deleted"
        assert "PostgreSQL" not in queue_path(ltm_ws).read_text(encoding="utf-8")
        stored = sorted((ltm_ws / "memory/.dreams").glob("short-term-recall.sqlite*"))
        assert stored and not any(b"PostgreSQL" in f.read_bytes() for f in stored)
        # and it cannot come back: applying finds nothing to write
        assert promotion.apply(ltm_ws, m.config, mode="passing", now=DAY1 + timedelta(days=3)).applied == []
