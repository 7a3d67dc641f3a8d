"""OpenAI Batch API for large (re-)indexes (``remote.batch.enabled``, opt-in; half the price, slower).

Flow per job of at most 50,000 texts: upload a JSONL file (``purpose=batch``, one ``/v1/embeddings``
request per text, ``custom_id`` = the text's index), ``POST /batches``, poll ``GET /batches/{id}`` every
``pollIntervalMs`` until a terminal state or ``timeoutMinutes``, download the output file and map each
line back by ``custom_id``. Lines that failed are left out so the caller embeds them inline.

Failure policy (as the reference system): any failure falls back to inline requests for that call;
after two consecutive failed jobs the batch API is switched off for this provider instance; a success
resets the count. mdrecall always waits for the job (``wait: false`` is accepted but ignored: results
must be in the index before the sync finishes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mdrecall.config import BatchConfig
from mdrecall.errors import EmbeddingError

if TYPE_CHECKING:
    from mdrecall.embeddings.openai_provider import OpenAIEmbeddingProvider

MAX_REQUESTS_PER_JOB = 50_000
FAILURE_LIMIT = 2
TERMINAL = {"completed", "failed", "expired", "cancelled", "canceled"}


class OpenAIBatchRunner:
    def __init__(self, provider: OpenAIEmbeddingProvider, config: BatchConfig) -> None:
        self.provider = provider
        self.config = config
        self.failures = 0
        self.disabled = False
        self.last_error: str | None = None
        self.jobs_completed = 0
        #: Ids of the last job's batch and files, for status and tests.
        self.last_batch_id: str | None = None

    def should_use(self, count: int) -> bool:
        return self.config.enabled and not self.disabled and count >= self.config.minItems

    def status(self) -> dict[str, Any]:
        return {
            "enabled": self.config.enabled and not self.disabled,
            "failures": self.failures,
            "limit": FAILURE_LIMIT,
            "wait": True,
            "concurrency": self.config.concurrency,
            "pollIntervalMs": self.config.pollIntervalMs,
            "timeoutMs": int(self.config.timeoutMinutes * 60_000),
            "minItems": self.config.minItems,
            "lastError": self.last_error,
            "lastBatchId": self.last_batch_id,
        }

    def run(
        self, texts: list[str], progress: Callable[[int, int], None] | None = None
    ) -> dict[int, list[float]]:
        """Vectors by index for the texts the batch API embedded; never raises ``EmbeddingError``."""
        done: dict[int, list[float]] = {}
        try:
            for offset in range(0, len(texts), MAX_REQUESTS_PER_JOB):
                part = texts[offset : offset + MAX_REQUESTS_PER_JOB]
                done.update(self._run_job(part, offset))
                if progress is not None:
                    progress(len(done), len(texts))
        except EmbeddingError as exc:
            self.failures += 1
            self.last_error = str(exc)
            if self.failures >= FAILURE_LIMIT:
                self.disabled = True
            return done
        self.failures = 0
        return done

    def _jsonl(self, texts: list[str]) -> bytes:
        provider = self.provider
        extras = provider.request_body_extras()
        lines = []
        for i, text in enumerate(texts):
            body = {"model": provider.model, "input": provider._fit(text), "encoding_format": "float", **extras}
            lines.append(json.dumps({"custom_id": str(i), "method": "POST", "url": "/v1/embeddings", "body": body}))
        return ("\n".join(lines) + "\n").encode("utf-8")

    def _run_job(self, texts: list[str], offset: int) -> dict[int, list[float]]:
        provider = self.provider
        client = provider.client
        clock = provider.retrier.clock
        upload = provider.call_sdk(
            lambda: client.files.create(
                file=("mdrecall-embeddings.jsonl", self._jsonl(texts), "application/jsonl"), purpose="batch"
            )
        )
        files_to_delete = [upload.id]
        try:
            batch = provider.call_sdk(
                lambda: client.batches.create(
                    input_file_id=upload.id,
                    endpoint="/v1/embeddings",
                    completion_window="24h",
                    metadata={"source": "mdrecall"},
                )
            )
            self.last_batch_id = batch.id
            started = clock.monotonic()
            timeout = self.config.timeoutMinutes * 60.0
            while batch.status not in TERMINAL:
                if clock.monotonic() - started >= timeout:
                    self._cancel(batch.id)
                    raise EmbeddingError(
                        f"openai batch {batch.id} still {batch.status} after remote.batch.timeoutMinutes "
                        f"({self.config.timeoutMinutes:g}); cancelled, embedding inline",
                        retryable=True,
                    )
                clock.sleep(self.config.pollIntervalMs / 1000.0)
                batch = provider.call_sdk(lambda batch_id=batch.id: client.batches.retrieve(batch_id))
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    files_to_delete.append(file_id)
            if batch.status != "completed":
                raise EmbeddingError(f"openai batch {batch.id} ended {batch.status}: {_batch_errors(batch)}", retryable=True)
            if not batch.output_file_id:
                raise EmbeddingError(f"openai batch {batch.id} completed without an output file", retryable=True)
            output_id = batch.output_file_id
            content = provider.call_sdk(lambda: client.files.content(output_id))
            vectors = self._parse_output(content.text, len(texts))
        finally:
            for file_id in files_to_delete:
                self._delete_file(file_id)
        self.jobs_completed += 1
        return {offset + i: v for i, v in vectors.items()}

    def _parse_output(self, text: str, count: int) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                index = int(record["custom_id"])
            except (ValueError, KeyError, TypeError):
                continue
            response = record.get("response") or {}
            if not 0 <= index < count or response.get("status_code") != 200:
                continue
            data = (response.get("body") or {}).get("data") or []
            if len(data) != 1 or not isinstance(data[0].get("embedding"), list):
                continue
            out[index] = self.provider._checked([data[0]["embedding"]], 1)[0]
        return out

    def _cancel(self, batch_id: str) -> None:
        try:
            self.provider.client.batches.cancel(batch_id)
        except Exception:  # best effort: the job expires on its own
            pass

    def _delete_file(self, file_id: str) -> None:
        try:
            self.provider.client.files.delete(file_id)
        except Exception:  # best effort: uploaded files expire
            pass


def _batch_errors(batch: Any) -> str:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    messages = [getattr(e, "message", None) or str(e) for e in data]
    return "; ".join(m for m in messages if m) or "no error details"
