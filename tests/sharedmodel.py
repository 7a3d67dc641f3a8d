"""The real all-MiniLM-L6-v2, loaded once per test process: the ``local_provider`` fixture and the
contract suite's store-backed backends (which have no fixtures) share this one instance."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def shared_local_model() -> Any:
    from mdrecall.embeddings.local import LocalEmbeddingProvider

    return LocalEmbeddingProvider()
