"""An English-only embedding model must not decide the ranking of a Chinese query."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mdrecall import open_manager
from mdrecall.text import cjk_share

NOTES = {
    "MEMORY.md": "# Memory\n- 王磊喜欢绿茶，不喝咖啡。\n",
    "memory/2026-02-01.md": "# 2026-02-01\n- The team picked Postgres for the billing service.\n",
    "memory/2026-02-02.md": "# 2026-02-02\n- 北京办公室下周装修，会议改到周四下午三点。\n",
}


def test_cjk_share() -> None:
    assert cjk_share("王磊喜欢什么茶？") == 1.0
    assert cjk_share("which tea does Wang Lei like?") == 0.0
    assert 0.1 < cjk_share("王磊 likes which tea?") < 0.5  # characters, not words
    assert cjk_share("?!") == 0.0


def test_bundled_model_is_not_used_for_chinese_queries(make_ws: Callable[..., Path], cfg: Callable[..., dict], local_provider) -> None:  # type: ignore[no-untyped-def]
    from mdrecall.testing import plugin, registered

    with registered(plugin(providers={"bundled-en": lambda config: local_provider})):
        assert local_provider.languages == ("en",)
        with open_manager(make_ws(NOTES), cfg(provider="bundled-en")) as m:
            zh = m.search("王磊喜欢喝什么？")
            assert zh.results and zh.results[0].path == "MEMORY.md"
            assert zh.mode == "keyword-only" and any("reads only en" in w for w in zh.warnings)
            en = m.search("which database did the team pick for billing?")
            assert en.mode == "hybrid" and not any("reads only" in w for w in en.warnings)
            assert en.results[0].path == "memory/2026-02-01.md"
            mixed = m.search("Postgres billing 服务")  # mostly Latin: vectors still help
            assert mixed.mode == "hybrid"
        with open_manager(make_ws(NOTES), cfg(db="off.sqlite", provider="bundled-en", query={"languageCheck": False})) as m:
            assert m.search("王磊喜欢喝什么？").mode == "hybrid"  # switched off: the vectors are used
        # Vector-only configuration: a Chinese query still gets keyword answers, not nothing.
        with open_manager(make_ws(NOTES), cfg(db="vec.sqlite", provider="bundled-en", query={"hybrid": {"enabled": False}})) as m:
            assert m.search("which database did the team pick for billing?").mode == "vector-only"
            zh = m.search("王磊喜欢喝什么？")
            assert zh.mode == "keyword-only" and zh.results and zh.results[0].path == "MEMORY.md"
