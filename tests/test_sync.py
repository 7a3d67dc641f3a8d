"""Incremental sync: unchanged files cost nothing, changes are re-chunked, deletions vanish from every
table, only uncached chunks are embedded, identity changes rebuild while readers keep answering."""

from __future__ import annotations

import os
import random
import string
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.store.db import IndexDB, StoreOptions
from mdrecall.types import SyncProgress

NOTES = {
    "MEMORY.md": "# Memory\n\n- We chose Postgres for the recipe database.\n- Deploys happen on Fly.io.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- Standup: the importer crashes on malformed CSV rows.\n",
    "memory/topic.md": "# Topic\n\n- The mobile app uses a pastel theme chosen by Priya.\n",
    "memory/sub/deep.md": "# Deep\n\n- Backups are restore-tested monthly by Tomás.\n",
}


def _rows_for(db_path: Path, rel: str) -> dict[str, int]:
    db = IndexDB(db_path, StoreOptions())
    try:
        conn = db.conn
        out = {
            "files": conn.execute("SELECT COUNT(*) FROM files WHERE path = ?", (rel,)).fetchone()[0],
            "chunks": conn.execute("SELECT COUNT(*) FROM chunks WHERE path = ?", (rel,)).fetchone()[0],
            "chunks_total": conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0],
            "fts_total": conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0],
        }
        if db.vec_dims() is not None:
            # Chunks whose vector is stored, and chunks pointing at a vector that is not.
            out["vec_total"] = conn.execute(
                "SELECT COUNT(*) FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id"
            ).fetchone()[0]
            orphans = conn.execute(
                "SELECT COUNT(*) FROM chunks WHERE vector_id IS NULL OR vector_id NOT IN (SELECT rowid FROM embedding_cache)"
            ).fetchone()[0]
            out["vec_orphans"] = orphans
        fts_orphans = conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE rowid NOT IN (SELECT rowid FROM chunks)").fetchone()[0]
        out["fts_orphans"] = fts_orphans
        return out
    finally:
        db.close()


def _paths(resp: Any) -> list[str]:
    return [r.path for r in resp.results]


def test_incremental_keyword_only(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path) -> None:
    ws = make_ws(NOTES)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        first = m.sync()
        assert first.full_rebuild and first.files_indexed == 4 and first.chunks_written >= 4

        again = m.sync()
        assert (again.files_unchanged, again.files_indexed, again.chunks_written, again.full_rebuild) == (4, 0, 0, False)

        # Touched but identical: one hash, no re-chunking.
        future = time.time() + 10
        os.utime(ws / "memory/topic.md", (future, future))
        touched = m.sync()
        assert (touched.files_unchanged, touched.files_indexed) == (4, 0)

        (ws / "memory/topic.md").write_text("# Topic\n\n- The mobile app switched to a monochrome theme.\n", encoding="utf-8")
        changed = m.sync()
        assert (changed.files_indexed, changed.files_unchanged) == (1, 3)
        assert _paths(m.search("monochrome theme")) == ["memory/topic.md"]
        assert m.search("pastel", min_score=0).results == []

        (ws / "memory/sub/deep.md").unlink()
        removed = m.sync()
        assert removed.files_removed == 1
        rows = _rows_for(db_path, "memory/sub/deep.md")
        assert rows["files"] == rows["chunks"] == rows["fts_orphans"] == 0
        assert rows["fts_total"] == rows["chunks_total"]
        assert m.search("restore-tested backups", min_score=0).results == []

        (ws / "memory/new.md").write_text("# New\n\n- Kombucha brewing schedule: Sundays.\n", encoding="utf-8")
        added = m.sync()
        assert added.files_indexed == 1 and _paths(m.search("kombucha"))[0] == "memory/new.md"
        assert m.status().files == 4


