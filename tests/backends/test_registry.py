"""Third-party backends and embedding providers, found through real entry points (a dist-info on sys.path)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.agent import create_memory_capability
from mdrecall.backends import get_backend_factory, known_backends, register_backend, unregister_backend
from mdrecall.embeddings import registry
from mdrecall.errors import ConfigError

PLUGIN = textwrap.dedent(
    '''
    """A toy mdrecall plugin: an in-memory backend and a hashing embedding provider."""
    import hashlib
    from pathlib import Path

    from mdrecall.errors import PathError
    from mdrecall.types import ProbeResult, SearchResponse, SearchResult, SyncReport


    class ToyManager:
        backend = "toy"

        def __init__(self, workspace, config):
            self.workspace = Path(workspace)
            self.config = config
            self.notes = {p.relative_to(self.workspace).as_posix(): p.read_text()
                          for p in sorted(self.workspace.glob("memory/*.md"))}

        def search(self, query, max_results=None, min_score=None, session_key=None, sources=None, now=None):
            words = query.lower().split()
            hits = []
            for path, text in self.notes.items():
                for n, line in enumerate(text.splitlines(), 1):
                    if any(w in line.lower() for w in words):
                        hits.append(SearchResult(path, n, n, 1.0, line, "memory", f"{path}#L{n}"))
            return SearchResponse(hits[: max_results or 10], "keyword-only", "toy", "toy-1")

        def read_file(self, rel_path, from_line=None, lines=None):
            if rel_path not in self.notes:
                raise PathError("not_found", f"{rel_path!r} is not in the toy store")
            text = self.notes[rel_path]
            return {"text": text.rstrip("\\n"), "path": rel_path, "from": 1, "lines": len(text.splitlines())}

        def status(self):
            return {"backend": "toy", "files": len(self.notes)}

        def sync(self, force=False, progress=None):
            return SyncReport(files_scanned=len(self.notes))

        def probe_embedding_availability(self):
            return ProbeResult(False, "toy has no embeddings")

        def probe_vector_availability(self):
            return False

        def close(self):
            pass


    def create_manager(workspace, config):
        return ToyManager(workspace, config)


    class HashProvider:
        id = "toyvec"
        model = "hash-32"
        dims = 32
        identity = {"provider": "toyvec", "model": "hash-32"}
        max_input_tokens = 256
        max_batch_items = 32

        def embed_documents(self, texts):
            return [self.embed_query(t) for t in texts]

        def embed_query(self, text):
            vec = [0.0] * 32
            for word in text.lower().split():
                vec[hashlib.md5(word.encode()).digest()[0] % 32] += 1.0
            norm = sum(v * v for v in vec) ** 0.5 or 1.0
            return [v / norm for v in vec]

        def count_tokens(self, text):
            return len(text.split())


    def create_provider(config):
        return HashProvider()
    '''
)


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_mdrecall.py").write_text(PLUGIN)
    dist = site / "toy_mdrecall-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-mdrecall\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[mdrecall.backends]\ntoy = toy_mdrecall:create_manager\nbroken = toy_mdrecall_missing:create\n\n"
        "[mdrecall.providers]\ntoyvec = toy_mdrecall:create_provider\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    # The provider registry reads entry points once per process; let it see this new distribution.
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    yield site
    sys.modules.pop("toy_mdrecall", None)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-09.md").write_text("# Standup\n- The planner moves to v0.5.\n")
    (ws / "MEMORY.md").write_text("# Memory\n- Pebble uses Postgres full-text search.\n")
    return ws


def test_backend_from_entry_point(installed_plugin: Path, workspace: Path, tmp_path: Path) -> None:
    assert "toy" in known_backends()
    manager = open_manager(workspace, {"backend": "toy", "store": {"path": str(tmp_path / "i.sqlite")}})
    assert type(manager).__name__ == "ToyManager"
    # ...and the agent tools work over it unchanged.
    with create_memory_capability(workspace, {"backend": "toy"}) as memory:
        result = memory.call_tool("memory_search", {"query": "planner"})
        assert result["provider"] == "toy" and result["results"][0]["path"] == "memory/2026-11-09.md"
        assert memory.call_tool("memory_get", {"path": "memory/nope.md"})["code"] == "not_found"
        assert memory.call_tool("memory_status", {})["backend"] == "toy"


def test_unknown_backend_names_the_known_ones(installed_plugin: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown memory backend 'nope'.*builtin.*toy"):
        get_backend_factory("nope")


def test_broken_backend_plugin_is_a_config_error(installed_plugin: Path, workspace: Path) -> None:
    with pytest.raises(ConfigError, match="'broken'.*failed to load"):
        get_backend_factory("broken")
    with create_memory_capability(workspace, {"backend": "broken"}) as memory:
        result = memory.call_tool("memory_search", {"query": "planner"})
    assert result["disabled"] is True and "failed to load" in result["error"]


def test_register_backend_in_process(workspace: Path) -> None:
    calls = []

    def factory(ws, config):
        calls.append((ws, config.backend))
        return open_manager(ws, {"provider": "none", "store": {"path": str(ws.parent / "x.sqlite")}})

    register_backend("inproc", factory)
    try:
        manager = open_manager(workspace, {"backend": "inproc"})
        manager.close()
        assert calls and calls[0][1] == "inproc"
    finally:
        unregister_backend("inproc")
    with pytest.raises(ValueError):
        register_backend("builtin", factory)


def test_embedding_provider_from_entry_point(installed_plugin: Path, workspace: Path, tmp_path: Path) -> None:
    cfg = {"provider": "toyvec", "store": {"path": str(tmp_path / "v.sqlite")}}
    with open_manager(workspace, cfg, use_global_config=False) as manager:
        manager.sync()
        response = manager.search("planner moves", min_score=0)
    assert response.provider == "toyvec" and response.model == "hash-32"
    assert response.mode == "hybrid"
    assert response.results and response.results[0].path == "memory/2026-11-09.md"
