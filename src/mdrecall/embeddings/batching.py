"""Splitting texts into provider-sized requests and running them with bounded concurrency.

The reference system sized batches by bytes only, so providers that cap the number of inputs per request
(16, 20, 64, ...) rejected every large batch (spec 5.2). Here a batch is bounded by the provider's item
cap *and* its per-request token budget; a single text above the token budget still goes alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from mdrecall.embeddings.base import BatchDoneFn, EmbeddingProvider, ProgressFn
from mdrecall.errors import EmbeddingError


def plan_batches(
    texts: Sequence[str], token_counts: Sequence[int], max_items: int, max_tokens: int | None
) -> list[list[int]]:
    """Greedy, order-preserving groups of indexes, each at most ``max_items`` long and at most
    ``max_tokens`` tokens in total (unless a single text alone exceeds it)."""
    if len(texts) != len(token_counts):
        raise ValueError(f"{len(texts)} texts but {len(token_counts)} token counts")
    if max_items < 1:
        raise ValueError("max_items must be at least 1")
    batches: list[list[int]] = []
    current: list[int] = []
    current_tokens = 0
    for index, tokens in enumerate(token_counts):
        over_tokens = max_tokens is not None and current and current_tokens + tokens > max_tokens
        if current and (len(current) >= max_items or over_tokens):
            batches.append(current)
            current, current_tokens = [], 0
        current.append(index)
        current_tokens += tokens
    if current:
        batches.append(current)
    return batches


def _token_counts(provider: EmbeddingProvider, texts: Sequence[str]) -> list[int]:
    counts = list(provider.count_tokens_many(texts))
    cap = provider.max_input_tokens
    # Longer inputs are truncated (by us or the model) to the input limit; plan with what is sent.
    return [min(c, cap) for c in counts]


def embed_in_batches(
    provider: EmbeddingProvider,
    texts: Sequence[str],
    *,
    concurrency: int | None = None,
    progress: ProgressFn | None = None,
    on_batch: BatchDoneFn | None = None,
    max_items: int | None = None,
    max_tokens: int | None = None,
) -> list[list[float]]:
    """Embed ``texts`` as documents, one vector per text in order.

    ``progress(completed_texts, total_texts)`` is called from the calling thread after each batch.
    On the first failed batch the remaining batches are cancelled and the error is raised; batches that
    already finished were reported through ``on_batch`` so a caller can keep (cache) them.
    Providers with an opt-in batch API (``provider.batch_api``) use it for large inputs first and fall
    back to inline requests when it fails.
    """
    total = len(texts)
    if total == 0:
        return []
    results: list[list[float] | None] = [None] * total

    batch_api = provider.batch_api
    if batch_api is not None and batch_api.should_use(total):
        got = batch_api.run(list(texts), progress=progress)  # {index: vector}; never raises EmbeddingError
        if got:
            indexes = sorted(got)
            for i in indexes:
                results[i] = got[i]
            if on_batch is not None:
                on_batch(indexes, [got[i] for i in indexes])

    todo = [i for i in range(total) if results[i] is None]
    if todo:
        todo_texts = [texts[i] for i in todo]
        counts = _token_counts(provider, todo_texts)
        items_cap = max_items or provider.max_batch_items
        tokens_cap = max_tokens if max_tokens is not None else provider.max_batch_tokens
        batches = [[todo[j] for j in group] for group in plan_batches(todo_texts, counts, items_cap, tokens_cap)]
        workers = max(1, concurrency if concurrency is not None else provider.concurrency)
        _run_batches(provider, texts, batches, results, workers, total - len(todo), total, progress, on_batch)

    return results  # type: ignore[return-value]  # every slot is filled or an error was raised


def _run_batches(
    provider: EmbeddingProvider,
    texts: Sequence[str],
    batches: list[list[int]],
    results: list[list[float] | None],
    workers: int,
    done: int,
    total: int,
    progress: ProgressFn | None,
    on_batch: BatchDoneFn | None,
) -> None:
    def run(indexes: list[int]) -> list[list[float]]:
        vectors = provider.embed_documents([texts[i] for i in indexes])
        if len(vectors) != len(indexes):
            raise EmbeddingError(
                f"{provider.id}: returned {len(vectors)} vectors for {len(indexes)} texts", retryable=True
            )
        return vectors

    def finish(indexes: list[int], vectors: list[list[float]]) -> None:
        nonlocal done
        for i, vector in zip(indexes, vectors):
            results[i] = vector
        done += len(indexes)
        if on_batch is not None:
            on_batch(indexes, vectors)
        if progress is not None:
            progress(done, total)

    if workers == 1 or len(batches) == 1:
        for indexes in batches:
            finish(indexes, run(indexes))
        return

    queue = list(reversed(batches))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"mdrecall-embed-{provider.id}") as pool:
        running: dict[Future[list[list[float]]], list[int]] = {}
        try:
            while queue or running:
                while queue and len(running) < workers:
                    indexes = queue.pop()
                    running[pool.submit(run, indexes)] = indexes
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    indexes = running.pop(future)
                    finish(indexes, future.result())
        except BaseException:
            # Do not start new batches; let the in-flight ones end (they cannot be interrupted).
            queue.clear()
            for future in running:
                future.cancel()
            raise
