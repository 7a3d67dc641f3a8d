"""The approximate vector index past the memory budget: same answers as the exact scan, updated
with the index, rebuilt when its files are missing or damaged, never trusted when out of date.

Real parts: the bundled model, real SQLite, real faiss (the ``ann`` extra)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")

from mdrecall import open_manager

TOPICS = ["database migration", "holiday in Lisbon", "quarterly budget", "the dog's vet visit", "guitar lessons",
          "kitchen renovation", "the conference talk", "marathon training", "tax filing", "the new laptop"]
QUERIES = ["when is the vet appointment?", "how is the marathon training going", "what did we decide about the budget?",
           "which database do we migrate to", "where are we travelling"]


def _workspace(root: Path, notes: int = 60) -> Path:
    (root / "memory").mkdir(parents=True)
    for i in range(notes):
        topic = TOPICS[i % len(TOPICS)]
        (root / "memory" / f"note-{i:03d}.md").write_text(
            f"# Note {i}\n- About {topic}: item {i} was discussed with Sam on day {i % 28 + 1}.\n", encoding="utf-8")
    return root


def _config(store: Path, approximate: str = "auto") -> dict[str, Any]:
    # memoryCacheMiB 0: every index is past the in-memory budget
    return {"provider": "local", "store": {"path": str(store), "vector": {"memoryCacheMiB": 0, "approximate": approximate}},
            "sync": {"watch": False}}


def _answers(m: Any) -> list[list[tuple[str, int, float]]]:
    out = []
    for q in QUERIES:
        resp = m.search(q, min_score=0)
        out.append([(h.path, h.start_line, round(h.score, 6)) for h in resp.results])
    return out


def test_the_approximate_index_gives_the_exact_answers_and_follows_the_index(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    store, exact_store = tmp_path / "ann.sqlite", tmp_path / "exact.sqlite"
    with open_manager(ws, _config(store)) as m:
        m.sync()
        assert m.ann is not None and m.ann.wait(120)
        status = m.status().details["vector"]["approximate"]
        assert status["entries"] == m.status().chunks and status["lastError"] is None
        assert Path(f"{store}.ann").exists() and Path(f"{store}.ann.json").exists()
        searched = _answers(m)
        assert m.ann.searches == len(QUERIES)  # the graph answered every one
    shutil.copy(store, exact_store)
    with open_manager(ws, _config(exact_store, approximate="off")) as exact:
        assert exact.ann is None
        assert _answers(exact) == searched  # scores are re-computed exactly: identical lists

    # a new note and a deleted one: the next sync updates the graph, by difference
    (ws / "memory" / "note-900.md").write_text("# Note 900\n- The zebra crossing outside the office is repainted.\n", encoding="utf-8")
    (ws / "memory" / "note-000.md").unlink()
    with open_manager(ws, _config(store)) as m:
        m.sync()
        assert m.ann is not None and m.ann.wait(120)
        update = m.ann.last_update
        assert update is not None and not update["rebuilt"] and update["added"] >= 1 and update["removed"] >= 1
        answered = m.ann.searches
        hits = m.search("zebra crossing repainted", min_score=0).results
        assert hits and hits[0].path == "memory/note-900.md" and m.ann.searches == answered + 1
        assert all(h.path != "memory/note-000.md" for q in QUERIES for h in m.search(q, min_score=0).results)


def test_an_out_of_date_graph_is_never_used(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", notes=30)
    store = tmp_path / "ann.sqlite"
    with open_manager(ws, _config(store)) as m:
        m.sync()
        assert m.ann is not None and m.ann.wait(120)
        graph = m.ann
        (ws / "memory" / "note-901.md").write_text("# Note 901\n- The heron nests by the pond.\n", encoding="utf-8")
        m.ann = None  # the sync below must not update the graph
        m.sync()
        m.ann = graph
        with m.index.reading() as db:
            import numpy as np

            vec = np.asarray(m.provider.embed_query("heron nests by the pond"), dtype=np.float32)
            assert graph.search(db, vec, 5, None) is None  # the chunks changed since it was built
        # a search still finds the new note (by scanning) and brings the graph up to date
        assert m.search("heron nests by the pond", min_score=0).results[0].path == "memory/note-901.md"
        assert graph.wait(120)
        with m.index.reading() as db:
            found = graph.search(db, vec, 5, None)
            assert found is not None and found[0].path == "memory/note-901.md"


@pytest.mark.parametrize("damage", ["truncated", "missing", "garbage meta"])
def test_a_damaged_or_missing_graph_is_rebuilt_from_the_stored_vectors(tmp_path: Path, damage: str) -> None:
    ws = _workspace(tmp_path / "ws", notes=30)
    store = tmp_path / "ann.sqlite"
    with open_manager(ws, _config(store)) as m:
        m.sync()
        assert m.ann is not None and m.ann.wait(120)
        before = _answers(m)
    graph = Path(f"{store}.ann")
    if damage == "truncated":
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    elif damage == "missing":
        graph.unlink()
    else:
        Path(f"{store}.ann.json").write_text("{not json", encoding="utf-8")
    with open_manager(ws, _config(store)) as m:
        assert _answers(m) == before  # answered by the scan meanwhile
        assert m.ann is not None and m.ann.wait(120)
        assert m.ann.last_update is not None and m.ann.last_update["rebuilt"] is True
        answered = m.ann.searches
        assert _answers(m) == before and m.ann.searches == answered + len(QUERIES)  # and by the rebuilt graph
        assert m.status().details["vector"]["approximate"]["entries"] == m.status().chunks


def test_an_update_asked_for_while_another_runs_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct update() beside the background one that a sync started: one after the other (both
    used to write the same temporary files, and the second rename failed), the graph then whole."""
    import threading
    import time

    from mdrecall.search import ann

    save = ann._Graph.save

    def slow_save(self: Any, path: Path) -> None:
        time.sleep(0.3)  # widens the window in which two updates would overlap
        save(self, path)

    monkeypatch.setattr(ann._Graph, "save", slow_save)
    ws = _workspace(tmp_path / "ws")
    store = tmp_path / "ann.sqlite"
    with open_manager(ws, _config(store)) as m:
        m.sync()  # starts the background update
        assert m.ann is not None
        errors: list[BaseException] = []

        def direct() -> None:
            try:
                m.ann.update()
            except BaseException as exc:  # the failure this test is about
                errors.append(exc)

        threads = [threading.Thread(target=direct) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert m.ann.wait(120)
        assert errors == [] and m.ann.last_error is None
        assert m.ann.status()["entries"] == m.status().chunks
        assert m.search(QUERIES[0], min_score=0).results and m.ann.searches == 1


def test_the_centroid_read_from_disk_is_the_mean_of_the_unit_vectors(tmp_path: Path) -> None:
    """Past the in-memory budget the vector scores' centroid is read from the stored vectors, a batch
    at a time: the same mean as one vector at a time (the reference here)."""
    import numpy as np

    from mdrecall.search.corpus import IndexCorpus
    from mdrecall.store.db import IndexDB, StoreOptions

    ws = _workspace(tmp_path / "ws", notes=30)
    with open_manager(ws, _config(tmp_path / "i.sqlite", approximate="off")) as m:
        m.sync()
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        layout, refs = db.vector_refs()
        dtype = np.float16 if layout.encoding == "float16" and not layout.legacy else np.float32
        vectors = [np.frombuffer(b, dtype=dtype).astype(np.float64) for b in db.vector_blobs(layout, refs) if b]
        reference = np.mean([v / np.linalg.norm(v) for v in vectors], axis=0)
        centroid = IndexCorpus(db)._compute_centroid(None)
    finally:
        db.close()
    assert len(vectors) == 30 and centroid is not None and centroid.dtype == np.float32
    assert np.allclose(centroid, reference, atol=1e-7)
