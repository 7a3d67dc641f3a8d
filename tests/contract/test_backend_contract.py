"""What every backend promises (``MemorySearchManager``), checked the same way against each one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from backends_under_test import BackendUnderTest

from mdrecall import MemorySearchManager, PathError, ProbeResult, ReadResult, SearchResponse, Status, SyncReport
from mdrecall.agent.tools import MemoryTools
from mdrecall.types import format_citation

FACT = "The billing service stores invoices in a bucket named quokka-ledger."


def test_it_is_a_memory_search_manager(backend: BackendUnderTest) -> None:
    assert isinstance(backend.manager, MemorySearchManager)
    assert backend.manager.backend == backend.name


def test_a_planted_fact_is_found_with_a_citation_that_reads_back(backend: BackendUnderTest) -> None:
    rel = backend.plant(FACT)
    response = backend.manager.search("which bucket holds the invoices?")
    assert isinstance(response, SearchResponse)
    hits = [h for h in response.results if h.path == rel]
    assert hits, [h.path for h in response.results]
    hit = hits[0]
    assert "quokka-ledger" in hit.snippet
    assert 0.0 <= hit.score <= 1.0
    assert 1 <= hit.start_line <= hit.end_line
    assert hit.citation == format_citation(hit.path, hit.start_line, hit.end_line)
    read = backend.manager.read_file(hit.path, from_line=hit.start_line, lines=hit.end_line - hit.start_line + 1)
    assert isinstance(read, ReadResult)
    assert "quokka-ledger" in read.text and read.path == rel and read.from_line == hit.start_line


def test_results_are_ordered_bounded_and_json_shaped(backend: BackendUnderTest) -> None:
    for i in range(4):
        backend.plant(f"Invoice batch {i} for the quokka-ledger bucket was archived.")
    response = backend.manager.search("quokka-ledger invoices", max_results=2)
    assert 1 <= len(response.results) <= 2
    scores = [h.score for h in response.results]
    assert scores == sorted(scores, reverse=True)
    data = json.loads(json.dumps(response.to_dict(camel=True)))
    assert set(data["results"][0]) >= {"path", "startLine", "endLine", "score", "snippet", "source", "citation"}
    assert data["mode"] in ("hybrid", "vector-only", "keyword-only", "file-scan")


def test_an_empty_query_answers_with_nothing(backend: BackendUnderTest) -> None:
    backend.plant(FACT)
    assert backend.manager.search("   ").results == []


def test_reads_outside_the_memory_files_are_refused(backend: BackendUnderTest) -> None:
    (backend.workspace / "secret.md").write_text("not memory\n", encoding="utf-8")
    for bad in ("../etc/passwd.md", "secret.md", backend.missing):
        with pytest.raises(PathError) as info:
            backend.manager.read_file(bad)
        assert info.value.code in ("outside_workspace", "not_memory_path", "not_found", "invalid_path")


def test_status_sync_and_probes_have_their_types(backend: BackendUnderTest) -> None:
    backend.plant(FACT)
    report = backend.manager.sync()
    assert isinstance(report, SyncReport)
    again = backend.manager.sync()
    assert isinstance(again, SyncReport) and again.files_indexed == 0  # nothing changed: nothing re-indexed
    status = backend.manager.status()
    assert isinstance(status, Status)
    assert status.backend == backend.name and status.files >= 1
    assert status.search_mode in ("hybrid", "vector-only", "keyword-only", "file-scan")
    json.dumps(status.to_dict(), default=str)
    assert isinstance(backend.manager.probe_embedding_availability(), ProbeResult)
    assert isinstance(backend.manager.probe_vector_availability(), bool)


def test_search_and_read_listeners_fire(backend: BackendUnderTest) -> None:
    rel = backend.plant(FACT)
    searches: list[str] = []
    reads: list[str] = []
    backend.manager.add_search_listener(lambda query, response, key, now: searches.append(query))
    backend.manager.add_read_listener(lambda path, start, lines, now: reads.append(path))
    backend.manager.search("quokka-ledger", now=datetime(2026, 6, 1, tzinfo=UTC))
    backend.manager.read_file(rel)
    backend.manager.flush()
    assert searches == ["quokka-ledger"] and reads == [rel]


def test_the_agent_tools_work_over_it(backend: BackendUnderTest) -> None:
    backend.plant(FACT)
    tools = MemoryTools(backend.manager)
    found = tools.call("memory_search", {"query": "quokka-ledger bucket"})
    assert "error" not in found and found["results"]
    got = tools.call("memory_get", {"path": found["results"][0]["path"]})
    assert "quokka-ledger" in got["text"]
    assert tools.call("memory_status", {})["backend"] == backend.name


def test_close_is_idempotent(backend: BackendUnderTest) -> None:
    backend.manager.close()
    backend.manager.close()


def test_as_of_search_leaves_out_what_came_later_or_says_it_cannot(backend: BackendUnderTest) -> None:
    from datetime import timedelta

    from mdrecall.contract import AS_OF_UNSUPPORTED, search_as_of

    rel = backend.plant(FACT)
    before = search_as_of(backend.manager, "which bucket holds the invoices?", as_of=datetime(2020, 1, 1, tzinfo=UTC))
    unsupported = AS_OF_UNSUPPORTED.format(backend=backend.name) in before.warnings
    if not unsupported:  # a backend that answers as-of searches: the fact was planted after 2020
        assert all(h.path != rel for h in before.results), [h.path for h in before.results]
    later = search_as_of(backend.manager, "which bucket holds the invoices?", as_of=datetime.now(UTC) + timedelta(days=1))
    assert any(h.path == rel for h in later.results), [h.path for h in later.results]
    assert (AS_OF_UNSUPPORTED.format(backend=backend.name) in later.warnings) is unsupported
    # Which backends answer it (a backend that learns to should move from one list to the other).
    assert unsupported is (backend.name in ("fake", "notes", "qmd"))
