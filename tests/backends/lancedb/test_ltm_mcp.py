"""The LanceDB tools over MCP (stdio, the official client), with the real model in the server process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

pytest.importorskip("mcp")
from ltm_worker import subprocess_env
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ltm_tools_over_mcp(ltm_ws: Path, tmp_path: Path) -> None:
    (ltm_ws / ".mdrecall.yaml").write_text(yaml.safe_dump(
        {"backend": "lancedb", "provider": "local", "lancedb": {"dbPath": str(tmp_path / "db")}}), encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=["-m", "mdrecall", "mcp", "-w", str(ltm_ws), "--no-watch"],
                                   env=subprocess_env(tmp_path))

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
                    call = session.call_tool
                    out["store"] = await call("memory_store", {"text": "I prefer window seats on long flights."})
                    out["dup"] = await call("memory_store", {"text": "I prefer window seats on long flights!"})
                    out["recall"] = await call("memory_recall", {"query": "Book my seat for the Tokyo flight"})
                    out["search"] = await call("memory_search", {"query": "seat on flights"})
                    out["prompt"] = await session.get_prompt("relevant_memories", {"query": "Book my seat for the Tokyo flight"})
                    out["forget"] = await call("memory_forget", {"memoryId": out["store"].structured_content["id"]})
                    out["after"] = await call("memory_recall", {"query": "Book my seat for the Tokyo flight"})
                    out["bad"] = await call("memory_store", {"text": ""})
        return out

    out = anyio.run(scenario)
    tools = out["tools"]
    assert {"memory_search", "memory_get", "memory_status", "memory_store", "memory_recall", "memory_forget"} <= set(tools)
    assert tools["memory_store"].annotations.read_only_hint is False
    assert tools["memory_forget"].annotations.destructive_hint is True
    assert tools["memory_recall"].annotations.read_only_hint is True
    assert out["store"].structured_content["action"] == "created" and not out["store"].is_error
    assert out["dup"].structured_content["action"] == "duplicate"
    recalled = out["recall"].structured_content
    assert recalled["count"] == 1 and recalled["memories"][0]["text"] == "I prefer window seats on long flights."
    assert out["search"].structured_content["results"][0]["path"].startswith("ltm:")
    assert "window seats" in out["prompt"].messages[0].content.text
    assert out["forget"].structured_content["action"] == "deleted"
    assert out["after"].structured_content["count"] == 0
    assert out["bad"].is_error
