"""Embedding providers: the contract, the registry, and one module per provider."""

from mdrecall.embeddings.base import EmbeddingProvider, ProviderBase, provider_key
from mdrecall.embeddings.batching import embed_in_batches, plan_batches
from mdrecall.embeddings.registry import ProviderSelection, activate_fallback, known_providers, select_provider

__all__ = [
    "EmbeddingProvider",
    "ProviderBase",
    "ProviderSelection",
    "activate_fallback",
    "embed_in_batches",
    "known_providers",
    "plan_batches",
    "provider_key",
    "select_provider",
]
