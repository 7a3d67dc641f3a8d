"""mdrecall: long-term memory for AI agents.

Markdown files are the source of truth; mdrecall keeps a SQLite index of them (FTS5 keywords,
sqlite-vec vectors, an embedding cache) and answers hybrid searches with citations.

    from mdrecall import open_manager

    with open_manager("~/agent-workspace") as memory:
        for hit in memory.search("what database did we pick?"):
            print(hit.citation, hit.score, hit.snippet)
"""

from mdrecall.config import MemoryConfig, load_config
from mdrecall.errors import ConfigError, EmbeddingError, MdrecallError, PathError, StoreError
from mdrecall.manager import BuiltinMemoryManager, MemorySearchManager, open_manager
from mdrecall.types import ProbeResult, SearchResponse, SearchResult, SyncProgress, SyncReport

__version__ = "0.1.0"

__all__ = [
    "BuiltinMemoryManager",
    "ConfigError",
    "EmbeddingError",
    "MdrecallError",
    "MemoryConfig",
    "MemorySearchManager",
    "PathError",
    "ProbeResult",
    "SearchResponse",
    "SearchResult",
    "StoreError",
    "SyncProgress",
    "SyncReport",
    "load_config",
    "open_manager",
]
