"""MMR re-ranking: near-duplicates give way to different, still relevant results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mdrecall import open_manager
from mdrecall.search.mmr import jaccard, mmr_rerank


def test_jaccard() -> None:
    assert jaccard({"a", "b"}, {"a", "b"}) == 1.0
    assert jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert jaccard(set(), {"a"}) == 0.0


def test_rerank_demotes_duplicates() -> None:
    items = [(1.0, "kiwi harvest north orchard"), (0.95, "kiwi harvest north orchard"), (0.7, "kiwi export by sea"), (0.2, "unrelated")]
    plain = mmr_rerank(items, lambda i: i[0], lambda i: i[1], 1.0)
    assert plain == items  # lambda 1: relevance only
    diverse = mmr_rerank(items, lambda i: i[0], lambda i: i[1], 0.7)
    assert [i[1] for i in diverse[:2]] == ["kiwi harvest north orchard", "kiwi export by sea"]
    assert sorted(diverse) == sorted(items)  # a permutation, nothing dropped


def test_rerank_cjk_duplicates() -> None:
    items = [(1.0, "王磊喜欢绿茶"), (0.98, "王磊喜欢绿茶。"), (0.8, "北京烤鸭店聚餐"), (0.1, "x")]
    diverse = mmr_rerank(items, lambda i: i[0], lambda i: i[1], 0.7)
    assert diverse[1][1] == "北京烤鸭店聚餐"


def test_mmr_option_in_search(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    dup = "- Kiwi harvest report: the north orchard kiwi harvest yielded four tonnes of kiwi.\n"
    ws = make_ws(
        {
            "memory/a.md": dup,
            "memory/b.md": dup.replace("four", "4"),
            "memory/c.md": "- Kiwi export: shipping kiwi harvest crates through the port of Leixões.\n",
            "memory/d.md": "- Misc: " + "unrelated filler words about weather and traffic " * 6 + "kiwi.\n",
        }
    )
    with open_manager(ws, cfg()) as m:
        plain = [r.path for r in m.search("kiwi harvest", min_score=0)]
    with open_manager(ws, cfg(db="mmr.sqlite", query={"mmr": {"enabled": True, "lambda": 0.5}})) as m:
        resp = m.search("kiwi harvest", min_score=0)
        diverse = [r.path for r in resp]
    assert set(plain[:2]) == {"memory/a.md", "memory/b.md"}
    assert diverse[0] in {"memory/a.md", "memory/b.md"} and diverse[1] == "memory/c.md"
    assert sorted(plain) == sorted(diverse)
    assert all(0 <= r.score <= 1 for r in resp)
