"""The ``lancedb`` config section (``MemoryConfig.lancedb``): where the table lives and how capture
and recall behave.

Light on purpose: pydantic only, importable without LanceDB and without :mod:`mdrecall.config`
(which imports this module), so the one config tree holds it typed without an import cycle.
Defaults and the two score cutoffs are explained in docs/lancedb.md ("Scores and cutoffs"); both
are cosine similarities of unit vectors, calibrated with ``benchmarks/ltm_calibration.py`` on the
bundled all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mdrecall.errors import ConfigError

#: Cosine at or above which a new memory repeats a stored one (see docs/lancedb.md).
DEFAULT_DUPLICATE_THRESHOLD = 0.93
#: Cosine at or above which auto-recall injects a memory into the prompt.
DEFAULT_RECALL_MIN_SCORE = 0.30
#: Cosine below which ``memory_search``/``memory_recall`` drop a hit (an explicit search may go lower).
DEFAULT_SEARCH_MIN_SCORE = 0.20

CaptureRole = Literal["user", "assistant"]

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, key: str) -> str:
    """``${NAME}`` replaced by the environment variable; a missing one is a ConfigError naming it."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"lancedb.{key}: environment variable {name} is not set")
        return os.environ[name]

    return _ENV.sub(sub, value)


class _Section(BaseModel):
    # The same rules as every section of mdrecall.config: unknown keys are errors.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, defer_build=True)


class MaintenanceSettings(_Section):
    # Background compaction + full-text index refresh + old-version cleanup.
    enabled: bool = True
    # Run after this many writes from this process, or this many seconds after the first unmaintained write.
    everyWrites: int = Field(default=16, ge=1)
    afterSeconds: float = Field(default=30.0, ge=0)
    # Versions older than this are deleted (other processes may still read a version this old).
    keepVersionsMinutes: float = Field(default=1.0, ge=0)


class LanceDBSettings(_Section):
    # A local folder (default: <MDRECALL_HOME>/lancedb/<workspace>-<hash>) or an object-store URI
    # such as s3://bucket/prefix. ${ENV} is expanded.
    dbPath: str | None = None
    # Passed to LanceDB (e.g. aws_access_key_id, aws_endpoint, region); values support ${ENV}.
    storageOptions: dict[str, str] = Field(default_factory=dict)
    # Table name prefix: the table is <tableName>_<model key>, one per embedding model.
    tableName: str = Field(default="memories", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,40}$")
    # Whose memories these are: several agents can share one dbPath and never see each other's rows.
    agentId: str = Field(default="main", min_length=1, max_length=128)
    autoCapture: bool = True
    autoRecall: bool = True
    captureRoles: list[CaptureRole] = Field(default_factory=lambda: list[CaptureRole](["user"]))
    captureMinChars: int = Field(default=10, ge=1)
    captureMaxChars: int = Field(default=500, ge=100, le=10_000)
    maxCapturesPerTurn: int = Field(default=3, ge=0, le=20)
    # Extra capture triggers: regular expressions, matched case-insensitively.
    customTriggers: list[str] = Field(default_factory=list)
    defaultImportance: float = Field(default=0.7, ge=0, le=1)
    duplicateThreshold: float = Field(default=DEFAULT_DUPLICATE_THRESHOLD, ge=0.5, le=1)
    recallLimit: int = Field(default=3, ge=1, le=20)
    recallMinScore: float = Field(default=DEFAULT_RECALL_MIN_SCORE, ge=0, le=1)
    recallMaxChars: int = Field(default=2000, ge=400, le=100_000)
    searchMinScore: float = Field(default=DEFAULT_SEARCH_MIN_SCORE, ge=0, le=1)
    # Commit conflicts (another process wrote first) are retried this many times.
    writeRetries: int = Field(default=10, ge=0, le=100)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)

    @field_validator("customTriggers")
    @classmethod
    def _compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"customTriggers: {pattern!r} is not a regular expression: {exc}") from None
        return value

    def db_uri(self, workspace: Path, home: Path) -> str:
        """The database: ``dbPath`` (``${ENV}`` expanded), else a folder under ``home`` (MDRECALL_HOME)."""
        if self.dbPath:
            raw = expand_env(self.dbPath, "dbPath")
            return raw if "://" in raw else str(Path(raw).expanduser())
        return str(default_db_path(workspace, home))

    def storage_options(self) -> dict[str, str]:
        return {k: expand_env(v, f"storageOptions.{k}") for k, v in self.storageOptions.items()}


def default_db_path(workspace: Path, home: Path) -> Path:
    """``<home>/lancedb/<workspace-name>-<hash>``, beside the builtin's index (never in the workspace)."""
    real = os.path.realpath(workspace)
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:12]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(real).name)[:40] or "workspace"
    return home / "lancedb" / f"{name}-{digest}"
