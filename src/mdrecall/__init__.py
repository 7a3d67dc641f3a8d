"""mdrecall: long-term memory for AI agents.

Markdown files are the source of truth; mdrecall keeps an index of them (SQLite: FTS5 keywords,
sqlite-vec vectors, an embedding cache) and answers hybrid searches with citations.

    from mdrecall import open_manager

    with open_manager("~/agent-workspace") as memory:
        for hit in memory.search("what database did we pick?"):
            print(hit.citation, hit.score, hit.snippet)

The names below are imported on first use (PEP 562), not with the package: every ``mdrecall``
command imports this package first, and a one-shot command answered by a running daemon
(docs/cli.md, "The warm path") must not pay for the config models and the engine it never uses.
"""

from __future__ import annotations

import importlib

# Not typing.TYPE_CHECKING: importing typing costs a one-shot command ~10 ms (mypy knows the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from mdrecall.backends import open_manager
    from mdrecall.config import MemoryConfig, load_config
    from mdrecall.contract import ManagerBase, MemorySearchManager
    from mdrecall.errors import ConfigError, EmbeddingError, MdrecallError, PathError, StoreError
    from mdrecall.search.history import fact_history
    from mdrecall.sources.remember import Remembered, remember
    from mdrecall.types import (
        Freshness,
        ProbeResult,
        ReadResult,
        SearchHit,
        SearchRequest,
        SearchResponse,
        SkippedFile,
        Status,
        SyncProgress,
        SyncReport,
    )

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "open_manager": "mdrecall.backends",
    "MemoryConfig": "mdrecall.config",
    "load_config": "mdrecall.config",
    "ManagerBase": "mdrecall.contract",
    "MemorySearchManager": "mdrecall.contract",
    "ConfigError": "mdrecall.errors",
    "EmbeddingError": "mdrecall.errors",
    "MdrecallError": "mdrecall.errors",
    "PathError": "mdrecall.errors",
    "StoreError": "mdrecall.errors",
    "fact_history": "mdrecall.search.history",
    "Remembered": "mdrecall.sources.remember",
    "remember": "mdrecall.sources.remember",
    **{
        name: "mdrecall.types"
        for name in ("Freshness", "ProbeResult", "ReadResult", "SearchHit", "SearchRequest", "SearchResponse",
                     "SkippedFile", "Status", "SyncProgress", "SyncReport")  # fmt: skip
    },
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mdrecall' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ConfigError",
    "EmbeddingError",
    "Freshness",
    "ManagerBase",
    "MdrecallError",
    "MemoryConfig",
    "MemorySearchManager",
    "PathError",
    "ProbeResult",
    "ReadResult",
    "Remembered",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "SkippedFile",
    "Status",
    "StoreError",
    "SyncProgress",
    "SyncReport",
    "__version__",
    "fact_history",
    "load_config",
    "open_manager",
    "remember",
]
