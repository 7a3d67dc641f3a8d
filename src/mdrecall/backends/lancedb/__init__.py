"""``backend: lancedb``: long-term memories captured from conversation into LanceDB, recalled into prompts.

Install with ``pip install 'mdrecall[lancedb]'``. See docs/lancedb.md. Registered by
:mod:`mdrecall.backends.lancedb.plugin` (the backend, its agent tools, auto-recall and auto-capture,
dreaming's reader of ``ltm:`` entries, the ``mdrecall ltm`` commands). LanceDB and PyArrow are
imported only when a manager is created, so importing this package (settings, categories, capture
rules) costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall.errors import ConfigError

if TYPE_CHECKING:
    from mdrecall.backends.lancedb.manager import LanceMemoryManager
    from mdrecall.config import MemoryConfig

EXTRA = "lancedb"


def require_lancedb() -> None:
    try:
        import lancedb  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"backend 'lancedb' needs the lancedb and pyarrow packages ({exc.name} is missing): "
            f"pip install 'mdrecall[{EXTRA}]'"
        ) from None


def create_manager(workspace: Path, config: MemoryConfig) -> LanceMemoryManager:
    """The backend factory (registered as ``lancedb`` by the plugin)."""
    require_lancedb()
    from mdrecall.backends.lancedb.manager import LanceMemoryManager

    return LanceMemoryManager(Path(workspace), config)


__all__ = ["EXTRA", "create_manager", "require_lancedb"]
