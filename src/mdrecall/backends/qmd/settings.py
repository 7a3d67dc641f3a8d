"""The ``qmd`` config section (``backend: qmd``), a typed part of the one config tree.

``mdrecall.config.MemoryConfig`` imports this module, so it imports nothing from mdrecall (that
would be an import cycle) and nothing heavy: pydantic only. Every key has a default, so
``backend: qmd`` alone works when the project-local QMD (``scripts/install-qmd.sh``) or a ``qmd``
on PATH exists. See docs/qmd.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    # The same rules as mdrecall.config's sections (which this module cannot import): unknown keys
    # are errors, so a typo never silently reverts to a default.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, defer_build=True)


class QmdModels(_Section):
    """Local GGUF files for QMD's three model roles. Never URLs: mdrecall never lets QMD download.

    Unset: the file QMD's default model would have in ``modelsDir`` (``qmd pull`` names it
    ``hf_<user>_<file>.gguf``); a role whose file is absent is reported in ``status()`` and the modes
    that need it fall back to ``search`` with a warning.
    """

    embed: str | None = None  # vsearch, query (and `qmd embed` on sync)
    rerank: str | None = None  # query
    generate: str | None = None  # query (query expansion)

    @field_validator("embed", "rerank", "generate")
    @classmethod
    def _local_file(cls, value: str | None) -> str | None:
        if value and ("://" in value or value.startswith("hf:")):
            raise ValueError(f"must be a local .gguf file, not {value!r}: mdrecall never downloads models")
        return value


class QmdSettings(_Section):
    # Path of the qmd executable. None: the project-local launcher (.tools/qmd/bin/qmd of this
    # checkout, or $MDRECALL_QMD_BINARY), then `qmd` on PATH.
    binary: str | None = None
    # search: BM25 (no model, the default); vsearch: vectors (embedding model); query: hybrid with
    # query expansion and reranking (all three models).
    mode: Literal["search", "vsearch", "query"] = "search"
    # One search through the warm QMD process; past it the builtin engine answers.
    timeoutMs: int = Field(default=4000, ge=1)
    # Starting `qmd mcp` and its MCP handshake.
    startTimeoutMs: int = Field(default=20_000, ge=1)
    # `qmd update` (re-index after file changes) and `qmd embed`.
    updateTimeoutMs: int = Field(default=120_000, ge=1)
    embedTimeoutMs: int = Field(default=600_000, ge=1)
    # After a failure QMD is retried after retryInitialMs, doubling per consecutive failure up to
    # retryMaxMs, forever (the reference gave up on the first error).
    retryInitialMs: int = Field(default=1000, ge=0)
    retryMaxMs: int = Field(default=300_000, ge=0)
    # QMD's config and index for this workspace. None: <mdrecall home>/index/<workspace>-<hash>.qmd/
    indexDir: str | None = None
    # Appended to every qmd command line (e.g. ["--no-gpu"]).
    extraArgs: list[str] = Field(default_factory=list)
    # Where GGUF models are looked for (never downloaded). None: <indexDir>/models.
    modelsDir: str | None = None
    models: QmdModels = Field(default_factory=QmdModels)
    # QMD's BM25 ANDs every word. "or": one sub-query for all keywords plus one per keyword, merged
    # (see query.py); "and": QMD's own semantics (kept to measure the difference).
    keywordMatch: Literal["or", "and"] = "or"
    # Keywords taken from a question for the per-keyword sub-queries.
    maxTerms: int = Field(default=8, ge=1, le=9)
    # What answers while QMD cannot: the builtin engine on the same workspace and config, or nothing
    # (an empty response with the reason in warnings).
    fallback: Literal["builtin", "none"] = "builtin"
    # Open the builtin engine with the manager (its index then stays fresh in the background) rather
    # than on the first fallback (which then indexes before answering).
    warmFallback: bool = True

    @model_validator(mode="after")
    def _retry_bounds(self) -> QmdSettings:
        if self.retryMaxMs < self.retryInitialMs:
            raise ValueError(f"qmd.retryMaxMs ({self.retryMaxMs}) must be at least qmd.retryInitialMs ({self.retryInitialMs})")
        return self


__all__ = ["QmdModels", "QmdSettings"]
