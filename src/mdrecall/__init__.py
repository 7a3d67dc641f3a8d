"""mdrecall: long-term memory for AI agents.

Markdown files are the source of truth; mdrecall keeps an index of them (SQLite: FTS5 keywords,
sqlite-vec vectors, an embedding cache) and answers hybrid searches with citations.

    from mdrecall import open_manager

    with open_manager("~/agent-workspace") as memory:
        for hit in memory.search("what database did we pick?"):
            print(hit.citation, hit.score, hit.snippet)
"""

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
