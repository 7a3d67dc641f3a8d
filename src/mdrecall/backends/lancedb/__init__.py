"""``backend: lancedb``: long-term memories captured from conversation into LanceDB, recalled into prompts.

Install with ``pip install 'mdrecall[lancedb]'``. See docs/lancedb.md. LanceDB and PyArrow are
imported only when a manager is created, so importing this package (settings, categories, capture
rules) costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdrecall.errors import ConfigError

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


def create_manager(workspace: Path, config: Any) -> Any:
    """The backend factory (``mdrecall.backends`` entry point ``lancedb``)."""
    require_lancedb()
    from mdrecall.backends.lancedb.manager import LanceMemoryManager

    manager = LanceMemoryManager(Path(workspace), config)
    try:
        from mdrecall.dreaming import install_recall_tracking

        install_recall_tracking(manager)
    except ImportError:
        pass
    except BaseException:
        manager.close()
        raise
    return manager


__all__ = ["create_manager", "require_lancedb"]
