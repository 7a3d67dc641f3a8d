"""OpenAI Batch API: upload JSONL, create, poll, download, map by custom_id; inline fallback."""

from __future__ import annotations

import json

import numpy as np
from provider_servers import FakeClock, Fault, OpenAIServer, hashed_vector, openai_error

from mdrecall.config import parse_config
from mdrecall.embeddings.batching import embed_in_batches
from mdrecall.embeddings.registry import create_provider


def _provider(server: OpenAIServer, **batch):
    cfg = parse_config({"provider": "openai", "remote": {
        "baseUrl": server.base_url, "apiKey": server.api_key,
        "batch": {"enabled": True, "minItems": 3, "pollIntervalMs": 5000, **batch}}})
    return create_provider("openai", cfg)


def _expected(text: str) -> np.ndarray:
    v = np.array(hashed_vector(text, 1536))
    return v / np.linalg.norm(v)


def test_batch_flow_maps_results_by_custom_id(clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=3) as server:
        provider = _provider(server)
        texts = [f"memory note number {i}" for i in range(7)]
        progress: list[tuple[int, int]] = []
        vectors = embed_in_batches(provider, texts, progress=lambda d, t: progress.append((d, t)))
        for text, vector in zip(texts, vectors):  # output lines came back reversed
            assert np.allclose(vector, _expected(text))
        calls = [(r.method, r.path) for r in server.requests]
        assert calls[:2] == [("POST", "/v1/files"), ("POST", "/v1/batches")]
        assert calls.count(("GET", "/v1/batches/batch-0002")) == 3
        assert ("GET", "/v1/files/file-0003/content") in calls
        assert server.embed_requests() == []  # nothing inline
        create = json.loads(server.requests[1].body)
        assert create == {"input_file_id": "file-0001", "endpoint": "/v1/embeddings", "completion_window": "24h",
                          "metadata": {"source": "mdrecall"}}
        lines = [json.loads(line) for line in server.requests[0].body.split(b"\r\n\r\n", 2)[2].decode().splitlines()
                 if line.startswith("{")]
        assert [l["custom_id"] for l in lines] == [str(i) for i in range(7)]
        assert lines[0]["body"] == {"model": "text-embedding-3-small", "input": texts[0], "encoding_format": "float"}
        assert clock.sleeps == [5.0, 5.0, 5.0]  # pollIntervalMs, on the fake clock
        assert server.files == {}  # uploaded input and output files were deleted
        assert progress[-1] == (7, 7)
        assert provider.batch_api.jobs_completed == 1 and provider.batch_api.failures == 0
        assert server.violations == []


def test_failed_lines_are_embedded_inline(clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=1) as server:
        server.batch_fail_ids = {1, 4}
        provider = _provider(server)
        texts = [f"t{i} words" for i in range(6)]
        vectors = embed_in_batches(provider, texts)
        for text, vector in zip(texts, vectors):
            assert np.allclose(vector, _expected(text))
        (inline,) = server.embed_requests()
        assert inline.json()["input"] == ["t1 words", "t4 words"]


def test_failed_batch_falls_back_inline_and_disables_after_two(clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=1) as server:
        server.batch_final_status = "failed"
        provider = _provider(server)
        runner = provider.batch_api
        texts = [f"n{i}" for i in range(5)]
        assert len(embed_in_batches(provider, texts)) == 5
        assert runner.failures == 1 and not runner.disabled and "ended failed" in runner.last_error
        assert "the fake failed this batch" in runner.last_error
        assert len(server.embed_requests()) == 1
        embed_in_batches(provider, texts)
        assert runner.failures == 2 and runner.disabled
        uploads = sum(1 for r in server.requests if r.path == "/v1/files")
        embed_in_batches(provider, texts)  # disabled: straight to inline
        assert sum(1 for r in server.requests if r.path == "/v1/files") == uploads == 2
        assert runner.status()["enabled"] is False and runner.status()["limit"] == 2


def test_timeout_cancels_and_falls_back(clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=10**6) as server:
        provider = _provider(server, timeoutMinutes=0.5)  # 30 s; polls every 5 s
        vectors = embed_in_batches(provider, ["a b", "c d", "e f"])
        assert len(vectors) == 3
        assert sum(clock.sleeps) >= 30 and len(clock.sleeps) == 6
        assert any(r.path.endswith("/cancel") for r in server.requests)
        assert "timeoutMinutes" in provider.batch_api.last_error


def test_upload_429_is_retried_then_succeeds(clock: FakeClock) -> None:
    with OpenAIServer(batch_polls_before_done=1) as server:
        server.queue(Fault(429, openai_error("slow down", "requests", "rate_limit_exceeded"), {"retry-after": "4"}, path_suffix="/files"))
        provider = _provider(server)
        embed_in_batches(provider, ["a", "b", "c"])
        assert clock.sleeps[0] == 4.0 and provider.batch_api.failures == 0
        assert server.embed_requests() == []


def test_small_inputs_skip_the_batch_api(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        provider = _provider(server, minItems=50)
        embed_in_batches(provider, ["a", "b"])
        assert [r.path for r in server.requests] == ["/v1/embeddings"]
