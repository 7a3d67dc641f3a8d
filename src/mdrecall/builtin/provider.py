"""The embedding provider one manager uses: chosen on first use, switched to ``fallback`` at most once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import EmbeddingProvider, provider_key
from mdrecall.embeddings.registry import ProviderSelection, activate_fallback, select_provider
from mdrecall.errors import EmbeddingError
from mdrecall.index.identity import KEYWORD_ONLY_KEY, desired_meta


class ProviderState:
    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self._mutex = threading.Lock()
        self._selection: ProviderSelection | None = None
        self._key: str = KEYWORD_ONLY_KEY

    @property
    def selection(self) -> ProviderSelection:
        with self._mutex:
            if self._selection is None:
                self._selection = select_provider(self.config)
                provider = self._selection.provider
                self._key = provider_key(provider.identity) if provider is not None else KEYWORD_ONLY_KEY
            return self._selection

    @property
    def provider(self) -> EmbeddingProvider | None:
        return self.selection.provider

    @property
    def key(self) -> str:
        """The identity hash of the provider's vectors (which vectors may be compared with which)."""
        self.selection  # noqa: B018 - select first
        return self._key

    def desired_meta(self, workspace: Path) -> dict[str, Any]:
        return desired_meta(workspace, self.config, self.provider, self.key)

    def resolve_dims(self) -> None:
        """Remote models of unknown size: one probe before the index identity is fixed."""
        provider = self.provider
        if provider is not None and provider.dims is None:
            provider.resolve_dims()

    def switch_to_fallback(self, error: EmbeddingError) -> bool:
        """An explicit provider failed during sync: switch to ``fallback`` once (recorded in status)."""
        with self._mutex:
            selection = self._selection
            if selection is None or selection.provider is None:
                return False
            switched = activate_fallback(selection, self.config, error)
            if switched is None or switched.provider is None:
                return False
            old = selection.provider
            self._selection = switched
            self._key = provider_key(switched.provider.identity)
        old.close()
        return True

    def close(self) -> None:
        selection = self._selection
        if selection is not None and selection.provider is not None:
            selection.provider.close()  # remote providers hold HTTP connection pools
