"""Embedding providers: the contract, the registry, and one module per provider."""

from mdrecall.embeddings.base import EmbeddingProvider, provider_key
from mdrecall.embeddings.batching import embed_in_batches, plan_batches
from mdrecall.embeddings.registry import ProviderSelection, activate_fallback, register_provider, select_provider

__all__ = [
    "EmbeddingProvider",
    "ProviderSelection",
    "activate_fallback",
    "embed_in_batches",
    "plan_batches",
    "provider_key",
    "register_provider",
    "select_provider",
]
