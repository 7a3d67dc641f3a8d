"""The backends the shared contract suite (test_backend_contract.py) runs against.

Each entry opens one backend on a fresh workspace and knows how to plant a fact in it (Markdown
backends write a note; a store-backed backend stores an entry). A backend whose real service is not
installed here is skipped with the reason; CI installs every one of them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ltmhelpers import S3_ENV, Target, one_blas_thread
from mdrecall import MemorySearchManager, open_manager
from mdrecall.agent.tools import MemoryTools
from mdrecall.testing import FakeBackend, plugin, registered
from sharedmodel import shared_local_model


@dataclass
class BackendUnderTest:
    name: str
    manager: MemorySearchManager
    workspace: Path
    #: plant(text) -> the relative path the fact can be cited and read from
    plant: Callable[[str], str]
    #: A path of the backend's own kind that holds nothing (read_file must answer not_found).
    missing: str = "memory/missing.md"


def _markdown_plant(workspace: Path, manager: MemorySearchManager) -> Callable[[str], str]:
    counter = iter(range(1, 1000))

    def plant(text: str) -> str:
        rel = f"memory/2026-05-{next(counter):02d}.md"
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Notes\n\nSome unrelated line about the weather.\n\n- {text}\n", encoding="utf-8")
        manager.sync()
        return rel

    return plant


def _builtin(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}
    with open_manager(workspace, config, use_global_config=False) as manager:
        yield BackendUnderTest("builtin", manager, workspace, _markdown_plant(workspace, manager))


def _fake(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    with registered(plugin(backends={"fake": FakeBackend})):
        with open_manager(workspace, {"backend": "fake"}, use_global_config=False) as manager:
            yield BackendUnderTest("fake", manager, workspace, _markdown_plant(workspace, manager))


_PG_AGENTS = itertools.count()


def _postgres(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    # The session's one embedded PostgreSQL (skipped, with the reason, where it cannot start); each
    # test is its own agent in its own team, so row-level security keeps the tests apart.
    from pghelpers import contract_database, pg_config

    db = contract_database()
    agent = f"contract{os.getpid()}-{next(_PG_AGENTS)}"
    dsn = db.add_agent(agent, f"team-{agent}")
    with open_manager(workspace, pg_config(dsn, agent), use_global_config=False) as manager:
        yield BackendUnderTest("postgres", manager, workspace, _markdown_plant(workspace, manager))


def _notes(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    # examples/custom-backend, installed into the test environment by scripts/setup.sh and found
    # through its entry point: selected purely by config.
    with open_manager(workspace, {"backend": "notes"}, use_global_config=False) as manager:
        yield BackendUnderTest("notes", manager, workspace, _markdown_plant(workspace, manager))


def _qmd(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    from mdrecall.backends.qmd.layout import find_binary
    from mdrecall.backends.qmd.settings import QmdSettings

    if find_binary(QmdSettings()) is None:
        pytest.skip("QMD is not installed: scripts/install-qmd.sh (run by scripts/setup.sh) could not install it; "
                    "run it to see why (it needs npm and the npm registry)")  # fmt: skip
    config = {
        "backend": "qmd",
        "provider": "none",
        "store": {"path": str(tmp_path / "fallback.sqlite")},
        "sync": {"watch": False},
        "qmd": {"indexDir": str(tmp_path / "qmd")},
    }
    with open_manager(workspace, config, use_global_config=False) as manager:
        # QMD starts in the background and a search waits for it only within qmd.timeoutMs: on a
        # loaded machine the first searches would be the fallback's, which this suite is not about.
        assert manager.wait_warm(120)  # type: ignore[attr-defined]
        yield BackendUnderTest("qmd", manager, workspace, _markdown_plant(workspace, manager))
        # The contract held through QMD itself, not through its builtin fallback.
        health = manager.backoff  # type: ignore[attr-defined]
        assert health.failures == 0 and manager.fallback_state is None, health.to_dict()  # type: ignore[attr-defined]


def _entry_plant(manager: MemorySearchManager) -> Callable[[str], str]:
    # A store-backed backend: the fact is stored the way an agent stores one (the memory_store tool).
    tools = MemoryTools(manager)

    def plant(text: str) -> str:
        outcome = tools.call("memory_store", {"text": text})
        assert outcome.get("action") in ("created", "duplicate"), outcome
        return f"ltm:{outcome.get('id') or outcome['existingId']}"

    return plant


def _lancedb_on(target: Target, workspace: Path) -> Iterator[BackendUnderTest]:
    # The real model (shared with every other test of the process), real LanceDB.
    model = shared_local_model()
    with one_blas_thread(), registered(plugin(providers={"local": lambda config: model})):
        with open_manager(workspace, target.config(), use_global_config=False) as manager:
            yield BackendUnderTest("lancedb", manager, workspace, _entry_plant(manager),
                                   missing="ltm:00000000-0000-4000-8000-000000000000")  # fmt: skip


def _lancedb(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    pytest.importorskip("lancedb")
    yield from _lancedb_on(Target.local(tmp_path), workspace)


def _lancedb_s3(tmp_path: Path, workspace: Path) -> Iterator[BackendUnderTest]:
    pytest.importorskip("lancedb")
    saved = {name: os.environ.get(name) for name in S3_ENV}
    os.environ.update(S3_ENV)
    try:
        yield from _lancedb_on(Target.s3(), workspace)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


#: name -> generator of a BackendUnderTest; other backends add themselves here.
BACKENDS: dict[str, Callable[[Path, Path], Iterator[BackendUnderTest]]] = {
    "builtin": _builtin,
    "fake": _fake,
    "notes": _notes,
    "postgres": _postgres,
    "qmd": _qmd,
    "lancedb": _lancedb,
    "lancedb-s3": _lancedb_s3,
}
