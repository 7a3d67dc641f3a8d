"""The search path's text caches forget what nobody asked for in a while (search/lru.py): under a
steady churn of edits, what they hold levels off at what recent searches used (issue 28's soak),
instead of growing with every text the files ever held until a count is reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdrecall.search import lru, mmr, restatement
from mdrecall.search.corpus import IndexCorpus, PorterTokens
from mdrecall.search.lru import IDLE_S, IdleLru
from mdrecall.store.db import IndexDB, StoreOptions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_entries_unused_for_the_idle_time_are_dropped() -> None:
    clock = Clock()
    cache: IdleLru[str, int] = IdleLru(100, idle_s=60.0, clock=clock)
    cache.put("old", 1)
    cache.put("used", 2)
    clock.now += 50
    assert cache.get("used") == 2  # used again: its idle time starts over
    clock.now += 20  # "old" unused for 70 s, "used" for 20 s
    cache.put("new", 3)
    assert cache.get("old") is None
    assert (cache.get("used"), cache.get("new"), len(cache)) == (2, 3, 2)


def test_the_count_bound_drops_the_least_recently_used() -> None:
    cache: IdleLru[int, int] = IdleLru(3, clock=Clock())
    for i in range(3):
        cache.put(i, i)
    cache.get(0)
    cache.put(3, 3)
    assert [cache.get(i) for i in range(4)] == [0, None, 2, 3]


def test_a_steady_churn_levels_off() -> None:
    """A new text every second, each asked for during the next 50 s: from then on the cache holds
    the texts of the last 50 + 60 s, not all of them (the count bound alone takes 4096 s to reach)."""
    clock = Clock()
    cache: IdleLru[str, int] = IdleLru(4096, idle_s=60.0, clock=clock)
    sizes = []
    for second in range(1800):
        clock.now += 1
        cache.put(f"text {second}", second)
        for back in range(0, 60, 10):
            cache.get(f"text {second - back}")
        sizes.append(len(cache))
    assert max(sizes[120:]) == min(sizes[120:]) == 111


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(lru, "_now", fake)
    return fake


def test_the_corpus_forgets_an_edited_chunks_old_text(tmp_path: Path, clock: Clock) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        corpus = IndexCorpus(db)
        corpus.profile("the planner moves to v0.5\nkumquats ripen in May")
        corpus.tokens("an old line")
        clock.now += IDLE_S + 1
        corpus.profile("the planner moves to v0.6")
        corpus.tokens("a new line")
        assert len(corpus._profiles) == 1
        # "an old line" went, "a new line" stays (profiles tokenise a whole text at once, without
        # the line cache: IndexCorpus.line_tokens)
        assert len(corpus._token_cache) == 1
    finally:
        db.close()


def test_the_sentence_and_mmr_caches_forget_old_texts(clock: Clock) -> None:
    tokens = PorterTokens().tokens
    owner = PorterTokens()
    restatement._sentences("Alice moved to Berlin in 2024.", owner.tokens)
    mmr._tokens_cache.clear()
    mmr._tokens("the planner moves to v0.5", key=1)
    clock.now += IDLE_S + 1
    restatement._sentences("Alice moved to Paris in 2025.", owner.tokens)
    mmr._tokens("the planner moves to v0.6", key=1)
    assert len(restatement._PARSED[owner]) == 1
    assert len(mmr._tokens_cache) == 1
    assert tokens("moves") == ["move"]


def test_a_profile_from_one_call_equals_the_line_by_line_one(tmp_path: Path) -> None:
    """IndexCorpus profiles a whole text with one tokenizer call; every count, line mask and length
    must be what tokenising each line alone gives (blank lines, a line without a token, diacritics,
    CJK, trailing newlines), down to the order of the keys."""
    from mdrecall.search.relevance import text_profile

    class LineByLine:
        def __init__(self, corpus: IndexCorpus) -> None:
            self.corpus = corpus

        def tokens(self, text: str) -> list[str]:
            return self.corpus.tokens(text)

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        corpus = IndexCorpus(db)
        texts = ["", "\n", "\n\nabc\n\n", "x\n", "\nx", "- [D1:3] Melanie: Running dogs, 2023!\n--\nÉcole naïve",
                 "日本語のテキスト\n中文 text\n", "Caroline said the adoption-agency called.\n\n  \nv0.4 ships 2026-03-02 ships",
                 "dogs run\ncats\n\ndogs and dogs, cats\nrunning dogs"]
        for text in texts:
            whole, alone = corpus.profile(text), text_profile(text, LineByLine(corpus))
            assert (whole.lines, whole.counts, whole.length) == (alone.lines, alone.counts, alone.length), text
            assert list(whole.counts) == list(alone.counts), text
            # Each stem's lines, worked out when asked (LineMasks), asked in another order than
            # the keys': the same masks, the same stems, in the same order.
            assert {stem: whole.line_masks[stem] for stem in reversed(list(alone.line_masks))} == alone.line_masks, text
            assert list(whole.line_masks) == list(alone.line_masks) and len(whole.line_masks) == len(alone.line_masks), text
            for absent in ("", "zzzz", "日本"):
                if absent not in alone.line_masks:
                    with pytest.raises(KeyError):
                        whole.line_masks[absent]
    finally:
        db.close()


def test_lookups_without_the_lock_hold_under_threads() -> None:
    """``get`` takes no lock: 4 threads reading while 2 insert past the bound and 1 clears never
    see an error or another key's value, and the bound holds."""
    import threading

    cache: IdleLru[int, int] = IdleLru(64)
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                for k in range(200):
                    found = cache.get(k)
                    assert found is None or found == k * 3
        except BaseException as exc:  # reported below
            errors.append(exc)

    def write(offset: int) -> None:
        try:
            for round_ in range(60):
                for k in range(offset, 200, 2):
                    cache.put(k, k * 3)
                if offset == 0 and round_ % 10 == 0:
                    cache.clear()
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(4)]
    writers = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == [] and len(cache) <= 64
