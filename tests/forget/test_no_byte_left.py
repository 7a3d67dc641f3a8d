"""Issue 19's "done when": a fact stated in a note and in a transcript, indexed with real vectors,
recalled by searches, staged for promotion, kept in an override index and in a LanceDB store, is
forgotten; afterwards no file under the index home, in the workspace (its derived files included) or
in the LanceDB folder holds a byte of it: not its text, not its vectors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import pytest
from forgethelpers import NOTE_PATH, TOKEN, TRANSCRIPT_PATH, holding

from mdrecall import open_manager
from mdrecall.forget import forget
from mdrecall.store import default_store_path
from mdrecall.types import SearchHit

NOW = datetime(2026, 3, 4, 15, 0, tzinfo=UTC)
DREAMING = {"timezone": "UTC"}


def _config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"provider": "counting", "sources": ["memory", "sessions"], "sessions": {"visibility": "all"},
            "sync": {"watch": False}, "dreaming": DREAMING, "lancedb": {"dbPath": str(tmp_path / "lancedb")}, **extra}  # fmt: skip


def _vectors_of(db_path: Path, text: str) -> dict[str, bytes]:
    """embedding hash -> stored vector bytes, of the chunks whose text holds ``text``."""
    conn = apsw.Connection(str(db_path))
    try:
        sql = ("SELECT e.hash, e.embedding FROM chunks c JOIN embedding_cache e ON e.rowid = c.vector_id "
               "WHERE instr(lower(c.text), lower(?)) > 0")  # fmt: skip
        return {str(h): bytes(b) for h, b in conn.execute(sql, (text,))}
    finally:
        conn.close()


def _count(db_path: Path, sql: str, args: tuple[object, ...] = ()) -> int:
    conn = apsw.Connection(str(db_path))
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


def _stage_the_fact(ws: Path) -> None:
    """Recalled by three questions on three days: staged in the review queue, as dreaming does it."""
    from mdrecall.dreaming import record_recalls, stage

    hit = SearchHit(path=NOTE_PATH, start_line=1, end_line=5, score=0.9, snippet="", source="memory",
                    citation=f"{NOTE_PATH}#L1-L5")  # fmt: skip
    for day, query in enumerate(["vault code", "what is the code of the vault", "secret vault"]):
        record_recalls(ws, query, [hit], datetime(2026, 3, 2 + day, 9, tzinfo=UTC), config=DREAMING)
    assert stage(ws, DREAMING, NOW).added


def _lance_vector(db: Path) -> bytes:
    import lancedb
    import numpy as np

    conn = lancedb.connect(str(db))
    names = list(getattr(conn.list_tables(), "tables", conn.list_tables()))
    rows = conn.open_table(names[0]).to_arrow().to_pylist()
    (row,) = [r for r in rows if TOKEN in r["text"]]
    return np.asarray(row["vector"], dtype=np.float32).tobytes()


@pytest.mark.timeout(300)
def test_a_forgotten_fact_leaves_no_byte_in_any_store(fact_ws: Path, tmp_path: Path, counting_provider: Any,
                                                      _isolated_home: Path) -> None:  # fmt: skip
    pytest.importorskip("lancedb")
    ws, home = fact_ws, _isolated_home
    lance_dir = tmp_path / "lancedb"
    shared = default_store_path(ws)
    override = shared.with_name(f"{shared.stem}.override-test.sqlite")

    # Another backend's store of the same workspace: a long-term entry stating the fact.
    with open_manager(ws, {"backend": "lancedb", "provider": "counting", "lancedb": {"dbPath": str(lance_dir)},
                           "sync": {"watch": False}}) as ltm:  # fmt: skip
        assert ltm.store_memory(f"The vault code is {TOKEN}.", source="tool")["action"] == "created"
    # An index a one-shot `-c` override keeps beside the shared one (here: keyword-only).
    with open_manager(ws, {**_config(tmp_path), "provider": "none", "store": {"path": str(override)}}) as other:
        other.sync()
    with open_manager(ws, _config(tmp_path)) as manager:
        manager.sync()
        for query in ("vault code", f"{TOKEN}"):
            assert any(TOKEN in h.snippet for h in manager.search(query).results)
        manager.flush()  # the searches' recalls are in the recall store
        _stage_the_fact(ws)
        vectors = _vectors_of(shared, TOKEN)
        assert len(vectors) == 2  # the note's chunk and the transcript's
        blobs = [*vectors.values(), _lance_vector(lance_dir)]
        where = (home, ws, lance_dir)  # all of MDRECALL_HOME: indexes, overrides, caches
        before = holding([TOKEN], blobs, *where)
        # The scan finds what it looks for: every store holds the fact now.
        assert any(".override-test.sqlite" in f for f in before[repr(TOKEN)])
        assert any(f.endswith(f"{shared.stem}.sqlite") or f.endswith(".sqlite-wal") for f in before[repr(TOKEN)])
        assert any("short-term-recall.sqlite" in f for f in before[repr(TOKEN)])
        assert any(f.endswith("promotion-queue.md") for f in before[repr(TOKEN)])
        assert any(f.startswith(str(lance_dir)) for f in before[repr(TOKEN)])
        assert len([k for k in before if k.startswith("vector")]) == 3

        report = forget(manager, TOKEN, yes=True)

        assert report.verified, report.to_dict()
        assert {s.path for s in report.plan.selections if s.kind != "ltm"} == {NOTE_PATH, TRANSCRIPT_PATH}
        removed = {(s.store, s.location): s.removed for s in report.stores}
        assert removed[("index", str(shared))]["vectors"] == 2
        assert removed[("index", str(override))]["chunks holding the lines"] == 2
        assert removed[("review queue", "memory/.dreams/promotion-queue.md")]["candidates"] == 1
        assert removed[("recall store", "memory/.dreams/short-term-recall.sqlite")]["entries"] >= 1
        assert sum(r.get("entries", 0) for (store, _), r in removed.items() if store == "lancedb") == 1

        # No byte of it anywhere: the text (any case, and its tail, in case a prefix were shared
        # with a neighbouring term in the keyword index), and none of its three vectors.
        assert holding([TOKEN, TOKEN[3:]], blobs, *where) == {}
        assert _count(shared, "SELECT COUNT(*) FROM embedding_cache WHERE hash IN (?, ?)", tuple(vectors)) == 0
        assert _count(shared, "SELECT COUNT(*) FROM chunks WHERE instr(lower(text), lower(?)) > 0", (TOKEN,)) == 0
        for leftover in ("-wal",):
            wal = Path(f"{shared}{leftover}")
            assert not wal.exists() or wal.stat().st_size == 0

        # What was not forgotten is still there and still found, by keyword and by meaning.
        note = (ws / NOTE_PATH).read_text(encoding="utf-8")
        assert "Fly Postgres" in note and "Lunch with Dana" in note and TOKEN not in note
        assert any("Fly Postgres" in h.snippet for h in manager.search("which database do we use").results)
        assert any("Lisbon" in h.snippet for h in manager.search("Lisbon offsite").results)
        lines = (ws / TRANSCRIPT_PATH).read_text(encoding="utf-8").split("\n")
        assert len(lines) == 5 and lines[1].startswith('{"type":"mdrecall.forgotten"}')
        assert "Noted, I will keep" in lines[2]  # every later line kept its number: citations stay right
    # A fresh process re-syncing finds nothing to bring back.
    with open_manager(ws, _config(tmp_path)) as again:
        again.sync(force=True)
        assert not any(TOKEN in h.snippet for h in again.search("vault code").results)
    assert holding([TOKEN], [], home, ws) == {}
