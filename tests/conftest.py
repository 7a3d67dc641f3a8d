"""Shared fixtures for the engine tests.

* Every test gets its own ``MDRECALL_HOME`` and no provider keys from the developer's environment.
* The local model (all-MiniLM-L6-v2) is loaded once per session (``local_provider``). Managers that
  need vectors use providers registered with ``register_provider`` that wrap that one instance
  (``counting_provider``), so tests get real embeddings without loading the model per manager.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mdrecall.embeddings.base import ProviderBase

PROVIDER_ENV = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "VOYAGE_API_KEY", "MISTRAL_API_KEY", "OLLAMA_HOST", "OLLAMA_API_KEY",
)


# A suite started in the background of a non-interactive shell (`pytest &`, a CI step) inherits
# SIGINT ignored, and so would every process it starts: the tests that stop `mdrecall` with Ctrl-C
# would see it ignored, as a real user's foreground command never does. Python's own handler here
# means the default disposition in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a slow test first, each file's tests together and in their order: with the
    suite's workers (scripts/test.sh) the long files start early and the short ones fill in, instead
    of one worker finishing a long file while the other waits."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the servers the helpers started for the session (embedded Postgres, moto): a pytest-xdist
    worker may end without running atexit handlers, which left them running after the suite."""
    for module, stop in (("pghelpers", "stop_server"), ("ltmhelpers", "stop_moto")):
        loaded = sys.modules.get(module)
        if loaded is not None:
            getattr(loaded, stop)()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Never read or write the developer's ~/.mdrecall, never let real keys decide `provider: auto`.
    home = tmp_path_factory.mktemp("mdrecall-home")
    monkeypatch.setenv("MDRECALL_HOME", str(home))
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> text or bytes) under ``root``; returns ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def make_ws(tmp_path: Path) -> Callable[..., Path]:
    """``make_ws({"MEMORY.md": "...", ...})`` -> a workspace directory under tmp_path."""
    counter = iter(range(1000))

    def factory(files: dict[str, str | bytes], name: str | None = None) -> Path:
        root = tmp_path / (name or f"ws{next(counter)}")
        root.mkdir(parents=True, exist_ok=True)
        return write_files(root, files)

    return factory


@pytest.fixture
def cfg(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """``cfg(**keys)`` -> a config mapping with the index inside tmp_path, provider none and no watcher
    unless given (a ``sync`` mapping is merged over ``{"watch": False}``)."""

    def factory(db: str = "index.sqlite", **extra: Any) -> dict[str, Any]:
        # No background watcher unless a test asks for one (sync.watch defaults to true): tests
        # count exactly what each sync did, which a watcher's own debounced syncs would change.
        config: dict[str, Any] = {"provider": "none", "store": {"path": str(tmp_path / db)}, "sync": {"watch": False}}
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
        return config

    return factory


@pytest.fixture(scope="session")
def local_provider():  # type: ignore[no-untyped-def]
    """The real local model, loaded once for the whole session (shared with the contract suite)."""
    from sharedmodel import shared_local_model

    return shared_local_model()


@dataclass
class EmbedStats:
    document_calls: int = 0
    documents: int = 0
    query_calls: int = 0
    texts: list[str] = field(default_factory=list)
    fail_queries: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The thread each query was embedded on, by name (search/ahead.py runs them on helpers).
    query_threads: list[str] = field(default_factory=list)
    #: Called with each query before it is embedded (a test's hook: wait, or raise).
    before_query: Callable[[str], None] | None = None

    def reset(self) -> None:
        with self.lock:
            self.document_calls = self.documents = self.query_calls = 0
            self.texts.clear()


class WrappedLocal(ProviderBase):
    """A registered provider around the session's local model that counts (or fails) embed calls."""

    def __init__(self, inner: Any, stats: EmbedStats, provider_id: str) -> None:
        self._inner = inner
        self._stats = stats
        self.id = provider_id
        self.model = inner.model

    @property
    def dims(self) -> int | None:
        return self._inner.dims

    @property
    def identity(self) -> dict[str, Any]:
        return {**self._inner.identity, "provider": self.id}

    @property
    def max_input_tokens(self) -> int:
        return self._inner.max_input_tokens

    @property
    def max_batch_items(self) -> int:
        return self._inner.max_batch_items

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return self._inner.count_tokens_many(texts)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with self._stats.lock:
            self._stats.document_calls += 1
            self._stats.documents += len(texts)
            self._stats.texts.extend(texts)
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        from mdrecall.errors import EmbeddingError

        with self._stats.lock:
            self._stats.query_calls += 1
            self._stats.query_threads.append(threading.current_thread().name)
        if self._stats.before_query is not None:
            self._stats.before_query(text)
        if self._stats.fail_queries:
            raise EmbeddingError("simulated outage: query embedding refused", retryable=True, status=503)
        return self._inner.embed_query(text)


@pytest.fixture
def counting_provider(local_provider) -> Iterator[EmbedStats]:  # type: ignore[no-untyped-def]
    """Registers provider ``"counting"`` (the real local model, with call counts); yields its stats."""
    from mdrecall.testing import plugin, registered

    stats = EmbedStats()
    with registered(plugin(providers={"counting": lambda config: WrappedLocal(local_provider, stats, "counting")})):
        yield stats
