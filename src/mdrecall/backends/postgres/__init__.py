"""``backend: postgres``: team memory in Postgres + pgvector, shared by many agents, visibility
enforced by the database (docs/scale-out.md). Needs the ``postgres`` extra (psycopg, psycopg_pool,
pgvector); nothing heavy is imported until a manager is created. Registered by ``plugin.py``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall.errors import ConfigError

if TYPE_CHECKING:
    from mdrecall.backends.postgres.manager import PostgresMemoryManager
    from mdrecall.config import MemoryConfig

EXTRA_HINT = "the postgres backend needs its extra: pip install 'mdrecall[postgres]'"


def _require() -> None:
    missing = []
    for module in ("psycopg", "psycopg_pool", "pgvector"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigError(f"{EXTRA_HINT} (missing: {', '.join(missing)})")


def create_manager(workspace: Path, config: MemoryConfig) -> PostgresMemoryManager:
    """The backend factory: a clear error when the extra is missing, then the manager."""
    _require()
    from mdrecall.backends.postgres.manager import create_manager as create

    return create(workspace, config)


__all__ = ["EXTRA_HINT", "create_manager"]
