"""Exceptions with messages a person can act on."""

from __future__ import annotations


class MdrecallError(Exception):
    """Base class for every error mdrecall raises on purpose."""


class ConfigError(MdrecallError):
    """The configuration is invalid; the message names the bad key or file."""


class PathError(MdrecallError):
    """A requested path is not a readable memory file.

    ``code`` is one of ``not_memory_path``, ``outside_workspace``, ``not_found``, ``invalid_path``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class EmbeddingError(MdrecallError):
    """An embedding provider failed (network, quota, bad response)."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class ProviderUnavailableError(EmbeddingError):
    """A provider cannot be created here (missing key, missing package, model not loadable)."""


class StoreError(MdrecallError):
    """The index database cannot be opened or written."""


class SyncInterrupted(MdrecallError):
    """A sync was stopped before it finished (the manager closed meanwhile); every file it
    finished is kept, and the next sync carries on from there."""
