"""Every remote provider indexing and searching the example workspace through ``open_manager``.

The workspace is a copy of ``examples/workspace`` (searches record recalls under ``memory/.dreams``, which
must not touch the checked-in example). Each provider talks to its local wire-format server.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from provider_servers import (
    FakeClock,
    Fault,
    GeminiServer,
    MistralServer,
    OllamaServer,
    OpenAIServer,
    ProviderServer,
    VoyageServer,
    openai_error,
)

from mdrecall import open_manager

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "workspace"
    if EXAMPLE.is_dir():
        shutil.copytree(EXAMPLE, target)
    else:  # the example is another engineer's; keep this test meaningful without it
        (target / "memory" / "projects").mkdir(parents=True)
        (target / "MEMORY.md").write_text("# Memory\n\n- Pebble is the recipe app for the food co-op.\n", encoding="utf-8")
        (target / "memory" / "projects" / "pebble.md").write_text(
            "# Pebble\n\n## Architecture notes\n- Recipe search: `tsvector` column `search_doc`, GIN index, "
            "plus `pg_trgm` for fuzzy titles.\n", encoding="utf-8")
    return target


def _server_and_config(provider_id: str) -> tuple[ProviderServer, dict[str, Any]]:
    if provider_id == "openai":
        s: Any = OpenAIServer()
        return s, {"provider": "openai", "remote": {"baseUrl": s.base_url, "apiKey": s.api_key}}
    if provider_id == "openai-compatible":
        s = OpenAIServer(api_key=None, prefix="/compat/v1", models={"bge-small": 384})
        return s, {"provider": "openai-compatible", "model": "bge-small",
                   "providers": {"openai-compatible": {"baseUrl": s.base_url}}}
    if provider_id == "ollama":
        s = OllamaServer()
        return s, {"provider": "ollama", "providers": {"ollama": {"baseUrl": s.base_url}}}
    cls = {"gemini": GeminiServer, "voyage": VoyageServer, "mistral": MistralServer}[provider_id]
    s = cls()
    return s, {"provider": provider_id, "providers": {provider_id: {"baseUrl": s.base_url, "apiKey": s.api_key}}}


PROVIDERS = ["openai", "gemini", "voyage", "mistral", "ollama", "openai-compatible"]


@pytest.mark.parametrize("provider_id", PROVIDERS)
def test_provider_indexes_and_searches_example_workspace(
    provider_id: str, workspace: Path, tmp_path: Path, clock: FakeClock
) -> None:
    server, config = _server_and_config(provider_id)
    config["store"] = {"path": str(tmp_path / "index.sqlite")}
    with server, open_manager(workspace, config=config) as m:
        report = m.sync()
        assert report.chunks_embedded > 0
        # A model of unknown size (bge-small here) costs one probe request before the first sync.
        probes = 1 if provider_id == "openai-compatible" else 0
        assert server.texts_embedded() == report.chunks_embedded + probes
        resp = m.search("Which worker leaks temp files when an upload is cancelled?")
        assert resp.provider == provider_id and resp.mode == "hybrid", resp.warnings
        assert resp.results, "no results"
        top = resp.results[0]
        assert top.path == "memory/projects/pebble.md" and "Thumbnail worker leaks" in top.snippet
        assert top.vector_score is not None and top.vector_score > 0
        status = m.status()
        assert status.provider == provider_id and status.dims
        assert status.details["vector"]["dims"] == status.dims
        assert status.details["cache"]["entries"] == report.chunks_embedded
        probe = m.probe_embedding_availability()
        assert probe.ok and probe.provider == provider_id and probe.dims == status.dims

        # An unchanged workspace costs no embedding requests: not on sync, not on a forced re-index.
        before = len(server.embed_requests())
        assert m.sync().chunks_embedded == 0
        forced = m.sync(force=True)
        assert forced.chunks_embedded == 0 and forced.full_rebuild
        assert len(server.embed_requests()) == before
        assert server.violations == []


def test_switching_model_and_back_uses_the_cache(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    store = {"path": str(tmp_path / "index.sqlite")}
    with OpenAIServer() as server:
        def open_with(model: str):  # type: ignore[no-untyped-def]
            return open_manager(workspace, config={"provider": "openai", "model": model, "store": store,
                                                   "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}})

        with open_with("text-embedding-3-small") as m:
            first = m.sync()
            small_texts = server.texts_embedded()
            assert first.chunks_embedded == small_texts > 0
        with open_with("text-embedding-3-large") as m:
            switched = m.sync()
            assert switched.full_rebuild and "model changed" in (switched.rebuild_reason or "")
            assert switched.chunks_embedded == small_texts  # a new model embeds everything once
            assert m.status().dims == 3072 and m.search("Pebble recipe search").results
        requests_before_back = len(server.embed_requests())
        with open_with("text-embedding-3-small") as m:
            back = m.sync()
            assert back.full_rebuild and back.chunks_embedded == 0 and back.cache_hits > 0
            assert len(server.embed_requests()) == requests_before_back
            assert m.status().dims == 1536


def test_sync_survives_two_429s_with_retry_after(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with MistralServer() as server:
        server.queue(
            Fault(429, {"object": "error", "message": "Requests rate limit exceeded", "type": "rate_limited"}, {"retry-after": "2"}),
            Fault(429, {"object": "error", "message": "Requests rate limit exceeded", "type": "rate_limited"}, {"retry-after": "2"}),
        )
        config = {"provider": "mistral", "store": {"path": str(tmp_path / "i.sqlite")},
                  "providers": {"mistral": {"baseUrl": server.base_url, "apiKey": server.api_key}}}
        progress: list[Any] = []
        with open_manager(workspace, config=config) as m:
            report = m.sync(progress=progress.append)
            assert report.chunks_embedded > 0 and m.status().last_error is None
            assert clock.sleeps == [2.0, 2.0]
            assert "Requests rate limit exceeded" in (m.status().details["providerError"] or "")  # retried, visible
            assert any("Embedding" in p.label for p in progress)
            assert m.search("Pebble recipe search").results


def test_quota_exhausted_fails_the_sync_visibly_and_keeps_the_index(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with OpenAIServer() as server:
        config = {"provider": "openai", "store": {"path": str(tmp_path / "i.sqlite")},
                  "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}}
        with open_manager(workspace, config=config) as m:
            m.sync()
            chunks = m.status().chunks
            (workspace / "memory" / "new-note.md").write_text("# New\n\nA brand new fact about zeppelins.\n", encoding="utf-8")
            quota = openai_error("You exceeded your current quota, please check your plan and billing details.",
                                 "insufficient_quota", "insufficient_quota")
            server.queue(Fault(429, quota))
            with pytest.raises(Exception, match="quota"):
                m.sync()
            status = m.status()
            assert "quota" in (status.last_error or "")
            assert status.chunks == chunks  # nothing half-written
            assert len(clock.sleeps) == 0 and len(server.faults) == 0  # one request, not retried
            report = m.sync()  # quota back: the file is picked up on the next sync
            assert report.files_indexed == 1 and m.status().chunks > chunks


def test_failing_primary_switches_to_fallback_once_and_visibly(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with OpenAIServer() as primary, GeminiServer() as fallback:
        config = {
            "provider": "openai", "fallback": "gemini", "store": {"path": str(tmp_path / "i.sqlite")},
            "remote": {"baseUrl": primary.base_url, "apiKey": primary.api_key, "maxRetries": 2},
            "providers": {"gemini": {"baseUrl": fallback.base_url, "apiKey": fallback.api_key}},
        }
        primary.queue(*[Fault(500, openai_error("The server had an error while processing your request.", "server_error"))] * 3)
        with open_manager(workspace, config=config) as m:
            report = m.sync()
            assert report.full_rebuild and report.chunks_embedded > 0
            status = m.status()
            assert status.provider == "gemini" and status.model == "gemini-embedding-001"
            assert status.details["requestedProvider"] == "openai"
            assert status.details["fallback"]["from"] == "openai" and "HTTP 500" in status.details["fallback"]["reason"]
            assert status.details["meta"]["provider"] == "gemini"  # no openai vectors were mixed in
            assert len(primary.embed_requests()) == 3 and len(clock.sleeps) == 2
            resp = m.search("Which worker leaks temp files when an upload is cancelled?")
            assert resp.provider == "gemini" and resp.results[0].path == "memory/projects/pebble.md"
            assert fallback.violations == []


def test_without_fallback_a_failing_provider_fails_closed(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with VoyageServer() as server:
        config = {"provider": "voyage", "store": {"path": str(tmp_path / "i.sqlite")},
                  "providers": {"voyage": {"baseUrl": server.base_url, "apiKey": "revoked-key"}}}
        with open_manager(workspace, config=config) as m:
            with pytest.raises(Exception, match="Provided API key is invalid"):
                m.sync()
            status = m.status()
            assert status.provider == "voyage" and status.details["fallback"] is None
            assert "401" in (status.last_error or "")
            probe = m.probe_embedding_availability()
            assert not probe.ok and "Provided API key is invalid" in (probe.error or "")
            assert len(server.requests) == 2 and clock.sleeps == []  # one sync request, one probe; no retries


@pytest.mark.slow
def test_ten_thousand_chunk_reindex_makes_no_embedding_requests(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "big"
    (root / "memory").mkdir(parents=True)
    # 250 files x 20 entries, chunked small: about two chunks per entry.
    for f in range(250):
        paragraphs = [f"## Entry {p}\nFile {f} paragraph {p}: note about topic{(f * 20 + p) % 997} and item{p}." for p in range(20)]
        (root / "memory" / f"note-{f:03d}.md").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    with OllamaServer(models={"tiny-embed": 32}) as server:
        config = {"provider": "ollama", "store": {"path": str(tmp_path / "i.sqlite")}, "chunking": {"tokens": 16, "overlap": 0},
                  "cache": {"maxEntries": 20000},
                  "providers": {"ollama": {"baseUrl": server.base_url, "model": "tiny-embed", "maxItemsPerRequest": 512}}}
        with open_manager(root, config=config) as m:
            first = m.sync()
            assert first.chunks_written >= 10_000
            sizes = [len(r.json()["input"]) for r in server.embed_requests()]
            assert max(sizes) <= 512
            before = len(server.requests)
            again = m.sync()
            assert again.chunks_embedded == 0 and again.files_unchanged == 250
            forced = m.sync(force=True)
            assert forced.full_rebuild and forced.chunks_written == first.chunks_written
            assert forced.chunks_embedded == 0 and forced.cache_hits == first.chunks_written
            assert len(server.requests) == before


def _chunks_per_file(db: Path) -> dict[str, int]:
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {str(path): int(n) for path, n in conn.execute("SELECT path, count(*) FROM chunks GROUP BY path")}
    finally:
        conn.close()


def test_sync_interrupted_mid_batch_resumes_without_loss_or_duplicates(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with MistralServer() as server, MistralServer() as reference_server:
        def config(srv: MistralServer, db: str) -> dict[str, Any]:
            return {"provider": "mistral", "store": {"path": str(tmp_path / db)},
                    "providers": {"mistral": {"baseUrl": srv.base_url, "apiKey": srv.api_key, "maxItemsPerRequest": 4,
                                              "concurrency": 1}}}

        with open_manager(workspace, config=config(reference_server, "ref.sqlite")) as ref:
            ref.sync()
            expected = ref.status()
            expected_hits = [(r.path, r.start_line) for r in ref.search("Which worker leaks temp files?").results]

        # The third request fails for good (not retryable) in the middle of the first sync.
        server.queue(Fault(0), Fault(0), Fault(400, {"object": "error", "message": "Input rejected", "type": "invalid_request_error"}))
        with open_manager(workspace, config=config(server, "i.sqlite")) as m:
            with pytest.raises(Exception, match="Input rejected"):
                m.sync()
            # The files finished before the failure are kept, each whole: nothing half-written.
            kept, whole = _chunks_per_file(tmp_path / "i.sqlite"), _chunks_per_file(tmp_path / "ref.sqlite")
            assert kept and len(kept) < expected.files
            assert all(whole[path] == count for path, count in kept.items())
            resumed = m.sync()
            status = m.status()
            assert status.chunks == expected.chunks and status.files == expected.files
            assert status.details["cache"]["entries"] == expected.details["cache"]["entries"]
            assert resumed.files_unchanged == len(kept)  # carried on from the files kept
            assert resumed.chunks_written == expected.chunks - sum(kept.values())
            assert [(r.path, r.start_line) for r in m.search("Which worker leaks temp files?").results] == expected_hits


def test_auto_selects_a_keyed_provider_and_status_says_why(
    workspace: Path, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with GeminiServer() as server:
        monkeypatch.setenv("GEMINI_API_KEY", server.api_key)
        config = {"provider": "auto", "local": {"model": "/nonexistent/local-model"}, "store": {"path": str(tmp_path / "i.sqlite")},
                  "providers": {"gemini": {"baseUrl": server.base_url}}}
        with open_manager(workspace, config=config) as m:
            m.sync()
            status = m.status()
            assert status.provider == "gemini" and status.details["requestedProvider"] == "auto"
            skipped = {s["provider"]: s["reason"] for s in status.details["providerSelection"]["skipped"]}
            assert list(skipped) == ["local", "ollama", "openai-compatible", "openai"]
            assert m.search("Which worker leaks temp files when an upload is cancelled?").results[0].path == "memory/projects/pebble.md"


def test_openai_batch_api_through_the_manager(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=2) as server:
        config = {"provider": "openai", "store": {"path": str(tmp_path / "i.sqlite")},
                  "remote": {"baseUrl": server.base_url, "apiKey": server.api_key,
                             "batch": {"enabled": True, "minItems": 5, "pollIntervalMs": 1000}}}
        with open_manager(workspace, config=config) as m:
            report = m.sync()
            assert report.chunks_embedded > 5
            assert server.embed_requests() == []  # documents went through /files + /batches
            assert [r.path for r in server.requests].count("/v1/batches") == 1
            assert clock.sleeps == [1.0, 1.0]
            batch = m.status().details["batch"]
            assert batch["enabled"] and batch["failures"] == 0 and batch["lastBatchId"] == "batch-0002"
            assert m.search("Which worker leaks temp files when an upload is cancelled?").results[0].path == "memory/projects/pebble.md"


def test_rate_limited_query_degrades_search_to_keywords_quickly(workspace: Path, tmp_path: Path, clock: FakeClock) -> None:
    with VoyageServer() as server:
        config = {"provider": "voyage", "store": {"path": str(tmp_path / "i.sqlite")},
                  "providers": {"voyage": {"baseUrl": server.base_url, "apiKey": server.api_key}}}
        with open_manager(workspace, config=config) as m:
            m.sync()
            server.queue(Fault(429, {"detail": "You have exceeded the rate limit"}, {"retry-after": "45"}))
            resp = m.search("Which worker leaks temp files when an upload is cancelled?")
            assert resp.results and resp.results[0].path == "memory/projects/pebble.md"
            assert any("query embedding failed" in w and "rate limit" in w for w in resp.warnings), resp.warnings
            assert clock.sleeps == []  # no 45 s wait inside a search
