"""The MemorySearchManager contract, against a local folder and an S3-compatible server.

The common behaviour the shared contract suite will check (plant a fact, search finds it with a
citation, read_file of the citation, status fields, sync idempotent, close) is in TestContract;
what is particular to this backend follows it.
"""

from __future__ import annotations

from typing import Any

import pytest

from mdrecall.errors import MdrecallError, PathError


class TestContract:
    def test_planted_fact_found_with_citation_and_read_back(self, open_ltm: Any) -> None:
        m = open_ltm()
        m.store_memory("The staging database runs on db-stage-2, port 5433.")
        m.store_memory("I prefer dark mode in every editor.")
        response = m.search("Which host runs the staging database?")
        assert response.results, response
        hit = response.results[0]
        assert "db-stage-2" in hit.snippet
        assert hit.citation.startswith("ltm:") and hit.path == hit.citation and hit.source == "memory"
        assert 0 < hit.score <= 1 and hit.start_line == 1
        got = m.read_file(hit.citation)
        assert got["text"] == "The staging database runs on db-stage-2, port 5433."
        assert got["path"] == hit.citation and got["from"] == 1 and got["lines"] == 1

    def test_status_fields(self, open_ltm: Any, target: Any) -> None:
        m = open_ltm()
        m.store_memory("We decided to use Terraform for infrastructure.")
        status = m.status()
        for key in ("backend", "workspaceDir", "files", "chunks", "provider", "model", "searchMode", "modeReasons",
                    "clean", "warnings", "lastSyncAt", "lastError", "details"):
            assert key in status, key
        assert status["backend"] == "lancedb" and status["chunks"] == 1
        assert status["provider"] == "local" and status["dims"] == 384 and status["searchMode"] == "vector-only"
        assert status["dbPath"] == target.db_path
        assert status["details"]["table"]["rows"] == 1

    def test_sync_is_idempotent_and_close_is_final(self, open_ltm: Any) -> None:
        m = open_ltm()
        m.store_memory("I always want commit messages in the imperative mood.")
        first, second = m.sync(), m.sync()
        assert first.files_indexed == second.files_indexed == 0
        assert m.status()["chunks"] == 1
        assert m.probe_embedding_availability().ok and m.probe_embedding_availability().dims == 384
        assert m.probe_vector_availability()
        m.close()
        with pytest.raises(MdrecallError):
            m.search("commit messages")


def test_read_file_refuses_other_paths(open_ltm: Any) -> None:
    m = open_ltm()
    with pytest.raises(PathError) as exc:
        m.read_file("MEMORY.md")
    assert exc.value.code == "not_memory_path"
    with pytest.raises(PathError) as exc:
        m.read_file("ltm:00000000-0000-4000-8000-000000000000")
    assert exc.value.code == "not_found"


def test_search_is_scoped_to_the_agent(open_ltm: Any, ltm_ws: Any) -> None:
    alice = open_ltm(agentId="alice")
    alice.store_memory("I prefer window seats on long flights.")
    bob = open_ltm(agentId="bob")
    assert bob.search("window seat preference", min_score=0).results == []
    assert alice.search("window seat preference").results


def test_scores_are_cosine_and_cutoff_applies(open_ltm: Any, local_model: Any) -> None:
    import numpy as np

    m = open_ltm()
    text = "My daughter Mia is allergic to peanuts."
    m.store_memory(text)
    query = "Suggest a snack without peanuts for Mia."
    hit = m.search(query, min_score=0).results[0]
    a = np.asarray(local_model.embed_documents([text])[0])
    b = np.asarray(local_model.embed_query(query))
    expected = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert hit.score == pytest.approx(expected, abs=1e-4)
    assert m.search(query, min_score=min(0.99, expected + 0.01)).results == []
