"""What is particular to the LanceDB backend, against a local folder and an S3-compatible server.

The contract every backend keeps (plant a fact, find it with a citation that reads back, status,
sync, probes, listeners, the agent tools, close) is checked by the shared suite,
tests/contract/test_backend_contract.py, which runs against LanceDB on a folder and on S3 too.
"""

from __future__ import annotations

from typing import Any

import pytest

from mdrecall.errors import MdrecallError, PathError


def test_read_file_refuses_what_is_not_an_entry(open_ltm: Any) -> None:
    m = open_ltm()
    stored = m.store_memory("The staging database runs on db-stage-2, port 5433.")
    assert m.read_file(f"ltm:{stored['id']}#L1").text == "The staging database runs on db-stage-2, port 5433."
    for path, code in [
        ("MEMORY.md", "not_memory_path"),
        ("../etc/passwd.md", "not_memory_path"),
        ("ltm:../../etc/passwd", "invalid_path"),
        ("ltm:not-a-uuid", "invalid_path"),
        ("ltm:00000000-0000-4000-8000-000000000000", "not_found"),
    ]:
        with pytest.raises(PathError) as exc:
            m.read_file(path)
        assert exc.value.code == code, path


def test_status_details(open_ltm: Any, target: Any) -> None:
    m = open_ltm()
    m.store_memory("We decided to use Terraform for infrastructure.")
    status = m.status()
    assert (status.files, status.chunks, status.provider, status.dims, status.search_mode) == (1, 1, "local", 384, "vector-only")
    assert status.location == target.db_path and status.to_dict()["dbPath"] == target.db_path
    assert status.details["table"]["rows"] == 1 and status.details["agentId"] == "main"
    assert status.details["recallTracking"]  # dreaming's section: the manager was opened like any other


def test_a_closed_manager_refuses_work(open_ltm: Any) -> None:
    m = open_ltm()
    m.store_memory("I always want commit messages in the imperative mood.")
    assert m.probe_embedding_availability().ok and m.probe_embedding_availability().dims == 384
    assert m.probe_vector_availability()
    m.close()
    with pytest.raises(MdrecallError):
        m.search("commit messages")


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
