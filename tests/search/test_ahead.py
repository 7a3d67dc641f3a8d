"""search/ahead.py: the query's embedding is made on a helper thread while the keyword side works,
with the same results, its errors handed back, and a Ctrl-C that stops a search waiting on it."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.errors import EmbeddingError
from mdrecall.search import ahead, keyword, pipeline
from mdrecall.search.ahead import QueryEmbedding

NOTES = {
    "MEMORY.md": "# Memory\n\n- The cat is called Miso and jumps on the keyboard.\n- We deploy on Fridays.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\nPriya fixed the CSV importer: quoted commas broke it.\nThe staging database runs on MySQL.\n",
    "memory/2026-02-10.md": ("# 2026-02-10\n\nThe staging database now runs on Postgres, moved from MySQL.\n"
                             "Miso the cat had a vet visit.\n"),
    "memory/projects.md": "# Projects\n\n## Importer\nThe CSV importer handles quoted fields now.\n\n## Infra\nStaging runs Postgres.\n",
}
QUERIES = ["what is the cat called?", "who fixed the CSV importer?", "what database does staging run on?", "vet"]


def _answers(m: Any) -> list[list[tuple[Any, ...]]]:
    out = []
    for q in QUERIES:
        r = m.search(q)
        assert r.mode == "hybrid", r.warnings
        out.append([(h.path, h.start_line, h.end_line, h.score, h.vector_score, h.text_score, h.superseded_by,
                     h.explanation) for h in r.results])  # fmt: skip
    return out


def test_query_embedding_returns_the_vector_or_raises_the_providers_error() -> None:
    assert QueryEmbedding(lambda text: [float(len(text)), 1.0], "four").result() == [4.0, 1.0]

    def refuse(text: str) -> list[float]:
        raise EmbeddingError("simulated outage", retryable=True, status=503)

    pending = QueryEmbedding(refuse, "q")
    with pytest.raises(EmbeddingError, match="simulated outage"):
        pending.result()


def test_ready_says_whether_the_result_would_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    release = threading.Event()

    def embed(text: str) -> list[float]:
        release.wait(10)
        return [1.0]

    pending = QueryEmbedding(embed, "q")
    assert not pending.ready()
    release.set()
    assert pending.result() == [1.0] and pending.ready()
    monkeypatch.setattr(ahead, "_OVERLAP", False)
    assert QueryEmbedding(embed, "q").ready()  # one core: no helper to wait on



def test_due_comes_before_ready_by_how_long_the_providers_embeddings_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work beside the embedding stops when it is due (``due``), a little before the provider's
    typical time, so the search is waiting, its GIL free, when the helper hands the vector over."""
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    monkeypatch.setattr(ahead, "_TIMES", ahead._Times())
    release = threading.Event()

    class Provider:
        def embed_query(self, text: str) -> list[float]:
            if text == "slow":
                time.sleep(0.3)
            else:
                release.wait(10)
            return [1.0]

    provider = Provider()
    first = QueryEmbedding(provider.embed_query, "unknown")
    assert not first.due()  # never timed: due only when done
    release.set()
    first.result()
    release.clear()
    # Timed now (the first took a few milliseconds): a second one is due soon, while still running.
    second = QueryEmbedding(provider.embed_query, "wait")
    time.sleep(0.05)
    assert second.due() and not second.ready()
    release.set()
    second.result()
    for _ in range(10):  # the typical time grows towards 0.3 s (smoothed)
        QueryEmbedding(provider.embed_query, "slow").result()
    typical = ahead._TIMES.typical(provider.embed_query)
    assert typical is not None and 0.15 < typical < 0.4
    release.clear()
    pending = QueryEmbedding(provider.embed_query, "wait")
    assert not pending.due() and not pending.ready()
    time.sleep(typical)
    assert pending.due() and not pending.ready()  # due, still running
    release.set()
    assert pending.result() == [1.0] and pending.due()
    # Another provider object is timed apart.
    assert ahead._TIMES.typical(Provider().embed_query) is None


def test_one_core_embeds_on_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_OVERLAP", False)
    seen: list[str] = []

    def embed(text: str) -> list[float]:
        seen.append(threading.current_thread().name)
        return [1.0]

    pending = QueryEmbedding(embed, "q")
    assert seen == []  # nothing done until asked
    assert pending.result() == [1.0] and seen == [threading.current_thread().name]


