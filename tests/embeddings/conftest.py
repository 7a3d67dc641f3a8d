from __future__ import annotations

from collections.abc import Iterator

import pytest
from provider_servers import FakeClock

from mdrecall.embeddings.http import set_default_clock

PROVIDER_ENV = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY", "OLLAMA_HOST", "OLLAMA_API_KEY",
)


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    # The developer's real keys must never reach a test (or decide auto selection).
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path_factory.mktemp("mdrecall-home")))


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    fake = FakeClock()
    old = set_default_clock(fake)
    try:
        yield fake
    finally:
        set_default_clock(old)
