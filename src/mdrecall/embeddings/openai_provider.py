"""``openai``: OpenAI's ``POST /embeddings`` through the official ``openai`` SDK.

The SDK's own retries are switched off (``max_retries=0``): mdrecall's retrier honours ``Retry-After``
over a longer, bounded window and shares waits between concurrent batches. ``encoding_format`` is sent
as ``float`` explicitly (the SDK would otherwise ask for base64).
"""

from __future__ import annotations

import json
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import (
    Clock,
    RemoteEmbeddingError,
    default_clock,
    error_from_response,
)
from mdrecall.embeddings.remote import RemoteProvider, openai_style_vectors
from mdrecall.embeddings.settings import ProviderDefaults, ResolvedSettings, resolve_settings
from mdrecall.errors import ProviderUnavailableError

DEFAULTS = ProviderDefaults(
    model="text-embedding-3-small",
    base_url="https://api.openai.com/v1",
    key_env=("OPENAI_API_KEY",),
    base_url_env="OPENAI_BASE_URL",
    # OpenAI: 2048 inputs and 300k tokens per request, 8191 tokens per input.
    max_items=2048,
    max_input_tokens=8191,
    max_tokens_per_request=300_000,
)


def require_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        from mdrecall.extras import install_hint

        raise ProviderUnavailableError(f"the openai package is not installed: {install_hint('openai')}") from exc
    return openai


def sdk_error(provider_id: str, exc: Exception) -> RemoteEmbeddingError:
    """Translate an ``openai`` SDK exception into a classified ``RemoteEmbeddingError``."""
    openai = require_openai()
    if isinstance(exc, openai.APITimeoutError):
        return RemoteEmbeddingError(f"{provider_id}: request timed out", retryable=True, kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return RemoteEmbeddingError(f"{provider_id}: cannot reach the API: {exc}", retryable=True, kind="connection")
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        # The SDK hands over the inner "error" object; rewrap it in the wire shape.
        wire = {"error": body} if isinstance(body, dict) and "error" not in body else body
        response = exc.response
        return error_from_response(provider_id, exc.status_code, dict(response.headers), wire, reason=exc.message)
    if isinstance(exc, openai.APIResponseValidationError):
        return RemoteEmbeddingError(f"{provider_id}: unexpected response: {exc}", retryable=True, kind="response")
    return RemoteEmbeddingError(f"{provider_id}: {exc}")


def make_client(settings: ResolvedSettings) -> Any:
    openai = require_openai()
    return openai.OpenAI(
        # Always explicit (a key is required for this provider), so the SDK never picks another one up.
        # organization/project: the SDK reads OPENAI_ORG_ID / OPENAI_PROJECT_ID, which is right for OpenAI.
        api_key=settings.api_key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout,
        default_headers=dict(settings.headers),
    )


class OpenAIEmbeddingProvider(RemoteProvider):
    id = "openai"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        self._openai = require_openai()
        self.client = make_client(settings)
        if settings.batch.enabled:
            from mdrecall.embeddings.openai_batch import OpenAIBatchRunner

            self.batch_api = OpenAIBatchRunner(self, settings.batch)

    def request_body_extras(self) -> dict[str, Any]:
        return {"dimensions": self.settings.dimensions} if self.settings.dimensions else {}

    def call_sdk(self, fn: Any) -> Any:
        """Run one SDK call through the retrier, classifying its exceptions."""

        def once() -> Any:
            try:
                return fn()
            except self._openai.OpenAIError as exc:
                raise sdk_error(self.id, exc) from exc

        return self.retrier.call(once)

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        extras = self.request_body_extras()
        # Raw response: the SDK's pydantic parsing costs seconds per thousand 1536-float vectors.
        response = self.call_sdk(
            lambda: self.client.embeddings.with_raw_response.create(
                model=self.model, input=texts, encoding_format="float", **extras
            )
        )
        try:
            payload = json.loads(response.http_response.content)
        except ValueError as exc:
            raise RemoteEmbeddingError(f"{self.id}: response is not JSON", retryable=True, kind="response") from exc
        return openai_style_vectors(self.id, payload, len(texts))


def create(config: MemoryConfig, clock: Clock | None = None) -> OpenAIEmbeddingProvider:
    settings = resolve_settings(config, "openai", DEFAULTS)
    return OpenAIEmbeddingProvider(settings, clock=clock or default_clock())