def test_keyword_side_runs_while_the_query_is_embedded_with_the_same_results(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], counting_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedding waits for the keyword search to have run: were they not concurrent, it would
    wait in vain. Answers equal those of the same searches embedded on the calling thread."""
    keyword_done = threading.Event()
    searched = keyword.keyword_search

    def keyword_search(*args: Any, **kwargs: Any) -> Any:
        found = searched(*args, **kwargs)
        keyword_done.set()
        return found

    monkeypatch.setattr(pipeline, "keyword_search", keyword_search)
    monkeypatch.setattr(ahead, "_OVERLAP", True)  # as on any machine with two cores or more
    waited: list[bool] = []

    def before(text: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            waited.append(keyword_done.wait(10))
            keyword_done.clear()

    threads = counting_provider.query_threads
    with open_manager(make_ws(NOTES), cfg(provider="counting")) as m:
        m.sync()
        counting_provider.before_query = before
        threads.clear()
        overlapped = _answers(m)
        assert waited == [True] * len(QUERIES)
        assert len(set(threads)) == 1 and threads[0].startswith("mdrecall-query-embedding")
        monkeypatch.setattr(ahead, "_OVERLAP", False)
        threads.clear()
        inline = _answers(m)
        assert set(threads) == {threading.main_thread().name}
    assert overlapped == inline and all(inline)
    # Supersession read statements ahead (pipeline.keyword_side) and still marked the same.
    assert any(hit[6] for answer in inline for hit in answer)


def test_failed_embedding_on_the_helper_thread_degrades_to_keywords(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], counting_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    with open_manager(make_ws(NOTES), cfg(provider="counting")) as m:
        m.sync()
        counting_provider.fail_queries = True
        resp = m.search("who fixed the CSV importer?")
    assert counting_provider.query_threads[-1].startswith("mdrecall-query-embedding")
    assert resp.mode == "keyword-only" and resp.degraded
    assert resp.results and resp.results[0].path == "memory/2026-01-05.md"
    assert any("query embedding failed" in w and "simulated outage" in w for w in resp.warnings)


def test_ctrl_c_stops_a_search_waiting_on_a_hung_embedding(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], counting_provider: Any
) -> None:
    """A hosted model that never answers: the interrupt ends the search at once, not at the
    provider's timeout, and the daemon thread left waiting does not keep anything open."""
    release = threading.Event()
    with open_manager(make_ws(NOTES), cfg(provider="counting")) as m:
        m.sync()
        counting_provider.before_query = lambda text: release.wait(60) and None
        timer = threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        started = time.monotonic()
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                m.search("what is the cat called?")
        finally:
            timer.cancel()
            release.set()
            counting_provider.before_query = None
        assert time.monotonic() - started < 10
        assert m.search("what is the cat called?").results  # the manager still answers


def test_helpers_are_kept_and_one_is_added_per_search_running_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    helpers = ahead._Helpers()
    monkeypatch.setattr(ahead, "_HELPERS", helpers)
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    for i in range(20):  # one after the other: one helper, reused
        assert QueryEmbedding(lambda text: [float(len(text))], "q" * i).result() == [float(i)]
    assert helpers.started == 1
    # Three at once, each waiting for the other two: they finish only if none waits behind another.
    barrier = threading.Barrier(3, timeout=10)

    def embed(text: str) -> list[float]:
        barrier.wait()
        return [1.0]

    pending = [QueryEmbedding(embed, f"q{k}") for k in range(3)]
    assert [p.result() for p in pending] == [[1.0]] * 3
    assert helpers.started == 3


def test_after_a_burst_only_a_few_idle_helpers_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    helpers = ahead._Helpers()
    monkeypatch.setattr(ahead, "_HELPERS", helpers)
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    burst = 12
    barrier = threading.Barrier(burst, timeout=10)

    def embed(text: str) -> list[float]:
        barrier.wait()
        return [0.5]

    pending = [QueryEmbedding(embed, str(k)) for k in range(burst)]
    assert all(p.result() == [0.5] for p in pending) and helpers.started == burst
    deadline = time.monotonic() + 10
    while helpers.running > ahead.KEEP_IDLE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert helpers.running == ahead.KEEP_IDLE
    assert helpers._idle == ahead.KEEP_IDLE
    for k in range(30):  # the kept ones still serve, without new threads
        assert QueryEmbedding(lambda text: [1.0], str(k)).result() == [1.0]
    assert helpers.started == burst


def test_a_forked_child_embeds_with_helpers_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    monkeypatch.setattr(ahead, "_OVERLAP", True)
    assert QueryEmbedding(lambda text: [2.0], "q").result() == [2.0]  # the parent has an idle helper now
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_embed_in_child, args=(out,))
    child.start()
    try:
        child.join(30)
        assert child.exitcode == 0 and out.get(timeout=5) == [3.0]
    finally:
        child.kill()


