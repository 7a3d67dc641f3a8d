"""Secrets masked by key, not by word (mdrecall/masking.py)."""

from __future__ import annotations

import pytest

from mdrecall.masking import is_secret_key, masked, masked_override


@pytest.mark.parametrize("key", ["apiKey", "api_key", "x-api-key", "authToken", "token", "password", "aws_secret_access_key",
                                 "clientSecret", "Authorization", "privateKey", "Cookie"])  # fmt: skip
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["tokenizer", "tokens", "maxInputTokens", "softThresholdTokens", "sessionKey", "aws_access_key_id",
                                 "baseUrl", "model", "keywordMatch"])  # fmt: skip
def test_harmless_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_masked_values() -> None:
    config = {"query": {"fts": {"tokenizer": "trigram"}}, "remote": {"apiKey": "sk-1", "headers": {"X-Api-Key": "k", "Accept": "json"}},
              "postgres": {"dsn": "host=db user=bob password='p w' dbname=x"}, "empty": {"apiKey": None},
              "openai": {"apiKey": "${OPENAI_API_KEY}"}, "urls": ["https://bob:pw@example.org/x"]}  # fmt: skip
    assert masked(config) == {
        "query": {"fts": {"tokenizer": "trigram"}}, "remote": {"apiKey": "***", "headers": {"X-Api-Key": "***", "Accept": "json"}},
        "postgres": {"dsn": "host=db user=bob password=*** dbname=x"}, "empty": {"apiKey": None},
        "openai": {"apiKey": "${OPENAI_API_KEY}"}, "urls": ["https://bob:***@example.org/x"],
    }  # fmt: skip


def test_masked_overrides() -> None:
    assert masked_override("remote.apiKey=sk-1") == "remote.apiKey=***"
    assert masked_override("remote.apiKey={") == "remote.apiKey=***"  # not even valid YAML: still masked
    assert masked_override("query.fts.tokenizer=trigram") == "query.fts.tokenizer=trigram"
    assert masked_override("remote={apiKey: sk-1, baseUrl: x}") == 'remote={"apiKey": "***", "baseUrl": "x"}'
