"""Third-party plugins (a backend and an embedding provider) found through a real entry point (a dist-info
on sys.path), and how broken plugins fail."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from mdrecall import open_manager, plugins
from mdrecall.agent import create_memory_capability
from mdrecall.backends import get_backend_factory, known_backends
from mdrecall.embeddings.registry import known_providers
from mdrecall.errors import ConfigError
from mdrecall.testing import FakeBackend, plugin, registered

PLUGIN = textwrap.dedent(
    '''
    """A toy mdrecall plugin: an in-memory backend and a hashing embedding provider."""
    import hashlib
    from pathlib import Path

    from mdrecall.contract import ManagerBase
    from mdrecall.embeddings.base import ProviderBase
    from mdrecall.errors import PathError
    from mdrecall.plugins import hookimpl
    from mdrecall.types import ProbeResult, ReadResult, SearchResponse, SearchHit, Status, SyncReport


    class ToyManager(ManagerBase):
        backend = "toy"

        def __init__(self, workspace, config):
            super().__init__(Path(workspace), config)
            self.notes = {p.relative_to(self.workspace).as_posix(): p.read_text()
                          for p in sorted(self.workspace.glob("memory/*.md"))}

        def search(self, query, max_results=None, min_score=None, session_key=None, sources=None, now=None):
            words = query.lower().split()
            hits = []
            for path, text in self.notes.items():
                for n, line in enumerate(text.splitlines(), 1):
                    if any(w in line.lower() for w in words):
                        hits.append(SearchHit(path, n, n, 1.0, line, "memory", f"{path}#L{n}"))
            return SearchResponse(hits[: max_results or 10], "keyword-only", "toy", "toy-1")

        def read_file(self, rel_path, from_line=None, lines=None):
            if rel_path not in self.notes:
                raise PathError("not_found", f"{rel_path!r} is not in the toy store")
            text = self.notes[rel_path]
            n = len(text.splitlines())
            return ReadResult(text.rstrip("\\n"), rel_path, 1, n, n)

        def status(self):
            return Status("toy", str(self.workspace), len(self.notes), 0, "toy", "toy-1", "keyword-only")

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


    class HashProvider(ProviderBase):
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


    @hookimpl
    def register_backends(register):
        register("toy", create_manager)


    @hookimpl
    def register_embedding_providers(register):
        register("toyvec", create_provider)
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
    (dist / "entry_points.txt").write_text("[mdrecall]\ntoy = toy_mdrecall\nbroken = toy_mdrecall_missing\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    plugins.reload_plugins()  # plugins are found once per process: look again
    yield site
    sys.modules.pop("toy_mdrecall", None)
    monkeypatch.undo()
    plugins.reload_plugins()


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


def test_a_plugin_that_cannot_import_is_recorded_and_named_in_config_errors(installed_plugin: Path, workspace: Path) -> None:
    errors = plugins.plugin_errors()
    assert "broken" in errors and "ModuleNotFoundError" in errors["broken"]
    assert "toy" in known_backends()  # the working plugin is unaffected
    with pytest.raises(ConfigError, match=r"unknown memory backend 'broken'.*Plugins that failed: broken: failed to load"):
        get_backend_factory("broken")
    with create_memory_capability(workspace, {"backend": "broken"}) as memory:
        result = memory.call_tool("memory_search", {"query": "planner"})
    assert result["disabled"] is True and "failed to load" in result["error"]


def test_a_plugin_whose_hook_raises_contributes_nothing_and_is_recorded(workspace: Path) -> None:
    class Raising:
        @plugins.hookimpl
        def register_backends(self, register):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    with registered(Raising(), name="raising"):
        assert "builtin" in known_backends()
        assert plugins.plugin_errors()["raising"] == "hook register_backends failed: RuntimeError: boom"
        with pytest.raises(ConfigError, match="raising: hook register_backends failed"):
            get_backend_factory("anything")
    assert "raising" not in plugins.plugin_errors()


def test_plugin_registered_in_process_is_selected_by_config(workspace: Path) -> None:
    calls = []

    def factory(ws, config):  # type: ignore[no-untyped-def]
        calls.append((ws, config.backend))
        return FakeBackend(ws, config)

    with registered(plugin(backends={"inproc": factory})):
        with open_manager(workspace, {"backend": "inproc"}) as manager:
            assert manager.search("planner").results[0].path == "memory/2026-11-09.md"
        assert calls and calls[0][1] == "inproc"
    assert "inproc" not in known_backends()


def test_a_later_plugin_of_the_same_name_is_the_one_used(workspace: Path) -> None:
    # Defaults register first: a plugin (or a test double) that registers "builtin" or "local" again wins.
    from mdrecall.config import MemoryConfig
    from mdrecall.embeddings.registry import create_provider
    from mdrecall.testing import FakeProvider

    fake = FakeProvider()
    with registered(plugin(backends={"builtin": FakeBackend}, providers={"local": lambda config: fake})):
        with open_manager(workspace, {"backend": "builtin"}, use_global_config=False) as manager:
            assert isinstance(manager, FakeBackend)
        assert create_provider("local", MemoryConfig()) is fake
    assert get_backend_factory("builtin") is not FakeBackend


def test_embedding_provider_from_entry_point(installed_plugin: Path, workspace: Path, tmp_path: Path) -> None:
    assert "toyvec" in known_providers()
    cfg = {"provider": "toyvec", "store": {"path": str(tmp_path / "v.sqlite")}}
    with open_manager(workspace, cfg, use_global_config=False) as manager:
        manager.sync()
        response = manager.search("planner moves", min_score=0)
    assert response.provider == "toyvec" and response.model == "hash-32"
    assert response.mode == "hybrid"
    assert response.results and response.results[0].path == "memory/2026-11-09.md"


def _dist(site: Path, name: str, entry_points: str | None) -> None:
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    if entry_points is not None:
        (dist / "entry_points.txt").write_text(entry_points)


@pytest.mark.parametrize(
    "entry_points_txt",
    [
        "[mdrecall]\ntoy = toy_mdrecall\n",
        "[console_scripts]\ntoy = toy:main\n\n  [mdrecall]  \ntoy = toy_mdrecall\n",
        "[[mdrecall]]\ntoy = toy_mdrecall\n",  # importlib.metadata strips every bracket
        "[ mdrecall ]\ntoy = toy_mdrecall\n",  # a group named " mdrecall ": not ours
        "[mdrecall.extra]\ntoy = toy_mdrecall\n",
        "[console_scripts]\nmdrecall = mdrecall.cli:main\n",  # the name in a value, not a group
        "# [mdrecall]\n[other]\nx = y\n",
        "[MDRECALL]\ntoy = toy_mdrecall\n",
        "",
        None,  # no entry_points.txt at all
    ],
)
def test_the_plain_look_never_misses_an_entry_point_importlib_metadata_finds(
    entry_points_txt: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that lets a process skip importlib.metadata's listing answers False only when that
    listing would be empty, on distributions written as importlib.metadata reads them."""
    from importlib.metadata import entry_points

    site = tmp_path / "site"
    _dist(site, "plain_dist", "[console_scripts]\nplain = plain:main\n")
    _dist(site, "toy_mdrecall", entry_points_txt)
    (site / "legacy.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\n")  # an egg-info that is a file
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    importlib.invalidate_caches()
    found = [(ep.name, ep.value) for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)]
    declared = plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP)
    assert declared is not None, entry_points_txt  # not merely cautious here
    assert [(ep.name, ep.value) for ep in declared] == found, entry_points_txt


