"""A model switch: rows are re-embedded into the new model's table, the old table dropped; no mixing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mdrecall import open_manager
from mdrecall.embeddings.base import ProviderBase
from mdrecall.testing import plugin, registered


class ProjectedModel(ProviderBase):
    """Another embedding model: all-MiniLM-L6-v2 vectors through a fixed random 384 -> 256 projection.

    Its space differs from MiniLM's (other dimensions, other directions), which is what a model
    switch must cope with; the projection keeps it a usable model, so search still works after.
    """

    id = "projected"
    model = "minilm-projected-256"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.matrix = np.linalg.qr(np.random.default_rng(7).normal(size=(384, 384)))[0][:, :256].astype(np.float32)
        self.documents = 0

    dims = 256
    identity = {"provider": "projected", "model": "minilm-projected-256"}
    max_input_tokens = 256
    max_batch_items = 64

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def _project(self, vectors: list[list[float]]) -> list[list[float]]:
        return (np.asarray(vectors, dtype=np.float32) @ self.matrix).tolist()

    def embed_documents(self, texts: Any) -> list[list[float]]:
        self.documents += len(texts)
        return self._project(self.inner.embed_documents(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        return self._project([self.inner.embed_query(text)])[0]


MEMORIES = [
    "I prefer dark mode in every editor and terminal.",
    "We decided to use PostgreSQL 16 for the billing service.",
    "My daughter Mia is allergic to peanuts.",
    "Our team decided to release every second Thursday.",
]


@pytest.mark.timeout(180)
def test_model_switch_migrates_without_mixing(local_model: Any, ltm_ws: Any, target: Any) -> None:
    projected = ProjectedModel(local_model)
    with registered(plugin(providers={"projected": lambda config: projected})):
        _switch_and_back(projected, ltm_ws, target)


def _switch_and_back(projected: ProjectedModel, ltm_ws: Any, target: Any) -> None:
    with open_manager(ltm_ws, target.config()) as old:
        ids = {old.store_memory(text)["id"]: text for text in MEMORIES}
        old_table = old.store.name
        before = {r.id: r for r in old.list_entries()}
    assert len(ids) == 4

    switched = {**target.config(), "provider": "projected"}
    with open_manager(ltm_ws, switched) as new:
        assert new.count() == 4  # opening migrated them
        migration = new.status().details["migration"]
        assert migration["from"] == [old_table] and migration["rows"] == 4
        assert new.store.name != old_table and new.store.table_names() == [new.store.name]
        assert new.status().dims == 256 and projected.documents == 4
        # Every stored vector is the new model's embedding of its text: no old vector survived.
        data = new.store.table.to_arrow().to_pylist()
        for row in data:
            expected = np.asarray(projected.embed_documents([row["text"]])[0])
            expected /= np.linalg.norm(expected)
            assert np.allclose(row["vector"], expected, atol=1e-5)
            assert row["id"] in ids and row["createdAt"] == before[row["id"]].created_at
        hit = new.search("Which database does billing use?").results[0]
        assert "PostgreSQL" in hit.snippet and hit.path in {f"ltm:{i}" for i in ids}
        assert new.store_memory("We decided to use PostgreSQL 16 for the billing service!")["action"] == "duplicate"
    # Nothing of the old table is left behind.
    assert not any(old_table in path for path in target.files())

    # Switching back migrates again (rows written with either model are never lost).
    with open_manager(ltm_ws, target.config()) as back:
        assert {r.text for r in back.list_entries()} == set(MEMORIES)
        assert back.status().dims == 384


def test_without_a_provider_search_falls_back_to_keywords(local_model: Any, ltm_ws: Any, target: Any) -> None:
    with open_manager(ltm_ws, target.config()) as m:
        for text in MEMORIES:
            m.store_memory(text)
        m.sync(force=True)
    with open_manager(ltm_ws, {**target.config(), "provider": "none"}) as m:
        response = m.search("PostgreSQL billing")
        assert response.mode == "keyword-only" and response.degraded
        assert "PostgreSQL" in response.results[0].snippet
        assert m.recall_memories("Which database does billing use?") == []
        from mdrecall.errors import ProviderUnavailableError

        with pytest.raises(ProviderUnavailableError):
            m.store_memory("I prefer tea.")
        assert m.status().search_mode == "keyword-only"
