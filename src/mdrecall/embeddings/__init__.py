"""Embedding providers: the contract, the registry, and one module per provider."""

from mdrecall.embeddings.base import EmbeddingProvider, provider_key
from mdrecall.embeddings.registry import ProviderSelection, register_provider, select_provider

__all__ = ["EmbeddingProvider", "ProviderSelection", "provider_key", "register_provider", "select_provider"]