def test_the_plain_read_lists_what_importlib_metadata_lists_on_a_layered_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several directories on sys.path, distributions of one name in several of them (the first one
    on the path counts, even with no entry points), two versions in one directory, names told apart
    only once normalized, comments, blank lines, spaces and several groups: the same entry points, in
    the same order, as importlib.metadata's listing; what only it can read is left to it."""
    from importlib.metadata import entry_points

    first, second, third = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _dist(first, "Shadow.Plugin", "[console_scripts]\nshadow = shadow:main\n")  # hides the one in b
    _dist(second, "shadow_plugin", "[mdrecall]\nshadowed = shadow_plugin\n")
    _dist(second, "alpha", "# a comment\n\n[mdrecall]\n# off = old_plugin\n  alpha =  alpha.plugin:hooks.inner  \nbeta=beta [extra]\n[other]\nx = y\n")
    _dist(second, "zeta", "[mdrecall]\nzeta = zeta_plugin\n")
    _dist(third, "Alpha", "[mdrecall]\nalpha_again = alpha_again\n")  # shadowed by b's alpha
    _dist(third, "late", "[mdrecall]\nlate = late_plugin\n")
    (third / "late-0.2.dist-info").mkdir()  # a second version beside it: the listing's first counts
    (third / "late-0.2.dist-info" / "entry_points.txt").write_text("[mdrecall]\nlate2 = late2\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second), str(tmp_path / "missing"), str(third)])
    importlib.invalidate_caches()
    found = [(ep.name, ep.value) for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)]
    declared = plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP)
    assert declared is not None
    assert [(ep.name, ep.value) for ep in declared] == found
    assert {name for name, _ in found} >= {"alpha", "beta", "zeta"} and "shadowed" not in dict(found)

    (second / "broken-0.1.dist-info").mkdir()  # a line importlib.metadata raises on
    (second / "broken-0.1.dist-info" / "entry_points.txt").write_text("[mdrecall]\nno equals sign\n")
    assert plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP) is None
    (second / "broken-0.1.dist-info" / "entry_points.txt").unlink()
    (second / "Odd-0.1.DIST-INFO").mkdir()  # its name comes from its metadata: only importlib.metadata reads that
    assert plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP) is None


