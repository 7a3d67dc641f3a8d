"""Choosing an embedding provider from config.

``provider: auto`` tries providers in :func:`auto_priority` order and keeps the first that can be created;
the reasons the others were skipped are recorded. An explicit provider that cannot be created switches
to ``fallback`` when one is configured, else the failure is reported (fail closed: a different model is
never picked silently). ``none`` means keyword-only on purpose.

Providers come from plugins (:mod:`mdrecall.plugins`, hook ``register_embedding_providers``); the
built-in ones are registered the same way, by :mod:`mdrecall.embeddings.plugin`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mdrecall import plugins
from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.errors import ConfigError, ProviderUnavailableError

ProviderFactory = Callable[[MemoryConfig], EmbeddingProvider]


@dataclass(slots=True)
class _Registry:
    generation: int = -1
    factories: dict[str, ProviderFactory] = field(default_factory=dict)
    #: Order ``auto`` tries providers in.
    auto_priority: list[str] = field(default_factory=list)


_registry = _Registry()
_registry_lock = threading.Lock()


def _current() -> _Registry:
    """The providers every plugin registers, rebuilt when plugins change."""
    current = plugins.generation()
    with _registry_lock:
        if _registry.generation != current:
            factories: dict[str, ProviderFactory] = {}
            ranked: list[tuple[int, int, str]] = []

            def register(provider_id: str, factory: ProviderFactory, *, auto_priority: int | None = None) -> None:
                factories[provider_id] = factory
                if auto_priority is not None:
                    ranked.append((auto_priority, len(ranked), provider_id))

            for _name, _ in plugins.call_each("register_embedding_providers", register=register):
                pass
            _registry.factories = factories
            _registry.auto_priority = [pid for _p, _i, pid in sorted(ranked) if pid in factories]
            _registry.generation = current
        return _registry


def auto_priority() -> list[str]:
    """The order ``provider: auto`` tries providers in (local first: free, private, offline)."""
    return list(_current().auto_priority)


def known_providers() -> list[str]:
    return sorted({*_current().factories, "auto", "none"})


@dataclass
class ProviderSelection:
    provider: EmbeddingProvider | None
    requested: str
    #: Why there is no provider (keyword-only mode), or None.
    unavailable_reason: str | None = None
    #: (provider id, reason) for each provider tried and skipped.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    fallback_from: str | None = None
    fallback_reason: str | None = None
    #: True when an explicitly requested provider failed and no fallback was configured.
    failed_closed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "provider": self.provider.id if self.provider else "none",
            "model": self.provider.model if self.provider else None,
            "unavailableReason": self.unavailable_reason,
            "skipped": [{"provider": p, "reason": r} for p, r in self.skipped],
            "fallbackFrom": self.fallback_from,
            "fallbackReason": self.fallback_reason,
            "failedClosed": self.failed_closed,
        }


def create_provider(provider_id: str, config: MemoryConfig) -> EmbeddingProvider:
    factory = _current().factories.get(provider_id)
    if factory is None:
        raise ConfigError(
            f"unknown embedding provider {provider_id!r}; known: {', '.join(known_providers())}."
            + plugins.broken_plugins_note()
        )
    return factory(config)


def select_provider(config: MemoryConfig) -> ProviderSelection:
    requested = config.provider
    if requested == "none":
        return ProviderSelection(None, requested, unavailable_reason="provider is 'none' (keyword-only by configuration)")
    if requested == "auto":
        skipped: list[tuple[str, str]] = []
        for provider_id in auto_priority():
            try:
                return ProviderSelection(create_provider(provider_id, config), requested, skipped=skipped)
            except ProviderUnavailableError as exc:
                skipped.append((provider_id, str(exc)))
        reason = "; ".join(f"{p}: {r}" for p, r in skipped) or "no embedding provider available"
        return ProviderSelection(None, requested, unavailable_reason=f"no embedding provider available ({reason})", skipped=skipped)
    try:
        return ProviderSelection(create_provider(requested, config), requested)
    except ProviderUnavailableError as exc:
        if config.fallback not in ("none", requested):
            if config.fallback == "auto":
                raise ConfigError("fallback cannot be 'auto'; name a provider") from None
            try:
                provider = create_provider(config.fallback, config)
            except ProviderUnavailableError as fb_exc:
                return ProviderSelection(
                    None,
                    requested,
                    unavailable_reason=f"{requested}: {exc}; fallback {config.fallback}: {fb_exc}",
                    failed_closed=True,
                )
            return ProviderSelection(provider, requested, fallback_from=requested, fallback_reason=str(exc))
        return ProviderSelection(None, requested, unavailable_reason=f"{requested}: {exc}", failed_closed=True)


def activate_fallback(selection: ProviderSelection, config: MemoryConfig, error: BaseException) -> ProviderSelection | None:
    """Switch a running explicit provider that keeps failing to the configured ``fallback``, once.

    Returns the new selection (``fallback_from``/``fallback_reason`` set), or None when there is no
    fallback to switch to (auto or none requested, no fallback configured, already switched, or the
    fallback cannot be created either). The caller must rebuild vectors: the identity changed.
    """
    if selection.requested in ("auto", "none") or selection.fallback_from is not None:
        return None
    fallback = config.fallback
    current = selection.provider.id if selection.provider is not None else selection.requested
    if fallback in ("none", "auto", selection.requested, current):
        return None
    try:
        provider = create_provider(fallback, config)
    except ProviderUnavailableError:
        return None
    return ProviderSelection(
        provider,
        selection.requested,
        skipped=list(selection.skipped),
        fallback_from=current,
        fallback_reason=str(error),
    )
