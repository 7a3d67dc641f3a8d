"""Fixtures for the LanceDB backend: real LanceDB, the real bundled model, a local folder or S3.

* ``local_model``: ``provider: local`` resolves to the session's one all-MiniLM-L6-v2 instance
  (registered by a plugin over the built-in factory), so every manager gets real embeddings without
  loading the model again.
* ``target``: parametrised ``local`` (a folder) and ``s3`` (``moto[server]`` on 127.0.0.1, one
  bucket per test, credentials through ``${ENV}`` expansion); see tests/ltmhelpers.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ltmhelpers import S3_ENV, Target, one_blas_thread

pytest.importorskip("lancedb")


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    with one_blas_thread():
        yield


@pytest.fixture
def local_model(local_provider: Any) -> Iterator[Any]:
    from mdrecall.testing import plugin, registered

    with registered(plugin(providers={"local": lambda config: local_provider})):
        yield local_provider


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Target:
    if request.param == "local":
        return Target.local(tmp_path)
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    return Target.s3()


@pytest.fixture
def ltm_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Long-term memory\n", encoding="utf-8")
    return ws


@pytest.fixture
def open_ltm(local_model: Any, ltm_ws: Path, target: Target) -> Iterator[Callable[..., Any]]:
    """``open_ltm(**lancedb_keys)`` -> a LanceMemoryManager (closed after the test)."""
    from mdrecall import open_manager

    opened: list[Any] = []

    def factory(workspace: Path | None = None, **lancedb: Any) -> Any:
        manager = open_manager(workspace or ltm_ws, target.config(**lancedb))
        opened.append(manager)
        return manager

    yield factory
    for manager in opened:
        manager.close()