def test_search_syncs_on_demand(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        assert _paths(m.search("Postgres recipe database"))[0] == "MEMORY.md"  # first search indexes
        (ws / "memory/late.md").write_text("- Zeppelin sightings are logged here.\n", encoding="utf-8")
        m.mark_dirty()
        assert _paths(m.search("zeppelin")) == ["memory/late.md"]


def test_bad_files_are_skipped_and_reported(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    files: dict[str, Any] = dict(NOTES)
    files["memory/binary.md"] = b"PK\x03\x04\x00\x00binary\x00stuff"
    files["memory/latin1.md"] = "caf\u00e9 notes about espresso\n".encode("latin-1")
    files["memory/huge.md"] = "espresso " * 200
    ws = make_ws(files)
    with open_manager(ws, cfg(limits={"maxFileBytes": 1000}, sync={"onSearch": False})) as m:
        report = m.sync()
        assert report.files_skipped == 3 and report.files_indexed == 4
        skipped = {s.path: s.reason for s in m.status().skipped}
        assert set(skipped) == {"memory/binary.md", "memory/latin1.md", "memory/huge.md"}
        assert "binary" in skipped["memory/binary.md"]
        assert "UTF-8" in skipped["memory/latin1.md"]
        assert "maxFileBytes" in skipped["memory/huge.md"]
        assert _paths(m.search("Postgres"))[0] == "MEMORY.md"  # the rest still answers

        again = m.sync()  # known-bad unchanged files are not re-read
        assert (again.files_skipped, again.files_unchanged, again.files_indexed) == (3, 4, 0)

        (ws / "memory/latin1.md").write_text("café notes about espresso\n", encoding="utf-8")
        (ws / "memory/binary.md").unlink()
        fixed = m.sync()
        assert fixed.files_indexed == 1
        assert [s.path for s in m.status().skipped] == ["memory/huge.md"]
        assert _paths(m.search("espresso")) == ["memory/latin1.md"]


def test_progress_is_reported(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    seen: list[SyncProgress] = []
    with open_manager(make_ws(NOTES), cfg()) as m:
        m.sync(progress=seen.append)
    assert seen and seen[-1].label.startswith("Done")
    assert any(p.total == 4 and p.completed == 4 for p in seen)


# --- with the real model (through the shared, counting provider) --------------------------------


def test_with_the_cache_off_no_vector_outlives_its_chunks(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    """Each vector is stored once, in the cache table; with ``cache.enabled: false`` the ones an edit
    or a removal leaves unused are dropped at the end of the sync (and nothing is looked up)."""
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(provider="counting", cache={"enabled": False}, sync={"onSearch": False})) as m:
        m.sync()
        with open(ws / "memory/2026-01-05.md", "a", encoding="utf-8") as fh:
            fh.write("\n- A new line that changes this note's only chunk.\n")
        (ws / "memory/topic.md").unlink()
        report = m.sync()
        assert report.cache_hits == 0 and report.files_removed == 1
        cache = m.status().details["cache"]
        assert cache["unused"] == 0 and cache["entries"] == m.status().chunks
        assert m.search("CSV importer", min_score=0).mode == "hybrid"


def test_only_uncached_chunks_are_embedded(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stats = counting_provider
    files = dict(NOTES)
    files["memory/copy.md"] = NOTES["memory/topic.md"]  # identical text is embedded once
    ws = make_ws(files)
    db_path = tmp_path / "index.sqlite"
    with open_manager(ws, cfg(provider="counting", sync={"onSearch": False})) as m:
        first = m.sync()
        chunks = m.status().chunks
        assert chunks == 5
        assert stats.documents == first.chunks_embedded == 4
        assert m.status().details["vector"]["encoding"] == "float16"

        stats.reset()
        second = m.sync()
        assert (second.chunks_embedded, stats.documents, stats.document_calls) == (0, 0, 0)

        # Append to one file: only its new chunk text is embedded.
        with open(ws / "memory/2026-01-05.md", "a", encoding="utf-8") as fh:
            fh.write("- Follow-up: CSV rows are validated before import.\n")
        third = m.sync()
        assert third.files_indexed == 1 and third.chunks_embedded == 1
        assert stats.documents == 1 and "validated before import" in stats.texts[0]

        # Reverting to the old text reuses the cached vector.
        stats.reset()
        (ws / "memory/2026-01-05.md").write_text(NOTES["memory/2026-01-05.md"], encoding="utf-8")
        fourth = m.sync()
        assert (fourth.cache_hits, fourth.chunks_embedded, stats.documents) == (1, 0, 0)

        (ws / "memory/sub/deep.md").unlink()
        m.sync()
        rows = _rows_for(db_path, "memory/sub/deep.md")
        assert rows["files"] == rows["chunks"] == 0
        assert rows["vec_total"] == rows["chunks_total"] == rows["fts_total"] == 4
        assert rows["vec_orphans"] == rows["fts_orphans"] == 0


def _gibberish(rng: random.Random, words: int) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase + string.digits, k=9)) for _ in range(words))


def test_indexed_chunks_fit_the_model(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider, local_provider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(11)
    text = "\n".join(_gibberish(rng, 12) for _ in range(14)) + "\n" + "咖啡" * 150 + "\n"
    ws = make_ws({"memory/noise.md": text})
    with open_manager(ws, cfg(provider="counting", chunking={"tokens": 300, "overlap": 50}, sync={"onSearch": False})) as m:
        m.sync()
    db = IndexDB(tmp_path / "index.sqlite", StoreOptions())
    try:
        texts = [r[0] for r in db.conn.execute("SELECT text FROM chunks")]
    finally:
        db.close()
    assert len(texts) >= 4
    assert max(local_provider.count_tokens_many(texts)) <= local_provider.max_input_tokens


def test_identity_change_rebuilds_from_cache_while_reader_answers(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    stats = counting_provider
    many = {f"memory/topic-{i:03d}.md": f"# Topic {i}\n\n- Fact {i}: the espresso machine in room {i} needs descaling.\n" for i in range(60)}
    ws = make_ws({**NOTES, **many})
    reader = open_manager(ws, cfg(provider="counting", sync={"onSearch": False}))
    try:
        reader.sync()
        total = reader.status().chunks
        assert _paths(reader.search("Postgres recipe database"))[0] == "MEMORY.md"

        answers: list[int] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def keep_searching() -> None:
            while not stop.is_set():
                try:
                    answers.append(len(reader.search("Postgres recipe database").results))
                except BaseException as exc:
                    errors.append(exc)
                    return

        thread = threading.Thread(target=keep_searching)
        thread.start()
        stats.reset()
        try:
            # A different chunk budget that still yields the same chunk texts for these short files.
            with open_manager(ws, cfg(provider="counting", chunking={"tokens": 150, "overlap": 30})) as writer:
                report = writer.sync()
        finally:
            stop.set()
            thread.join(30)
        assert not errors, errors
        assert answers and min(answers) > 0
        assert report.full_rebuild and "chunkTokens" in (report.rebuild_reason or "")
        assert report.cache_hits == total and report.chunks_embedded == 0 and stats.documents == 0
        # The old reader now answers from the rebuilt index.
        assert reader.status().details["meta"]["chunkTokens"] == 150
        assert _paths(reader.search("descaling espresso machine room 42"))[0] == "memory/topic-042.md"
    finally:
        reader.close()


def test_force_and_provider_change_rebuild(make_ws: Callable[..., Path], cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        m.sync()
        forced = m.sync(force=True)
        assert forced.full_rebuild and forced.rebuild_reason == "forced" and forced.files_indexed == 4
    with open_manager(ws, cfg(provider="counting", sync={"onSearch": False})) as m:
        switched = m.sync()
        assert switched.full_rebuild and "changed" in (switched.rebuild_reason or "")
        assert switched.chunks_embedded == 4
        assert m.status().search_mode == "hybrid"
        again = m.sync(force=True)
        assert again.cache_hits == 4 and again.chunks_embedded == 0


@pytest.mark.parametrize("key,value", [("sources", ["memory", "sessions"]), ("query", {"fts": {"tokenizer": "trigram"}})])
def test_other_identity_changes_rebuild(make_ws: Callable[..., Path], cfg: Callable[..., dict], key: str, value: Any) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False})) as m:
        m.sync()
    with open_manager(ws, cfg(sync={"onSearch": False}, **{key: value})) as m:
        report = m.sync()
        assert report.full_rebuild and report.rebuild_reason
        assert _paths(m.search("Postgres"))[0] == "MEMORY.md"
