"""Retries, backoff and error classification, against real HTTP servers and a fake clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from provider_servers import (
    FakeClock,
    Fault,
    GeminiServer,
    MistralServer,
    OpenAIServer,
    VoyageServer,
    google_error,
    openai_error,
)

from mdrecall.config import parse_config
from mdrecall.embeddings.http import (
    RemoteEmbeddingError,
    Retrier,
    RetryPolicy,
    error_from_response,
    parse_retry_after,
)
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError

RATE_LIMITED = openai_error("Rate limit reached for text-embedding-3-small on requests per min (RPM). "
                            "Visit https://platform.openai.com/account/billing to add a payment method.",
                            "requests", "rate_limit_exceeded")


def _openai(server: OpenAIServer, **remote):
    cfg = parse_config({"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key, **remote}})
    return create_provider("openai", cfg)


def test_429_with_retry_after_twice_then_success_waits_2s_2s(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(
            Fault(429, RATE_LIMITED, {"retry-after": "2"}),
            Fault(429, RATE_LIMITED, {"retry-after": "2"}),
        )
        provider = _openai(server)
        vectors = provider.embed_documents(["alpha beta", "gamma"])
        assert len(vectors) == 2
        assert clock.sleeps == [2.0, 2.0]
        assert len(server.embed_requests()) == 3
        assert [e.delay for e in provider.retrier.events] == [2.0, 2.0]
        assert all(e.from_retry_after and e.status == 429 for e in provider.retrier.events)
        # The retried request is byte-for-byte the same request.
        bodies = {r.body for r in server.embed_requests()}
        assert len(bodies) == 1
        assert server.violations == []


@pytest.mark.parametrize("server_cls", [GeminiServer, VoyageServer, MistralServer])
def test_httpx_providers_honour_retry_after(server_cls, clock: FakeClock) -> None:
    with server_cls() as server:
        server.queue(Fault(429, {"detail": "rate limited"}, {"retry-after": "3"}), Fault(503, "upstream unavailable"))
        pid = {GeminiServer: "gemini", VoyageServer: "voyage", MistralServer: "mistral"}[server_cls]
        cfg = parse_config({"provider": pid, "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}})
        provider = create_provider(pid, cfg)
        provider.retrier._rng = random.Random(7)
        assert len(provider.embed_documents(["one text"])) == 1
        # 3 s from the header, then backoff attempt 2: 2 s times a jitter factor in [1, 1.25).
        assert clock.sleeps[0] == 3.0
        assert 2.0 <= clock.sleeps[1] < 2.5
        assert len(server.requests) == 3
        assert server.violations == []


def test_backoff_without_retry_after_grows_and_is_jittered(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(*[Fault(500, openai_error("The server had an error", "server_error"))] * 4)
        provider = _openai(server)
        provider.retrier._rng = random.Random(1)
        provider.embed_documents(["hello"])
        assert len(clock.sleeps) == 4
        for attempt, wait in enumerate(clock.sleeps, start=1):
            assert 2 ** (attempt - 1) <= wait < 2 ** (attempt - 1) * 1.25
        assert len(set(round(w / 2 ** i, 6) for i, w in enumerate(clock.sleeps))) > 1  # jitter varies


def test_insufficient_quota_is_not_retried(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        body = openai_error("You exceeded your current quota, please check your plan and billing details.",
                            "insufficient_quota", "insufficient_quota")
        server.queue(*[Fault(429, body, {"retry-after": "1"})] * 5)
        provider = _openai(server)
        with pytest.raises(EmbeddingError) as info:
            provider.embed_documents(["x"])
        err = info.value
        assert err.status == 429 and err.retryable is False
        assert isinstance(err, RemoteEmbeddingError) and err.quota_exhausted
        assert "quota" in str(err)
        assert clock.sleeps == []
        assert len(server.requests) == 1


def test_gemini_daily_quota_not_retried_but_per_minute_is(clock: FakeClock) -> None:
    daily = google_error(429, "Quota exceeded for metric: embed_content_free_tier_requests", "RESOURCE_EXHAUSTED", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generativelanguage.googleapis.com/embed_content_free_tier_requests",
                         "quotaId": "EmbedContentRequestsPerDayPerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"},
    ])
    per_minute = google_error(429, "Quota exceeded. Please retry in 13.2s.", "RESOURCE_EXHAUSTED", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaId": "EmbedContentRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"},
    ])
    with GeminiServer() as server:
        cfg = parse_config({"provider": "gemini", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}})
        provider = create_provider("gemini", cfg)
        server.queue(Fault(429, per_minute))
        provider.embed_documents(["a"])
        assert clock.sleeps == [13.0]  # RetryInfo.retryDelay honoured
        server.queue(Fault(429, daily))
        with pytest.raises(RemoteEmbeddingError) as info:
            provider.embed_documents(["b"])
        assert info.value.quota_exhausted and not info.value.retryable
        assert clock.sleeps == [13.0]


def test_total_retry_time_is_bounded(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(*[Fault(429, RATE_LIMITED, {"retry-after": "20"})] * 50)
        provider = _openai(server, maxRetrySeconds=50, maxRetries=100)
        with pytest.raises(RemoteEmbeddingError) as info:
            provider.embed_documents(["x"])
        # 20 + 20 fit in 50 s; a third 20 s wait would end at 60 s.
        assert clock.sleeps == [20.0, 20.0]
        assert len(server.requests) == 3
        assert "gave up after 3 attempts" in str(info.value)
        assert "maxRetrySeconds" in str(info.value)
        assert info.value.retryable  # the next sync may try again


def test_retry_after_longer_than_budget_gives_up_at_once(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(Fault(429, RATE_LIMITED, {"retry-after": "3600"}))
        provider = _openai(server, maxRetrySeconds=300)
        with pytest.raises(RemoteEmbeddingError, match="asks to wait 3600s"):
            provider.embed_documents(["x"])
        assert clock.sleeps == []


def test_max_retries_bound(clock: FakeClock) -> None:
    with MistralServer() as server:
        server.queue(*[Fault(502, "bad gateway")] * 10)
        cfg = parse_config({"provider": "mistral", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key, "maxRetries": 3}})
        provider = create_provider("mistral", cfg)
        with pytest.raises(RemoteEmbeddingError, match="HTTP 502"):
            provider.embed_documents(["x"])
        assert len(server.requests) == 4
        assert len(clock.sleeps) == 3


def test_client_errors_are_not_retried(clock: FakeClock) -> None:
    with VoyageServer() as server:
        cfg = parse_config({"provider": "voyage", "remote": {"baseUrl": server.base_url, "apiKey": "wrong-key"}})
        provider = create_provider("voyage", cfg)
        with pytest.raises(EmbeddingError) as info:
            provider.embed_query("hello")
        assert info.value.status == 401 and not info.value.retryable
        assert "Provided API key is invalid" in str(info.value) and "check the API key" in str(info.value)
        assert "wrong-key" not in str(info.value)
        assert clock.sleeps == [] and len(server.requests) == 1


def test_slow_response_times_out_and_is_retried(clock: FakeClock) -> None:
    with MistralServer() as server:
        server.queue(Fault(0, delay=1.5))  # answers normally, but after the client's timeout
        cfg = parse_config({"provider": "mistral", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key, "timeoutSeconds": 0.3}})
        provider = create_provider("mistral", cfg)
        assert len(provider.embed_documents(["slow"])) == 1
        assert len(clock.sleeps) == 1 and 1.0 <= clock.sleeps[0] < 1.25
        assert "timed out" in provider.retrier.events[0].message


def test_openai_sdk_timeout_is_retried(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(Fault(0, delay=1.5))
        provider = _openai(server, timeoutSeconds=0.3)
        assert len(provider.embed_query("slow")) == 1536
        assert len(clock.sleeps) == 1
        assert "timed out" in provider.retrier.events[0].message


def test_unreachable_server_gives_up_after_two_connection_retries(clock: FakeClock) -> None:
    server = MistralServer()
    url = server.base_url
    server.close()  # nothing listens there any more
    cfg = parse_config({"provider": "mistral", "remote": {"baseUrl": url, "apiKey": "k"}})
    provider = create_provider("mistral", cfg)
    with pytest.raises(RemoteEmbeddingError, match="cannot reach") as info:
        provider.embed_query("x")
    assert info.value.kind == "connection"
    assert len(clock.sleeps) == 2


def test_waits_are_shared_between_concurrent_callers() -> None:
    clock = FakeClock()
    retrier = Retrier("p", RetryPolicy(), clock)
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RemoteEmbeddingError("429", retryable=True, status=429, retry_after=5)
        return "ok"

    assert retrier.call(flaky) == "ok"
    # A second caller arriving during the pause waits out the rest of it before its first request.
    clock.now -= 3  # pretend only 2 s of the 5 s pause have passed
    assert retrier.call(lambda: "second") == "second"
    assert clock.sleeps == [5.0, 3.0]


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC)
    now = (when - timedelta(seconds=30)).timestamp()
    assert parse_retry_after({"Retry-After": format_datetime(when, usegmt=True)}, now=now) == pytest.approx(30.0)
    body = {"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}]}}
    assert parse_retry_after({}, body) == 2.5
    assert parse_retry_after({"Retry-After": "soon"}) is None


def test_classification_table() -> None:
    def cls(status: int, body: object = None) -> tuple[bool, bool]:
        err = error_from_response("p", status, {}, body)
        return err.retryable, err.quota_exhausted

    assert cls(429, RATE_LIMITED) == (True, False)  # the billing link in the message is not a quota signal
    assert cls(429, openai_error("x", "insufficient_quota", "insufficient_quota")) == (False, True)
    assert cls(429, openai_error("Rate limit reached on tokens per day (TPD)", "tokens", "rate_limit_exceeded")) == (False, True)
    assert cls(402, {"detail": "Payment required"}) == (False, True)
    assert cls(500) == (True, False) and cls(503) == (True, False) and cls(529) == (True, False)
    assert cls(408) == (True, False)
    assert cls(400, {"detail": "bad"}) == (False, False)
    assert cls(404) == (False, False)
    assert error_from_response("ollama", 404, {}, {"error": 'model "x" not found'}).args[0] == 'ollama: HTTP 404: model "x" not found'


def test_query_embeddings_have_a_short_retry_budget(clock: FakeClock) -> None:
    # A search waits for its query vector: a long Retry-After fails fast instead of stalling the search.
    with OpenAIServer() as server:
        provider = _openai(server)
        server.queue(Fault(429, RATE_LIMITED, {"retry-after": "2"}))
        assert len(provider.embed_query("q")) == 1536 and clock.sleeps == [2.0]
        server.queue(Fault(429, RATE_LIMITED, {"retry-after": "30"}))
        with pytest.raises(RemoteEmbeddingError, match="the query retry limit"):
            provider.embed_query("q")
        assert clock.sleeps == [2.0]
        server.queue(*[Fault(500, openai_error("boom", "server_error"))] * 5)
        with pytest.raises(RemoteEmbeddingError, match="no retries left"):
            provider.embed_query("q")
        assert len(clock.sleeps) == 3  # two quick retries, not eight


def test_a_query_does_not_sit_out_a_long_pause_set_by_documents() -> None:
    clock = FakeClock()
    retrier = Retrier("p", RetryPolicy(), clock)
    retrier._defer(120)  # a document batch was told Retry-After: 120
    with retrier.limited(2, 10, "the query retry limit"):
        with pytest.raises(RemoteEmbeddingError, match="paused for 120.0s"):
            retrier.call(lambda: "never")
    assert clock.sleeps == []
    assert retrier.call(lambda: "documents wait") == "documents wait" and clock.sleeps == [120.0]