def test_a_declared_entry_point_loads_what_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    (tmp_path / "ep_target_pkg").mkdir()
    (tmp_path / "ep_target_pkg" / "__init__.py").write_text("class Hooks:\n    class Inner:\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        for value in ["ep_target_pkg", "ep_target_pkg:Hooks", " ep_target_pkg : Hooks.Inner ", "ep_target_pkg:Hooks [extra]"]:
            ours = plugins.DeclaredEntryPoint("x", value.strip()).load()
            assert ours is EntryPoint("x", value.strip(), "mdrecall").load(), value
        for bad in ["ep_target_pkg:", ":Hooks", ""]:
            with pytest.raises(ValueError, match="not 'module' or 'module:attribute'"):
                plugins.DeclaredEntryPoint("x", bad).load()
        with pytest.raises(AttributeError):
            plugins.DeclaredEntryPoint("x", "ep_target_pkg:Missing").load()
    finally:
        sys.modules.pop("ep_target_pkg", None)


def test_a_zip_or_another_finder_leaves_the_listing_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip archive
    monkeypatch.setattr(sys, "path", [str(archive)])
    assert plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP) is None

    class Finder:
        def find_spec(self, *args: object) -> None:
            return None

        def find_distributions(self, *args: object) -> list[object]:
            return []

    monkeypatch.setattr(sys, "path", [])
    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    assert plugins._declared_entry_points(plugins.ENTRY_POINT_GROUP) is None


def test_plugins_are_found_without_importlib_metadatas_listing_unless_only_it_can_read_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the defaults registered when nothing on sys.path declares the group, and a plugin installed
    on that path found, both without importlib.metadata's listing; a zip on the path asks it."""
    import importlib.metadata

    site = tmp_path / "site"
    _dist(site, "plain_dist", "[console_scripts]\nplain = plain:main\n")
    stdlib = [p for p in sys.path if p and not p.endswith(("site-packages", "src"))]
    monkeypatch.setattr(sys, "path", [str(site), *stdlib])
    listed: list[str] = []
    real = importlib.metadata.entry_points

    def spy(**kwargs):  # type: ignore[no-untyped-def]
        listed.append(kwargs.get("group", ""))
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", spy)
    try:
        plugins.reload_plugins()
        assert listed == [] and {i.name for i in plugins.list_plugins()} == set(plugins.DEFAULT_PLUGINS)

        (site / "toy_mdrecall.py").write_text(PLUGIN)
        _dist(site, "toy_mdrecall", "[mdrecall]\ntoy = toy_mdrecall\n")
        importlib.invalidate_caches()
        plugins.reload_plugins()
        assert listed == []
        assert "toy" in known_backends() and "toyvec" in known_providers()
        assert {i.name for i in plugins.list_plugins()} == {*plugins.DEFAULT_PLUGINS, "toy"}

        archive = tmp_path / "bundle.zip"
        archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip archive
        monkeypatch.setattr(sys, "path", [*sys.path, str(archive)])
        plugins.reload_plugins()
        assert listed == [plugins.ENTRY_POINT_GROUP]
        assert "toy" in known_backends() and "toyvec" in known_providers()
    finally:
        sys.modules.pop("toy_mdrecall", None)
        monkeypatch.undo()
        plugins.reload_plugins()
