"""Calls to remote embedding APIs: error classification, retries with backoff, and a small JSON client.

Retry rules (the reference system retried three times within about two seconds, which never outlasts a
per-minute quota; see spec 5.4):

* 429, 408, 409, 425, 5xx, timeouts and dropped connections are retried; other 4xx are not.
* The wait is the server's ``Retry-After`` (``retry-after-ms``, ``retry-after`` in seconds or as an HTTP
  date, or Google's ``RetryInfo.retryDelay``) when it sends one, else exponential backoff from 1 s,
  doubled each time, capped at 60 s, times a random factor in [1, 1.25) so parallel workers spread out.
* A wait goes into a shared gate: every request through the same ``Retrier`` holds off until it passes,
  so concurrent batches do not keep hammering a provider that asked for a pause.
* Retrying stops after ``maxRetries`` retries, or as soon as the next wait would end past
  ``maxRetrySeconds`` since the first attempt; connection failures (nothing answered) get two retries.
* Exhausted quotas (OpenAI ``insufficient_quota``, Google daily ``RESOURCE_EXHAUSTED``, 402, billing
  messages) are never retried: waiting does not refill them within a sync.

The clock is injectable so tests count waits instead of sleeping through them.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from mdrecall.errors import EmbeddingError, ProviderUnavailableError

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})

_QUOTA_MESSAGE = re.compile(
    # Not bare "billing": OpenAI's per-minute rate-limit message links to the billing page.
    r"insufficient[_ ]quota|exceeded your current quota|check your plan and billing|"
    r"credit balance|out of credits|payment required|per[_ ]?day|daily (?:limit|quota)",
    re.IGNORECASE,
)


class RemoteEmbeddingError(EmbeddingError):
    """An embedding API call failed; carries what the retry loop needs."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        quota_exhausted: bool = False,
        kind: str = "http",
    ) -> None:
        super().__init__(message, retryable=retryable and not quota_exhausted, status=status)
        self.retry_after = retry_after
        self.quota_exhausted = quota_exhausted
        #: "http" (the server answered), "timeout", "connection" or "response" (unusable body).
        self.kind = kind


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


_default_clock: Clock = SystemClock()


def default_clock() -> Clock:
    """The clock new providers use; tests swap it with ``set_default_clock``."""
    return _default_clock


def set_default_clock(clock: Clock | None) -> Clock:
    """Replace the clock new providers use (None restores the system clock); returns the old one."""
    global _default_clock
    old = _default_clock
    _default_clock = clock if clock is not None else SystemClock()
    return old


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 8
    max_total_seconds: float = 300.0
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.25
    max_connection_retries: int = 2
    #: Named in "gave up" messages so the user knows which setting to raise.
    budget_name: str = "remote.maxRetrySeconds"


@dataclass
class RetryEvent:
    """One wait the retrier decided on (kept for status and tests)."""

    attempt: int
    delay: float
    status: int | None
    message: str
    from_retry_after: bool


