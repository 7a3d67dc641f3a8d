"""``memory_write``: the agent tool over a real manager, and over real MCP (stdio, the SDK's client)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from mdrecall import open_manager
from mdrecall.agent.specs import MEMORY_GET, MEMORY_SEARCH, MEMORY_STATUS, MEMORY_WRITE, TOOL_SPECS
from mdrecall.agent.tools import MemoryTools

TOOLS = (MEMORY_SEARCH, MEMORY_GET, MEMORY_STATUS, MEMORY_WRITE)


@pytest.fixture
def tools(example_ws: Path, tmp_path: Path) -> Any:
    with open_manager(example_ws, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}, "sync": {"watch": False}}) as m:
        m.sync()
        yield MemoryTools(m, tools=TOOLS)


def test_written_memory_is_searchable_at_once_and_readable_by_its_citation(tools: MemoryTools, example_ws: Path) -> None:
    out = tools.call(MEMORY_WRITE, {"text": "The kumquat supplier changed to Frutas Lda on 2026-11-20."})
    assert out["indexed"] is True and out["path"].startswith("memory/") and out["citation"].startswith(out["path"] + "#L")
    hits = tools.call(MEMORY_SEARCH, {"query": "kumquat supplier"})["results"]
    assert hits and hits[0]["path"] == out["path"]
    page = tools.call(MEMORY_GET, {"path": out["path"], "from": out["startLine"], "lines": 1})
    assert "Frutas Lda" in page["text"] and "mdrecall:remembered" in page["text"] and "via=agent" in page["text"]

    topic = tools.call(MEMORY_WRITE, {"text": "Kumquats are stored at 4 °C.", "target": "memory/kumquats.md"})
    assert topic["path"] == "memory/kumquats.md" and topic["created"] is True
    assert (example_ws / "memory" / "kumquats.md").is_file()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({}, "invalid_arguments"),
        ({"text": "   "}, "invalid_arguments"),
        ({"text": "x" * 9000}, "invalid_arguments"),
        ({"text": "x", "path": "MEMORY.md"}, "invalid_arguments"),
        ({"text": "x", "target": "../escape.md"}, "invalid_path"),
        ({"text": "x", "target": "secrets.txt"}, "not_memory_path"),
        ({"text": "x", "target": "memory/.dreams/queue.md"}, "not_memory_path"),
    ],
)
def test_bad_calls_are_errors_the_model_can_read(tools: MemoryTools, example_ws: Path, args: dict[str, Any], code: str) -> None:
    before = {p: p.stat().st_mtime_ns for p in example_ws.rglob("*")}
    out = tools.call(MEMORY_WRITE, args)
    assert out["code"] == code and out["error"]
    assert {p: p.stat().st_mtime_ns for p in example_ws.rglob("*")} == before


def test_schema_matches_the_handler() -> None:
    validator = jsonschema.Draft202012Validator(TOOL_SPECS[MEMORY_WRITE].input_schema)
    assert validator.is_valid({"text": "a fact"}) and validator.is_valid({"text": "a", "target": "MEMORY.md"})
    assert not validator.is_valid({}) and not validator.is_valid({"text": ""}) and not validator.is_valid({"text": "a", "x": 1})
    assert TOOL_SPECS[MEMORY_WRITE].read_only is False and all(
        TOOL_SPECS[name].read_only for name in (MEMORY_SEARCH, MEMORY_GET, MEMORY_STATUS)
    )


def test_not_offered_unless_asked_for(example_ws: Path, tmp_path: Path) -> None:
    with open_manager(example_ws, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}, "sync": {"watch": False}}) as m:
        default = MemoryTools(m)
        assert MEMORY_WRITE not in default.names
        assert "unknown tool" in default.call(MEMORY_WRITE, {"text": "x"})["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("read_only", [False, True])
def test_over_mcp(example_ws: Path, tmp_path: Path, read_only: bool) -> None:
    pytest.importorskip("mcp")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "mdrecall", "mcp", "-w", str(example_ws), "-c", "provider=none", "--no-watch",
            *(["--read-only"] if read_only else [])]  # fmt: skip
    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home")}

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with open(tmp_path / "stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
                if not read_only:
                    out["write"] = (await session.call_tool(MEMORY_WRITE, {"text": "The office plant is called Gerald."})).structured_content
                    out["search"] = (await session.call_tool(MEMORY_SEARCH, {"query": "office plant Gerald"})).structured_content
        return out

    out = anyio.run(scenario)
    if read_only:
        assert MEMORY_WRITE not in out["tools"] and MEMORY_SEARCH in out["tools"]
        return
    tool = out["tools"][MEMORY_WRITE]
    assert tool.annotations.read_only_hint is False and tool.input_schema == TOOL_SPECS[MEMORY_WRITE].input_schema
    assert out["write"]["indexed"] is True
    assert out["search"]["results"][0]["path"] == out["write"]["path"]
