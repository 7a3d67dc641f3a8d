"""The first index is built in place: what it finished survives an interruption, and searches during
it say it is still running (issue #16, item 7)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.errors import EmbeddingError
from mdrecall.testing import FakeProvider, plugin, registered
from mdrecall.types import SyncProgress


class GatedProvider(FakeProvider):
    """Embeds ``allow`` batches, then fails (``fail``) or waits for ``release`` (a slow model)."""

    def __init__(self, allow: int, *, fail: bool) -> None:
        super().__init__()
        self.allow = allow
        self.fail = fail
        self.release = threading.Event()
        self.waiting = threading.Event()

    @property
    def max_batch_items(self) -> int:
        return 1  # one document per call: the gate counts documents

    def embed_documents_batched(self, texts, progress=None, on_batch=None):  # type: ignore[no-untyped-def]
        out = []
        for i, text in enumerate(texts):
            if self.allow <= 0:
                if self.fail:
                    raise EmbeddingError("the model went away", retryable=False)
                self.waiting.set()
                self.release.wait(30)
            self.allow -= 1
            vector = self.embed_documents([text])[0]
            out.append(vector)
            if on_batch is not None:
                on_batch([i], [vector])
            if progress is not None:
                progress(i + 1, len(texts))
        return out


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(12):
        (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(f"# Day {i}\n\n- Fact number {i} about topic{i}.\n")
    return ws


def _config(tmp_path: Path, provider: str) -> dict[str, object]:
    return {"provider": provider, "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}


def test_an_interrupted_first_index_keeps_what_it_finished(workspace: Path, tmp_path: Path) -> None:
    flaky = GatedProvider(allow=5, fail=True)
    with registered(plugin(providers={"gated": lambda config: flaky})):
        with open_manager(workspace, _config(tmp_path, "gated")) as m:
            with pytest.raises(EmbeddingError):
                m.sync()
            # The live index holds its identity, every embedding made before the failure and every
            # file those completed, written as each was finished.
            status = m.status()
            assert status.details["meta"] is not None and status.details["cache"]["entries"] == 5
            assert status.files == 5 and status.details["cache"]["unused"] == 0
        # The same model back: the next sync carries on where the first stopped (no rebuild from
        # nothing), and what was embedded is not paid for twice.
        flaky.allow, flaky.fail = 100, False
        with open_manager(workspace, _config(tmp_path, "gated")) as m:
            report = m.sync()
            assert not report.full_rebuild and report.rebuild_reason is None
            assert report.files_unchanged == 5 and report.chunks_embedded == 12 - 5
            assert m.status().files == 12 and m.search("topic1", min_score=0).results


def test_a_search_during_the_first_index_says_it_is_still_running(workspace: Path, tmp_path: Path) -> None:
    slow = GatedProvider(allow=3, fail=False)
    with registered(plugin(providers={"slow": lambda config: slow})):
        with open_manager(workspace, {**_config(tmp_path, "slow"), "sync": {"watch": False, "searchWaitMs": 50}}) as m:
            builder = threading.Thread(target=m.sync)
            builder.start()
            assert slow.waiting.wait(30)
            response = m.search("topic1", min_score=0)
            slow.release.set()
            builder.join(30)
    assert response.stale
    assert any("first index in progress" in w for w in response.warnings), response.warnings
    assert not any("vector table missing" in w for w in response.warnings)


def test_an_empty_index_is_not_reported_as_degraded(tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    with registered(plugin(providers={"fake": lambda config: FakeProvider()})):
        with open_manager(ws, _config(tmp_path, "fake")) as m:
            response = m.search("anything")
    assert response.results == [] and not response.degraded
    assert not any("vector" in w for w in response.warnings), response.warnings


def test_the_first_index_is_built_in_place_in_the_current_schema(workspace: Path, tmp_path: Path) -> None:
    """No separate file is built and swapped in: the live file holds the identity from the start
    and fills up file by file; it has the current layout (8 KiB pages, float16 vectors, one copy)."""
    from mdrecall.store import rebuild_path
    from mdrecall.store.db import SCHEMA_VERSION, IndexDB, StoreOptions

    db_path = tmp_path / "index.sqlite"
    seen: list[tuple[bool, bool]] = []

    def watch(p: SyncProgress) -> None:
        seen.append((db_path.exists(), rebuild_path(db_path).exists()))

    with registered(plugin(providers={"fake": lambda config: FakeProvider(dims=64)})):
        with open_manager(workspace, _config(tmp_path, "fake")) as m:
            report = m.sync(progress=watch)
    assert report.full_rebuild and report.chunks_embedded == 12
    assert seen and all(live and not temp for live, temp in seen)
    db = IndexDB(db_path, StoreOptions())
    try:
        assert db.read_meta()["schemaVersion"] == SCHEMA_VERSION  # type: ignore[index]
        assert db.conn.execute("PRAGMA page_size").fetchone()[0] == 8192
        assert not db.legacy_layout() and db.vector_encoding() == "float16"
        lengths = {r[0] for r in db.conn.execute("SELECT length(embedding) FROM embedding_cache")}
        assert lengths == {64 * 2} and db.cache_size() == 12
        assert db.conn.execute("SELECT COUNT(*) FROM chunks WHERE vector_id IS NULL").fetchone()[0] == 0
    finally:
        db.close()


def _keyword_config(tmp_path: Path) -> dict[str, object]:
    return {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}


@pytest.mark.parametrize(("files", "seconds", "expected"), [(5, 60.0, [5, 5, 2]), (5, 0.0, [1] * 12), (1, 60.0, [1] * 12)])
def test_files_are_written_a_batch_a_commit(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            files: int, seconds: float, expected: list[int]) -> None:
    """A commit per file wrote the pages every file changes again each time: files commit a batch at a time,
    of at most the store's ``write_batch_files`` written within ``WRITE_BATCH_S`` (index/indexer.py)."""
    from mdrecall.index import indexer
    from mdrecall.store.db import IndexDB

    monkeypatch.setattr(IndexDB, "write_batch_files", files)
    monkeypatch.setattr(indexer, "WRITE_BATCH_S", seconds)
    commits: list[int] = [0]
    batch_of: list[int] = []  # the number of commits made before each file's write
    hooked: set[int] = set()
    replace_file = IndexDB.replace_file

    def counting(self: IndexDB, *args, **kwargs):  # type: ignore[no-untyped-def]
        if id(self.conn) not in hooked:
            hooked.add(id(self.conn))
            self.conn.set_commit_hook(lambda: commits.__setitem__(0, commits[0] + 1) or False)
        batch_of.append(commits[0])
        return replace_file(self, *args, **kwargs)

    monkeypatch.setattr(IndexDB, "replace_file", counting)
    with open_manager(workspace, _keyword_config(tmp_path)) as m:
        report = m.sync()
        assert report.files_indexed == 12 and m.status().files == 12
    sizes = [batch_of.count(n) for n in dict.fromkeys(batch_of)]
    assert sizes == expected, batch_of


def test_a_stop_between_files_commits_the_files_before_it(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mdrecall.errors import SyncInterrupted
    from mdrecall.store.db import IndexDB

    monkeypatch.setattr(IndexDB, "write_batch_files", 8)
    with open_manager(workspace, _keyword_config(tmp_path)) as m:

        def stop_after_three(p: SyncProgress) -> None:
            if p.label.startswith("Indexing memory files") and p.completed == 3:
                m._syncer.cancel.set()  # what close() does first: the sync stops at the next file

        with pytest.raises(SyncInterrupted):
            m.sync(progress=stop_after_three)
    with open_manager(workspace, _keyword_config(tmp_path)) as m:
        assert m.status().files == 3  # the three finished, in a batch of 8 that was cut short
        report = m.sync()
        assert report.files_indexed == 9 and m.status().files == 12
