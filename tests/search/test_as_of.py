""""As known then" (``as_of``): notes dated by then, transcript messages before it, undated files
only when unchanged since, decay measured from then; every backend answers or says it cannot."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.contract import AS_OF_UNSUPPORTED, ManagerBase, search_as_of, supports_as_of
from mdrecall.search.asof import parse_as_of, search_times
from mdrecall.types import SearchHit, SearchResponse

ROOT = ".openclaw/sessions/main/transcripts"


def _line(role: str, content: str, timestamp: str | None) -> str:
    record: dict[str, Any] = {"role": role, "content": content}
    if timestamp is not None:
        record["timestamp"] = timestamp
    return json.dumps(record) + "\n"


FILES = {
    "MEMORY.md": "# Memory\n\n- The mascot of the team is a red panda.\n",
    "memory/2026-03-02.md": "# 2026-03-02\n\n- The mascot vote: an otter for now.\n",
    "memory/2026-03-31.md": "# 2026-03-31\n\n- Mascot: the otter won the vote.\n",
    "memory/2026-04-15.md": "# 2026-04-15\n\n- Mascot changed: a heron, after the rebrand.\n",
    f"{ROOT}/chat.jsonl": (
        _line("user", "Let us talk mascot ideas: the otter.", "2026-03-20T10:00:00Z")
        + _line("assistant", "An otter mascot is friendly.", None)  # takes the previous message's time
        + _line("user", "Mascot update: the heron is our new pick.", "2026-04-20T10:00:00Z")
    ),
}


@pytest.fixture
def ws(make_ws: Callable[..., Path]) -> Path:
    root = make_ws(FILES)
    when = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    os.utime(root / "MEMORY.md", (when, when))
    return root


def _config(cfg: Callable[..., dict], **extra: Any) -> dict:
    return cfg(sources=["memory", "sessions"], sessions={"visibility": "all"}, **extra)


def _cited(resp: SearchResponse) -> list[str]:
    return [r.citation for r in resp.results]


def test_only_what_was_written_by_then(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, _config(cfg)) as m:
        now = m.search("mascot", min_score=0)
        then = m.search("mascot", min_score=0, as_of=datetime(2026, 3, 31, 12, 0, tzinfo=UTC))
    assert {r.path for r in now.results} >= {"memory/2026-04-15.md", f"{ROOT}/chat.jsonl"}
    paths = {r.path for r in then.results}
    # A note of the as-of day counts (its day is on or before); a later one does not.
    assert {"memory/2026-03-02.md", "memory/2026-03-31.md", "MEMORY.md"} <= paths
    assert "memory/2026-04-15.md" not in paths
    # The transcript is cut before the later message: the first two (the second has no
    # timestamp and takes the first's) stay, cited as such.
    chat = [r for r in then.results if r.path == f"{ROOT}/chat.jsonl"]
    assert chat and all(r.end_line <= 2 for r in chat) and all("heron" not in r.snippet for r in chat)
    assert any("later memor" in w for w in then.warnings)


def test_a_bare_date_means_that_whole_day(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, _config(cfg)) as m:
        by_date = m.search("mascot heron", min_score=0, as_of=date(2026, 4, 20))  # type: ignore[arg-type]
        before = m.search("mascot heron", min_score=0, as_of=datetime(2026, 4, 20, 9, 59, tzinfo=UTC))
    assert any(r.path == f"{ROOT}/chat.jsonl" and r.end_line == 3 for r in by_date.results)
    assert not any(r.path == f"{ROOT}/chat.jsonl" and r.end_line == 3 for r in before.results)
    assert parse_as_of("2026-04-20") == datetime(2026, 4, 20, 23, 59, 59, 999999, tzinfo=UTC)
    assert parse_as_of("2026-04-20T10:00:00+02:00").utcoffset() == timedelta(hours=2)
    assert parse_as_of("2026-04-20T10:00Z") == datetime(2026, 4, 20, 10, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="not an ISO date"):
        parse_as_of("last spring")


def test_notes_are_compared_in_the_as_of_zone(ws: Path, cfg: Callable[..., dict]) -> None:
    # 23:30 on March 31 in New York is already April 1 in UTC: the April note is still unknown.
    new_york = timezone(timedelta(hours=-4))
    with open_manager(ws, _config(cfg)) as m:
        resp = m.search("mascot", min_score=0, as_of=datetime(2026, 3, 31, 23, 30, tzinfo=new_york))
    paths = {r.path for r in resp.results}
    assert "memory/2026-03-31.md" in paths and "memory/2026-04-15.md" not in paths


def test_undated_files_changed_since_are_left_out_and_named(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, _config(cfg)) as m:
        resp = m.search("red panda mascot", min_score=0, as_of=datetime(2026, 1, 15, tzinfo=UTC))
    assert "MEMORY.md" not in {r.path for r in resp.results}
    assert any("undated file(s) changed since then left out (MEMORY.md)" in w for w in resp.warnings)


def test_nothing_known_then_is_said(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, _config(cfg)) as m:
        resp = m.search("heron rebrand", as_of=datetime(2026, 3, 1, tzinfo=UTC))
    assert resp.results == [] and resp.reason == "nothing relevant"
    assert any(w.startswith("nothing relevant: nothing known as of 2026-03-01") for w in resp.warnings)


def test_decay_and_relative_dates_count_from_then(ws: Path, cfg: Callable[..., dict]) -> None:
    decay = {"temporalDecay": {"enabled": True, "halfLifeDays": 30}}
    as_of = datetime(2026, 4, 1, tzinfo=UTC)
    with open_manager(ws, _config(cfg, query=decay)) as m:
        then = {r.path: r for r in m.search("mascot", min_score=0, as_of=as_of).results}
        explicit = {r.path: r for r in m.search("mascot", min_score=0, as_of=as_of, now=as_of + timedelta(days=60)).results}
    d_then = then["memory/2026-03-31.md"].explanation["decay"]["multiplier"]  # type: ignore[index]
    assert d_then == pytest.approx(0.5 ** (1 / 30), rel=0.02)  # one day old, as of then
    assert explicit["memory/2026-03-31.md"].explanation["decay"]["multiplier"] < d_then  # type: ignore[index]
    assert search_times(None, as_of) == (as_of, as_of)


def test_later_markup_does_not_apply_as_of_before_it(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "memory/2026-03-02.md": "# n\n\n- The standup bell is a gong.\n",
        "memory/2026-05-01.md": "# n\n\n- The standup bell is now a chime. <!-- supersedes: memory/2026-03-02.md#L3 -->\n",
    })  # fmt: skip
    with open_manager(ws, cfg()) as m:
        now = m.search("standup bell", min_score=0)
        then = m.search("standup bell", min_score=0, as_of=datetime(2026, 4, 1, tzinfo=UTC))
    assert {r.path: r.superseded_by for r in now.results}["memory/2026-03-02.md"] == "memory/2026-05-01.md#L3"
    assert [(r.path, r.superseded_by) for r in then.results] == [("memory/2026-03-02.md", None)]


def test_hybrid_as_of_with_the_real_model(ws: Path, cfg: Callable[..., dict], local_provider) -> None:  # type: ignore[no-untyped-def]
    from mdrecall.testing import plugin, registered

    with registered(plugin(providers={"minilm": lambda config: local_provider})):
        with open_manager(ws, _config(cfg, provider="minilm")) as m:
            resp = m.search("which animal represents the team", min_score=0, as_of=datetime(2026, 3, 31, tzinfo=UTC))
    assert resp.mode == "hybrid" and resp.results
    assert all(r.path != "memory/2026-04-15.md" and "heron" not in r.snippet for r in resp.results)


class OldStyleBackend(ManagerBase):
    """A third-party backend written before ``as_of`` was in the contract."""

    backend = "old-style"

    def search(self, query: str, max_results: int | None = None, min_score: float | None = None,
               session_key: str | None = None, sources: Sequence[str] | None = None,
               now: datetime | None = None) -> SearchResponse:  # type: ignore[override]  # fmt: skip
        self.asked_now = now
        hit = SearchHit("memory/2026-05-01.md", 1, 1, 0.9, "x", "memory", "memory/2026-05-01.md#L1")
        return SearchResponse([hit], "keyword-only", "none", "old")

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> Any:
        raise NotImplementedError

    def status(self) -> Any:
        raise NotImplementedError

    def sync(self, force: bool = False, progress: Any = None) -> Any:
        raise NotImplementedError

    def probe_embedding_availability(self) -> Any:
        raise NotImplementedError

    def probe_vector_availability(self) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_backend_without_as_of_answers_now_and_says_so(tmp_path: Path) -> None:
    from mdrecall.config import MemoryConfig

    old = OldStyleBackend(tmp_path, MemoryConfig())
    assert not supports_as_of(old)
    when = datetime(2026, 3, 1, tzinfo=UTC)
    resp = search_as_of(old, "x", as_of=when)
    assert resp.results and resp.warnings == [AS_OF_UNSUPPORTED.format(backend="old-style")]
    assert old.asked_now == when  # decay still counts from then
    assert search_as_of(old, "x").warnings == []


def test_the_async_search_passes_as_of_only_where_it_is_taken(tmp_path: Path, ws: Path, cfg: Callable[..., dict]) -> None:
    import anyio

    from mdrecall.config import MemoryConfig

    old = OldStyleBackend(tmp_path, MemoryConfig())
    assert anyio.run(old.asearch, "x").warnings == []  # no as_of: called exactly as before it existed
    later = anyio.run(lambda: old.asearch("x", as_of=datetime(2026, 3, 1, tzinfo=UTC)))
    assert later.warnings == [AS_OF_UNSUPPORTED.format(backend="old-style")]
    with open_manager(ws, _config(cfg)) as m:
        then = anyio.run(lambda: m.asearch("mascot", min_score=0, as_of=datetime(2026, 3, 31, tzinfo=UTC)))
    assert then.results and "memory/2026-04-15.md" not in {r.path for r in then.results}
