"""``IndexStore``: what the incremental indexer (:mod:`mdrecall.index.indexer`) needs from a store.

The builtin's SQLite ``IndexDB`` is one; the Postgres backend's ``PgStore`` is another, so both index
a workspace with the same code (hash-based incremental sync, the embedding cache, racy files).

The rules every store keeps:

* ``replace_file``, ``record_skipped`` and ``remove_file`` are each atomic: a reader sees a file's old
  rows or its new ones, never a mix.
* ``transaction()`` groups writes that should commit together (a batch of cache entries, a batch
  of files); a store whose every method already commits on its own may run them as it runs any
  write. Nested, the inner one is a part of the outer (a savepoint).
* ``write_batch_files``: how many files' ``replace_file`` the indexer may commit together in one
  ``transaction()``; 1: each file commits on its own (what a failure or another process then sees).
* ``cache_get`` never returns a vector of another provider, model or provider key.
* Vectors cross this interface as float32 bytes in the machine's order (``ChunkRow.embedding``,
  ``cache_put``, ``cache_get``), each chunk's with its embedding space (``ChunkRow.space``); a store
  keeps them however it likes (the SQLite index: once, as float16).
* ``cache_prune(n)`` keeps at most ``n`` cached vectors that no chunk uses, never one in use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from mdrecall.store.db import ChunkRow, FileRow, SkipRecord


class IndexStore(Protocol):
    write_batch_files: int

    def files(self, source: str | None = None) -> dict[str, FileRow]: ...

    def skipped(self) -> dict[str, SkipRecord]: ...

    def record_skipped(self, path: str, source: str, reason: str, mtime: int, size: int) -> None: ...

    def touch_file(self, path: str, mtime: int, size: int) -> None: ...

    def remove_file(self, path: str) -> None: ...

    def replace_file(self, file: FileRow, chunks: Sequence[ChunkRow], model: str) -> None: ...

    def cache_get(self, provider: str, model: str, key: str, hashes: Iterable[str]) -> dict[str, bytes]: ...

    def cache_touch(self, provider: str, model: str, key: str, hashes: Sequence[str]) -> None: ...

    def cache_put(self, provider: str, model: str, key: str, items: Sequence[tuple[str, bytes]]) -> None: ...

    def cache_prune(self, max_entries: int | None) -> int: ...

    def transaction(self) -> AbstractContextManager[object]: ...


__all__ = ["IndexStore"]
