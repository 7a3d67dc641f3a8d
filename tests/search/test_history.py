"""The history of one fact: ``fact_history`` (Python), ``mdrecall history`` (CLI) and the
``memory_history`` tool (agent tools, and MCP over the real client)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

import mdrecall
from mdrecall import fact_history, open_manager
from mdrecall.agent.tools import MemoryTools

FILES = {
    "MEMORY.md": "# Memory\n\n- Team lunch is on Fridays.\n- The build server runs on a Mac mini in the office.\n",
    "memory/2026-01-12.md": "# 2026-01-12\n\n- Standup notes.\n- The build server runs on a Mac mini, 2 runners.\n",
    "memory/2026-03-03.md": "# 2026-03-03\n\n- The build server now runs on Hetzner with 6 runners. <!-- supersedes: MEMORY.md#L4 -->\n",
    "memory/2026-04-20.md": (
        "# 2026-04-20\n\n<!-- supersedes: memory/2026-03-03.md#L3 -->\n"
        "- The build server moved to GitHub-hosted runners; Hetzner is gone.\n"
    ),
}


@pytest.fixture
def ws(make_ws: Callable[..., Path]) -> Path:
    root = make_ws(FILES)
    when = datetime(2025, 12, 1, tzinfo=UTC).timestamp()
    os.utime(root / "MEMORY.md", (when, when))
    return root


def test_fact_history_lists_the_statements_oldest_first(ws: Path, cfg: Callable[..., dict]) -> None:
    assert mdrecall.fact_history is fact_history
    with open_manager(ws, cfg()) as m:
        history = fact_history(m, "build server runners")
    got = [(s.citation, s.stated, s.status, s.superseded_by) for s in history.statements]
    assert got == [
        # Detected: 2 runners, then 6 (the newest note names no number: markup says it there).
        ("memory/2026-01-12.md#L4", "2026-01-12", "superseded", "memory/2026-03-03.md#L3"),
        ("memory/2026-03-03.md#L3", "2026-03-03", "superseded", "memory/2026-04-20.md#L4"),  # markup
        ("memory/2026-04-20.md#L4", "2026-04-20", "current", None),
        # Undated: after the dated ones, with when its file last changed (markup supersedes it).
        ("MEMORY.md#L4", "undated (file last changed 2025-12-01)", "superseded", "memory/2026-03-03.md#L3"),
    ]
    assert [s.citation for s in history.current] == ["memory/2026-04-20.md#L4"]
    data = history.to_dict()
    assert data["statements"][0]["supersededBy"] == "memory/2026-03-03.md#L3"
    assert data["statements"][0]["statedAt"] == "2026-01-12T00:00:00+00:00"
    assert "Hetzner is gone" in data["statements"][2]["snippet"]


def test_history_as_of_shows_what_was_current_then(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, cfg()) as m:
        then = fact_history(m, "build server runners", as_of=datetime(2026, 3, 31, tzinfo=UTC))
        with pytest.raises(ValueError, match="topic is required"):
            fact_history(m, "  ")
    assert [(s.citation, s.status) for s in then.statements if s.stated_at] == [
        ("memory/2026-01-12.md#L4", "superseded"),
        ("memory/2026-03-03.md#L3", "current"),  # its replacement was written later
    ]
    assert then.to_dict()["asOf"] == "2026-03-31T00:00:00+00:00"


def test_cli_history(ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from mdrecall.cli import main

    common = ["-w", str(ws), "-c", "provider=none"]
    assert main(["history", "build server runners", *common]) == 0
    out = capsys.readouterr().out
    assert out.startswith("History of 'build server runners': 4 statement(s), oldest first")
    assert "2026-01-12  memory/2026-01-12.md#L4  [superseded by memory/2026-03-03.md#L3]" in out
    assert "2026-04-20  memory/2026-04-20.md#L4  [current]" in out
    assert out.index("2026-01-12  ") < out.index("2026-03-03  ") < out.index("2026-04-20  ")
    assert main(["history", "build server runners", *common, "--as-of", "2026-03-31", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["asOf"].startswith("2026-03-31T23:59:59")
    assert [s["status"] for s in data["statements"] if s["statedAt"]] == ["superseded", "current"]
    assert main(["history", "capital of Mongolia", *common]) == 1
    assert "no statements found for 'capital of Mongolia'" in capsys.readouterr().err
    assert main(["history", "x", *common, "--as-of", "soon"]) == 2


def test_cli_search_shows_supersession_and_takes_as_of(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mdrecall.cli import main

    common = ["-w", str(ws), "-c", "provider=none"]
    assert main(["search", "build server runners Hetzner", *common]) == 0
    out = capsys.readouterr().out
    assert "   superseded by memory/2026-04-20.md#L4" in out
    assert main(["search", "build server runners Hetzner", *common, "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    marked = {r["path"]: r.get("supersededBy") for r in results}
    assert marked["memory/2026-03-03.md"] == "memory/2026-04-20.md#L4" and marked["memory/2026-04-20.md"] is None
    assert main(["search", "build server runners Hetzner", *common, "--explain"]) == 0
    assert "supersession: supersededBy memory/2026-04-20.md#L4; by markup" in capsys.readouterr().out
    assert main(["search", "GitHub-hosted runners", *common, "--as-of", "2026-03-31"]) in (0, 1)
    captured = capsys.readouterr()
    assert "memory/2026-04-20.md" not in captured.out and "later memor" in captured.err


def test_agent_tools_take_as_of_and_show_supersession(ws: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(ws, cfg()) as m:
        tools = MemoryTools(m)
        assert "memory_history" in tools.names
        found = tools.call("memory_search", {"query": "build server runners Hetzner"})
        marked = {r["path"]: r.get("supersededBy") for r in found["results"]}
        assert marked["memory/2026-03-03.md"] == "memory/2026-04-20.md#L4"
        then = tools.call("memory_search", {"query": "build server runners", "asOf": "2026-02-01"})
        assert {r["path"] for r in then["results"]} == {"memory/2026-01-12.md", "MEMORY.md"}
        bad = tools.call("memory_search", {"query": "build server", "asOf": "last week"})
        assert bad["code"] == "invalid_arguments" and "asOf" in bad["error"]
        history = tools.call("memory_history", {"topic": "build server runners", "maxResults": 3})
        assert [s["status"] for s in history["statements"]][-1] == "current" and len(history["statements"]) == 3
        wrong = tools.call("memory_history", {"topic": "build server", "asOf": "yesterday-ish"})
        assert wrong["code"] == "invalid_arguments"
        assert tools.call("memory_history", {})["code"] == "invalid_arguments"


@pytest.mark.timeout(120)
def test_memory_history_over_mcp(ws: Path, tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home")}
    args = ["-m", "mdrecall", "mcp", "-w", str(ws), "-c", "provider=none", "-c", f"store.path={tmp_path / 'i.sqlite'}", "--no-watch"]

    async def scenario() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with open(tmp_path / "stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    history = await session.call_tool("memory_history", {"topic": "build server runners", "asOf": "2026-03-31"})
                    bad = await session.call_tool("memory_history", {"topic": ""})
                    search = await session.call_tool("memory_search", {"query": "build server Hetzner", "asOf": "2026-05-01"})
                    return {"tools": tools, "history": history, "bad": bad, "search": search}

    out = anyio.run(scenario)
    tool = out["tools"]["memory_history"]
    assert tool.annotations.read_only_hint is True and "topic" in tool.input_schema["required"]
    assert "asOf" in out["tools"]["memory_search"].input_schema["properties"]
    data = out["history"].structured_content
    assert not out["history"].is_error
    assert [(s["citation"], s["status"]) for s in data["statements"] if s["statedAt"]] == [
        ("memory/2026-01-12.md#L4", "superseded"), ("memory/2026-03-03.md#L3", "current")]  # fmt: skip
    assert out["bad"].is_error
    marked = {r["path"]: r.get("supersededBy") for r in out["search"].structured_content["results"]}
    assert marked["memory/2026-03-03.md"] == "memory/2026-04-20.md#L4"
