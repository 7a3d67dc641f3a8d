"""The ``postgres`` config section: a typed part of the one config tree (``MemoryConfig.postgres``).

Light on purpose: pydantic only, importable without psycopg and without :mod:`mdrecall.config`
(which imports this module), so the config tree can hold it without an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from mdrecall.errors import ConfigError

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig


class _Section(BaseModel):
    # The same rules as every section of mdrecall.config: unknown keys are errors.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, defer_build=True)


class HnswSettings(_Section):
    # Build parameters of the HNSW index (pgvector defaults); changing them applies to a rebuilt index.
    m: int = Field(default=16, ge=2, le=100)
    efConstruction: int = Field(default=64, ge=4, le=1000)
    # Query-time candidate list; pgvector's default is 40.
    efSearch: int = Field(default=100, ge=1, le=1000)
    # pgvector >= 0.8: keep scanning the graph until enough rows pass the visibility filter.
    iterativeScan: Literal["off", "relaxed_order", "strict_order"] = "relaxed_order"
    maxScanTuples: int = Field(default=20_000, ge=1)


class PostgresSettings(_Section):
    #: libpq connection string or URI. The role it logs in as is the agent (see docs/scale-out.md).
    dsn: str | None = None
    #: The agent this workspace belongs to; checked against the role's mapping (None: take the role's).
    agentId: str | None = None
    #: The agent's team; checked like agentId.
    teamId: str | None = None
    #: Folders (workspace-relative) whose memory files the whole team sees.
    sharedFolders: list[str] = Field(default_factory=lambda: ["memory/shared/"])
    #: The DSN is the store owner's: apply migrations, register the agent (and its role) on open and
    #: act as that role on every connection (SET ROLE). For development and tests; production gives
    #: each agent its own login role (``mdrecall postgres add-agent``).
    provision: bool = False
    poolMin: int = Field(default=1, ge=0)
    # At least 2: a sync holds one connection for its agent lock and writes, the team's embedding
    # cache is written through another.
    poolMax: int = Field(default=4, ge=2)
    statementTimeoutMs: int = Field(default=15_000, ge=0)
    #: How long a sync waits for another process syncing the same agent (ms).
    lockTimeoutMs: int = Field(default=10_000, ge=0)
    #: Team-wide cap on the shared embedding cache (None: no cap).
    cacheMaxEntries: int | None = Field(default=None, ge=1)
    #: Text-search configuration for keywords (stemming); CJK is indexed per character either way.
    textSearchConfig: str = "english"
    hnsw: HnswSettings = Field(default_factory=HnswSettings)

    @field_validator("sharedFolders")
    @classmethod
    def _folders(cls, value: list[str]) -> list[str]:
        out = []
        for raw in value:
            folder = raw.strip().replace("\\", "/").strip("/")
            if not folder or ".." in folder.split("/"):
                raise ValueError(f"invalid shared folder {raw!r}")
            out.append(folder + "/")
        return out

    @field_validator("textSearchConfig")
    @classmethod
    def _ts_config(cls, value: str) -> str:
        if not value.replace("_", "").isalnum():
            raise ValueError(f"invalid text search configuration name {value!r}")
        return value

    @field_validator("agentId", "teamId")
    @classmethod
    def _ident(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or len(value) > 200 or "\x00" in value):
            raise ValueError("must be a non-empty name of at most 200 characters")
        return value

    @field_validator("poolMax")
    @classmethod
    def _pool(cls, value: int, info: ValidationInfo) -> int:
        # On the field, not the model: an error about the whole section would echo the DSN (a password).
        low = info.data.get("poolMin")
        if isinstance(low, int) and low > value:
            raise ValueError(f"must be at least poolMin ({low})")
        return value


def connection_settings(config: MemoryConfig) -> PostgresSettings:
    """``config.postgres``, checked for what opening the store needs (a DSN)."""
    settings = config.postgres
    if not settings.dsn:
        raise ConfigError("backend 'postgres' needs postgres.dsn (a libpq connection string or postgresql:// URI)")
    return settings


__all__ = ["HnswSettings", "PostgresSettings", "connection_settings"]