class Retrier:
    def __init__(
        self,
        provider_id: str,
        policy: RetryPolicy,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.policy = policy
        self.clock = clock if clock is not None else default_clock()
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._not_before = 0.0
        self._local = threading.local()
        self.events: list[RetryEvent] = []
        self.last_error: str | None = None

    @contextmanager
    def limited(self, max_retries: int, max_total_seconds: float, budget_name: str) -> Iterator[None]:
        """Tighter limits for calls made in this block on this thread (search-time query embeddings)."""
        previous = getattr(self._local, "policy", None)
        base = previous or self.policy
        self._local.policy = replace(
            base,
            max_retries=min(base.max_retries, max_retries),
            max_total_seconds=min(base.max_total_seconds, max_total_seconds),
            budget_name=budget_name,
        )
        try:
            yield
        finally:
            self._local.policy = previous

    def _policy(self) -> RetryPolicy:
        return getattr(self._local, "policy", None) or self.policy

    def backoff(self, attempt: int) -> float:
        base = min(self.policy.max_delay, self.policy.base_delay * 2 ** (attempt - 1))
        with self._lock:
            factor = 1.0 + self._rng.random() * self.policy.jitter
        return base * factor

    def _wait_gate(self, deadline: float) -> float:
        """Sleep until the shared pause ends; returns the pause left if it would end past ``deadline``."""
        # Loop: another thread may push the gate further while this one sleeps.
        while True:
            with self._lock:
                now = self.clock.monotonic()
                wait = self._not_before - now
            if wait <= 0:
                return 0.0
            if now + wait > deadline:
                return wait
            self.clock.sleep(wait)

    def _defer(self, delay: float) -> None:
        with self._lock:
            self._not_before = max(self._not_before, self.clock.monotonic() + delay)

    def call(self, fn: Callable[[], T], what: str = "request") -> T:
        policy = self._policy()
        start = self.clock.monotonic()
        retries = 0
        connection_retries = 0
        while True:
            paused = self._wait_gate(start + policy.max_total_seconds)
            if paused:
                raise RemoteEmbeddingError(
                    f"{self.provider_id}: requests are paused for {paused:.1f}s after a rate limit, "
                    f"past the retry budget ({policy.budget_name}: {policy.max_total_seconds:g}s)",
                    retryable=True,
                    status=429,
                )
            try:
                result = fn()
            except RemoteEmbeddingError as err:
                self.last_error = str(err)
                if not err.retryable:
                    raise
                retries += 1
                if err.kind == "connection":
                    connection_retries += 1
                elapsed = self.clock.monotonic() - start
                if retries > policy.max_retries or (
                    err.kind == "connection" and connection_retries > policy.max_connection_retries
                ):
                    raise self._give_up(err, retries, elapsed, "no retries left") from err
                from_header = err.retry_after is not None
                delay = max(0.0, err.retry_after) if err.retry_after is not None else self.backoff(retries)
                if elapsed + delay > policy.max_total_seconds:
                    why = (
                        f"the provider asks to wait {delay:g}s" if from_header else f"the next wait ({delay:.1f}s)"
                    ) + f", past {policy.budget_name} ({policy.max_total_seconds:g}s)"
                    raise self._give_up(err, retries, elapsed, why) from err
                self.events.append(RetryEvent(retries, delay, err.status, str(err), from_header))
                self._defer(delay)
                continue
            return result

    def _give_up(self, err: RemoteEmbeddingError, retries: int, elapsed: float, why: str) -> RemoteEmbeddingError:
        attempts = retries  # the failed call that triggers giving up is attempt number `retries`
        message = f"{err} (gave up after {attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f}s: {why})"
        self.last_error = message
        # Still retryable for the *next* sync: the condition is transient, this sync just cannot wait.
        return RemoteEmbeddingError(message, retryable=True, status=err.status, kind=err.kind)


# -- classification ------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], body: Any = None, *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, or None."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw:
        raw = raw.strip()
        try:
            value = float(raw)
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                parsed = None
            if parsed is not None:
                current = time.time() if now is None else now
                return max(0.0, parsed.timestamp() - current)
    for detail in _google_details(body):
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    return max(0.0, float(delay[:-1]))
                except ValueError:
                    pass
    return None


def _google_details(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            details = error.get("details")
            if isinstance(details, list):
                return [d for d in details if isinstance(d, Mapping)]  # type: ignore[misc]
    return []


def error_message(body: Any, fallback: str) -> str:
    """The human part of an error body in the shapes providers use."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error  # ollama: {"error": "..."}
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return fallback


def is_quota_exhausted(status: int, body: Any) -> bool:
    if status == 402:
        return True
    if status not in (403, 429):
        return False
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("code", "type"):
                if str(error.get(key, "")).lower() == "insufficient_quota":
                    return True
        for detail in _google_details(body):
            if str(detail.get("@type", "")).endswith("google.rpc.QuotaFailure"):
                for violation in detail.get("violations") or []:
                    quota_id = str(violation.get("quotaId", "")) + str(violation.get("quotaMetric", ""))
                    if "perday" in quota_id.lower():
                        return True
    return bool(_QUOTA_MESSAGE.search(error_message(body, "")))


def error_from_response(
    provider_id: str, status: int, headers: Mapping[str, str], body: Any, *, reason: str = ""
) -> RemoteEmbeddingError:
    message = error_message(body, reason or f"HTTP {status}")
    quota = is_quota_exhausted(status, body)
    retryable = status in RETRYABLE_STATUS and not quota
    if quota:
        hint = " (quota exhausted; not retried: add credit or wait for the quota to reset)"
    elif status in (401, 403):
        hint = " (check the API key)"
    else:
        hint = ""
    return RemoteEmbeddingError(
        f"{provider_id}: HTTP {status}: {message}{hint}",
        retryable=retryable,
        status=status,
        retry_after=parse_retry_after(headers, body) if retryable else None,
        quota_exhausted=quota,
    )


# -- JSON over httpx -----------------------------------------------------------------------------


def require_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        from mdrecall.extras import install_hint

        raise ProviderUnavailableError(f"httpx is not installed: {install_hint('remote')}") from exc
    return httpx


@dataclass
class JsonHttpClient:
    """POSTs JSON to one provider and returns parsed JSON, retrying through ``retrier``."""

    provider_id: str
    base_url: str
    headers: dict[str, str]
    timeout: float
    retrier: Retrier
    _client: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        httpx = require_httpx()
        self._httpx = httpx
        self._client = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=self.timeout)

    def post_json(self, path: str, body: Any) -> Any:
        return self.retrier.call(lambda: self._post_once(path, body), what=path)

    def _post_once(self, path: str, body: Any) -> Any:
        httpx = self._httpx
        try:
            response = self._client.post(path, json=body)
        except httpx.TimeoutException as exc:
            raise RemoteEmbeddingError(
                f"{self.provider_id}: request to {self.base_url} timed out after {self.timeout:g}s ({type(exc).__name__})",
                retryable=True,
                kind="timeout",
            ) from exc
        except httpx.TransportError as exc:
            raise RemoteEmbeddingError(
                f"{self.provider_id}: cannot reach {self.base_url}: {exc}", retryable=True, kind="connection"
            ) from exc
        try:
            payload: Any = response.json()
        except ValueError:
            payload = response.text
        if response.status_code >= 400:
            raise error_from_response(
                self.provider_id, response.status_code, response.headers, payload, reason=response.reason_phrase
            )
        if isinstance(payload, str):
            raise RemoteEmbeddingError(
                f"{self.provider_id}: expected JSON from {path}, got {payload[:200]!r}",
                retryable=True,
                status=response.status_code,
                kind="response",
            )
        return payload

    def close(self) -> None:
        self._client.close()
