"""``backend: postgres``: team memory in Postgres + pgvector, shared by many agents, visibility
enforced by the database (docs/scale-out.md). Needs the ``postgres`` extra (psycopg, psycopg_pool,
pgvector); nothing heavy is imported until a manager is created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdrecall.errors import ConfigError

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


def create_manager(workspace: Path, config: Any) -> Any:
    """The backend factory (``mdrecall.backends`` entry point ``postgres``)."""
    _require()
    from mdrecall.backends.postgres.manager import create_manager as create

    return create(workspace, config)


__all__ = ["create_manager"]