def _embed_in_child(out: Any) -> None:
    out.put(QueryEmbedding(lambda text: [3.0], "q").result())



CHAT = {
    "memory/2026-01-05.md": (
        "# 2026-01-05\n\n- [D1:1] Caroline: I adopted two cats from the shelter.\n"
        "- [D1:2] Melanie: That's lovely! I have a dog named Rex.\n- [D1:3] Caroline: Do you walk Rex every day?\n"
        "- [D1:4] Melanie: Yes, twice a day along the river.\n"
    ),
    "memory/2026-03-10.md": (
        "# 2026-03-10\n\n- [D2:1] Caroline: I adopted a third cat last week.\n- [D2:2] Melanie: Rex learned to swim in the river.\n"
        "- [D2:3] Melanie: How many cats do you have now, Caroline?\n- [D2:4] Caroline: Three cats now, all from the shelter.\n"
    ),
}
CHAT_QUERIES = ["How many cats does Caroline have?", "Where does Melanie walk Rex?", "What did Melanie's dog learn?",
                "Who adopted cats from the shelter?"]  # fmt: skip


def test_work_done_ahead_gives_the_same_answers_and_is_not_done_again(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], counting_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the query is embedded the keyword candidates get the named-speaker step and their
    statements read (``keyword_side``); after the vector side, the same hits take that outcome
    instead of doing it again, and the answers are those of a search that did nothing ahead."""
    phase = ["before"]
    calls = {"before": 0, "after": 0}
    stating, finish = pipeline._stating, pipeline.Retrieval.finish

    def counted_stating(*args: Any) -> Any:
        calls[phase[0]] += 1
        return stating(*args)

    def finish_marked(self: Any) -> Any:
        phase[0] = "after"
        return finish(self)

    monkeypatch.setattr(pipeline, "_stating", counted_stating)
    monkeypatch.setattr(pipeline.Retrieval, "finish", finish_marked)

    def answers(m: Any) -> tuple[list[Any], dict[str, int]]:
        out = []
        for key in calls:
            calls[key] = 0
        for q in CHAT_QUERIES:
            phase[0] = "before"
            r = m.search(q, min_score=0)
            assert r.mode == "hybrid", r.warnings
            out.append([(h.path, h.start_line, h.end_line, h.score, h.superseded_by, h.explanation) for h in r.results])
        return out, dict(calls)

    with open_manager(make_ws(CHAT), cfg(provider="counting", query={"debugScores": True})) as m:
        m.sync()
        monkeypatch.setattr(ahead, "_OVERLAP", False)  # one core: the embedding is made when asked, nothing ahead
        inline, inline_calls = answers(m)
        monkeypatch.setattr(ahead, "_OVERLAP", True)
        monkeypatch.setattr(ahead.QueryEmbedding, "due", lambda self: False)  # a slow embedding: all of it ahead
        overlapped, ahead_calls = answers(m)
    assert overlapped == inline and all(inline)
    assert inline_calls["before"] == 0 and inline_calls["after"] > 0
    assert ahead_calls["before"] > 0, "the named-speaker step ran ahead"
    assert ahead_calls["after"] < inline_calls["after"], "and was not run again on the same hits"


def test_the_search_goes_on_once_the_helper_has_taken_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search waits (its GIL free) until the helper takes the embedding, so the helper reaches
    the provider's native code at once, not at the search's next blocking call; a helper that does
    not come within the handover time is not waited for."""
    monkeypatch.setattr(ahead, "_OVERLAP", True)
    monkeypatch.setattr(ahead, "_HANDOVER_S", 10.0)
    began = threading.Event()
    release = threading.Event()

    def embed(text: str) -> list[float]:
        began.set()
        release.wait(10)
        return [1.0]

    pending = QueryEmbedding(embed, "q")
    assert began.is_set()  # the constructor returned after the helper had begun
    release.set()
    assert pending.result() == [1.0]

    # A helper that cannot start (the pool's queue held up): the search goes on after the handover time.
    monkeypatch.setattr(ahead, "_HANDOVER_S", 0.05)
    held = threading.Event()
    monkeypatch.setattr(ahead._HELPERS, "run", lambda job: threading.Timer(0.5, lambda: (job.compute(), job.finish())).start())
    t0 = time.perf_counter()
    late = QueryEmbedding(lambda text: (held.set(), [2.0])[1], "q")
    assert time.perf_counter() - t0 < 0.4 and not held.is_set()
    assert late.result() == [2.0]
