"""Keyword search: natural-language questions match, CJK words of one or two characters are found."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mdrecall import open_manager

NOTES = {
    "MEMORY.md": "# Memory\n\n- Decision: we picked Postgres as the database for recipes.\n- Hosting is on Fly.io in Madrid.\n",
    "memory/people.md": "# People\n\n- Priya designs the meal planner screens.\n- Tomás owns the importer and migrations.\n",
    "memory/meetings.md": "# Meetings\n\n- The weekly meeting moved to Thursdays after the retro.\n",
    "memory/团队笔记.md": "# 团队笔记\n\n- 王磊喜欢绿茶，不喝咖啡。\n- Mira 的猫叫饼干，开会时经常跳到键盘上。\n- 年底团建候选地点：波尔图。\n",
    "memory/日本語.md": "# メモ\n\n- 東京の会議は水曜日です。\n- 猫カフェに行きました。\n",
    "memory/한국어.md": "# 메모\n\n- 서울 사무실은 월요일에 닫습니다.\n",
}


@pytest.fixture
def kw(make_ws: Callable[..., Path], cfg: Callable[..., dict]):  # type: ignore[no-untyped-def]
    with open_manager(make_ws(NOTES), cfg()) as m:
        m.sync()
        yield m


def _top(m, query: str, **kw) -> str | None:  # type: ignore[no-untyped-def]
    resp = m.search(query, **kw)
    return resp.results[0].path if resp.results else None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What database did we pick for the recipes?", "MEMORY.md"),
        ("who owns the importer?", "memory/people.md"),
        ("When are the meetings now?", "memory/meetings.md"),  # inflection: meetings -> meeting
        ("where is hosting?", "MEMORY.md"),
        ("Who designs meal-planner screens??", "memory/people.md"),  # punctuation inside words
    ],
)
def test_natural_language_questions_match(kw, question: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    resp = kw.search(question)
    assert resp.mode == "keyword-only"
    assert resp.results and resp.results[0].path == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("茶", "memory/团队笔记.md"),  # one character inside a sentence (绿茶)
        ("咖啡", "memory/团队笔记.md"),  # two characters
        ("王磊喜欢什么茶？", "memory/团队笔记.md"),  # a question with scaffolding
        ("波尔图", "memory/团队笔记.md"),
        ("水曜日", "memory/日本語.md"),
        ("東京", "memory/日本語.md"),
        ("서울", "memory/한국어.md"),
    ],
)
def test_cjk_words_are_found(kw, query: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    paths = [r.path for r in kw.search(query).results]
    assert paths and paths[0] == expected


def test_single_character_finds_every_file_that_has_it(kw) -> None:  # type: ignore[no-untyped-def]
    paths = {r.path for r in kw.search("猫", min_score=0).results}
    assert paths == {"memory/团队笔记.md", "memory/日本語.md"}


def test_no_match_returns_nothing(kw) -> None:  # type: ignore[no-untyped-def]
    assert kw.search("xylophone quartet", min_score=0).results == []
    assert kw.search("   ").results == []
    assert kw.search('"unbalanced AND (quotes', min_score=0).results == []  # FTS syntax never leaks


def test_trigram_tokenizer_still_finds_short_cjk_words(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    with open_manager(make_ws(NOTES), cfg(query={"fts": {"tokenizer": "trigram"}})) as m:
        assert _top(m, "咖啡") == "memory/团队笔记.md"
        assert _top(m, "猫") in {"memory/团队笔记.md", "memory/日本語.md"}
        assert _top(m, "importer migrations") == "memory/people.md"
