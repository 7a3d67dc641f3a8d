"""The Long-term page: shown only for a backend keeping entries (LanceDB), listing, searching and
forgetting through the manager.

The LanceDB backend is not on this branch: a backend plugin offering the same manager methods
(``list_entries``, ``count``, ``forget``, and ``backend = "lancedb"``) stands in for it, registered
the way any backend plugin is (mdrecall.testing)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from uihelpers import serving, write_workspace

from mdrecall import open_manager
from mdrecall.testing import FakeBackend, plugin, registered
from mdrecall.types import SearchHit, SearchResponse


class EntriesBackend(FakeBackend):
    """Memories as entries (id, text, category), the shape of the LanceDB backend's store."""

    backend = "lancedb"

    def __init__(self, workspace: Path, config: Any) -> None:
        super().__init__(workspace, config)
        self.entries = {f"m{i:03d}": {"id": f"m{i:03d}", "text": f"fact number {i}", "category": "fact",
                                      "createdAt": "2026-11-30T10:00:00Z", "importance": 0.5} for i in range(60)}
        self.entries["m999"] = {"id": "m999", "text": "<script>window.__xss=1</script> likes tea", "category": "preference"}

    def list_entries(self, *, category: str | None = None, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
        rows = sorted(self.entries.values(), key=lambda e: e["id"])
        return rows[offset : offset + (limit or len(rows))]

    def count(self) -> int:
        return len(self.entries)

    def forget(self, memory_id: str | None = None, query: str | None = None) -> dict[str, Any]:
        removed = self.entries.pop(memory_id or "", None)
        return {"forgotten": [removed["id"]] if removed else []}

    def search(self, query: str, max_results: int | None = None, min_score: float | None = None,
               session_key: str | None = None, sources: Any = None, now: datetime | None = None) -> SearchResponse:
        words = set(query.lower().split())
        hits = [SearchHit(f"ltm:{e['id']}", 1, 1, 0.9, e["text"], "memory", f"ltm:{e['id']}")
                for e in self.entries.values() if words & set(e["text"].lower().split())]
        return SearchResponse(hits[: max_results or 10], "hybrid", "test", "test")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[tuple[str, EntriesBackend]]:
    ws = write_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n"})
    with registered(plugin(backends={"ui-entries": EntriesBackend})), \
            open_manager(ws, {"backend": "ui-entries", "provider": "none"}) as manager, serving(manager) as base:
        assert isinstance(manager, EntriesBackend)
        yield base, manager


def test_list_search_and_forget(url: tuple[str, EntriesBackend]) -> None:
    base, manager = url
    with httpx.Client(base_url=base) as client:
        page = client.get("/longterm")
        assert page.status_code == 200 and '<a href="/longterm"' in page.text  # in the navigation
        assert page.text.count("<tr><td><code>") == 25 and "1–25 of 61" in page.text
        assert "importance: 0.5" in page.text  # fields beyond the known ones, listed generically
        last = client.get("/longterm?page=3").text
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt; likes tea" in last and "<script>window" not in last
        found = client.get("/longterm?q=tea").text
        assert "ltm:m999" in found and "fact number" not in found
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert csrf
        assert client.post("/longterm/forget", data={"id": "m007"}).status_code == 403  # no CSRF token
        assert "m007" in manager.entries
        done = client.post("/longterm/forget", data={"id": "m007", "csrf": csrf.group(1)}, follow_redirects=True)
        assert done.status_code == 200 and "Forgotten" in done.text and "m007" not in manager.entries


def test_hidden_for_file_backends(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n"})
    with open_manager(ws, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}}) as manager, \
            serving(manager) as base:
        search = httpx.get(base + "/search").text
        assert "/longterm" not in search
        assert httpx.get(base + "/longterm").status_code == 404


def test_the_page_over_the_real_lancedb_backend(tmp_path: Path, local_provider: Any) -> None:
    pytest.importorskip("lancedb")
    from ltmhelpers import Target, one_blas_thread

    ws = write_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n"})
    config = Target.local(tmp_path).config()
    with one_blas_thread(), registered(plugin(providers={"local": lambda cfg: local_provider})), \
            open_manager(ws, {**config, "provider": "local"}) as manager, serving(manager) as base:
        assert manager.backend == "lancedb"
        stored = [manager.store_memory(text)["id"] for text in (  # type: ignore[attr-defined]
            "I prefer oolong tea in the afternoon.", "We decided to deploy on Tuesdays.")]
        with httpx.Client(base_url=base) as client:
            page = client.get("/longterm")
            assert page.status_code == 200 and "oolong tea" in page.text and "deploy on Tuesdays" in page.text
            assert "oolong" in client.get("/longterm?q=which tea do I like").text
            csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
            assert csrf
            done = client.post("/longterm/forget", data={"id": stored[0], "csrf": csrf.group(1)}, follow_redirects=True)
            assert done.status_code == 200 and "Forgotten" in done.text
        assert manager.count() == 1  # type: ignore[attr-defined]
