"""Helpers for plugin authors' tests: a fake embedding provider, a fake backend, in-process plugins.

    from mdrecall import open_manager
    from mdrecall.testing import FakeProvider, plugin, registered

    with registered(plugin(providers={"fake": lambda config: FakeProvider()})):
        with open_manager(workspace, {"provider": "fake"}) as memory:
            ...

``FakeProvider`` makes deterministic vectors from hashed word counts (texts sharing words get similar
vectors) with no model download; ``FakeBackend`` is a complete, tiny :class:`MemorySearchManager`
over a workspace's Markdown files, the shape a custom backend takes (see docs/backends.md).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.contract import AS_OF_UNSUPPORTED, ManagerBase
from mdrecall.embeddings.base import EmbeddingProvider, ProviderBase
from mdrecall.plugins import hookimpl, register_plugin, unregister_plugin
from mdrecall.sources.reading import read_memory_lines
from mdrecall.sources.workspace import discover_memory_files
from mdrecall.types import (
    ProbeResult,
    ProgressCallback,
    ReadResult,
    SearchHit,
    SearchRequest,
    SearchResponse,
    Status,
    SyncReport,
    format_citation,
)

_WORD = re.compile(r"\w+", re.UNICODE)

__all__ = ["FakeBackend", "FakeProvider", "plugin", "registered"]


class FakeProvider(ProviderBase):
    """Hashed bag-of-words vectors, L2-normalised: deterministic, instant, no model."""

    id = "fake"

    def __init__(self, dims: int = 64, model: str = "fake-bag-of-words") -> None:
        self.model = model
        self._dims = dims
        self.calls = 0

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def identity(self) -> dict[str, Any]:
        return {"provider": self.id, "model": self.model, "dims": self._dims}

    @property
    def max_input_tokens(self) -> int:
        return 512

    @property
    def max_batch_items(self) -> int:
        return 64

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self._dims
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vec[int.from_bytes(digest[:4], "little") % self._dims] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)


class FakeBackend(ManagerBase):
    """A whole backend in one class: each paragraph of each memory file is a hit, scored by the share
    of query words it contains. Files are read on every search, so it is always fresh."""

    backend = "fake"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        super().__init__(workspace, config)
        self.closed = False

    def _paragraphs(self) -> Iterator[tuple[str, int, int, str]]:
        for file in discover_memory_files(self.workspace, self.config):
            lines = Path(file.abspath).read_text(encoding="utf-8", errors="replace").split("\n")
            start = None
            for number, line in enumerate([*lines, ""], 1):
                if line.strip() and start is None:
                    start = number
                elif not line.strip() and start is not None:
                    yield file.rel_path, start, number - 1, "\n".join(lines[start - 1 : number - 1])
                    start = None

    def run_search(self, request: SearchRequest) -> SearchResponse:
        query, max_results, min_score = request.query, request.max_results, request.min_score
        words = {w for w in _WORD.findall(query.lower()) if len(w) > 2}
        threshold = self.config.query.minScore if min_score is None else min_score
        hits = []
        for path, start, end, text in self._paragraphs():
            found = words & set(_WORD.findall(text.lower()))
            score = len(found) / len(words) if words else 0.0
            if score >= threshold and found:
                hits.append(SearchHit(path, start, end, score, text, "memory", format_citation(path, start, end)))
        hits.sort(key=lambda h: h.score, reverse=True)
        response = SearchResponse(hits[: max_results or self.config.query.maxResults], "keyword-only", "none", "fake")
        if request.as_of is not None:  # a test double: it keeps no dates
            response.warnings.append(AS_OF_UNSUPPORTED.format(backend=self.backend))
        self._notify_search(query, response, request.session_key, request.now or datetime.now())
        return response

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        result = read_memory_lines(self.workspace, self.config, rel_path, from_line, lines)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now())
        return result

    def status(self) -> Status:
        paragraphs = list(self._paragraphs())
        return Status(
            backend=self.backend,
            workspace_dir=str(self.workspace),
            files=len({p[0] for p in paragraphs}),
            chunks=len(paragraphs),
            provider="none",
            model="fake",
            search_mode="keyword-only",
        )

    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport:
        return SyncReport(files_scanned=len(discover_memory_files(self.workspace, self.config)))

    def probe_embedding_availability(self) -> ProbeResult:
        return ProbeResult(False, "the fake backend searches keywords only")

    def probe_vector_availability(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._run_close_hooks()


def plugin(
    *,
    providers: Mapping[str, Callable[[MemoryConfig], EmbeddingProvider]] | None = None,
    backends: Mapping[str, Callable[[Path, MemoryConfig], Any]] | None = None,
) -> object:
    """A plugin object registering the given provider and backend factories."""

    class _Plugin:
        @hookimpl
        def register_embedding_providers(self, register: Callable[..., None]) -> None:
            for provider_id, factory in (providers or {}).items():
                register(provider_id, factory)

        @hookimpl
        def register_backends(self, register: Callable[..., None]) -> None:
            for name, factory in (backends or {}).items():
                register(name, factory)

    return _Plugin()


@contextmanager
def registered(plugin_object: object, name: str | None = None) -> Iterator[str]:
    """Register a plugin for the duration of a ``with`` block."""
    registered_name = register_plugin(plugin_object, name=name)
    try:
        yield registered_name
    finally:
        unregister_plugin(registered_name)
