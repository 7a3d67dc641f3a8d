"""``memory_search`` over real MCP (``python -m mdrecall mcp``, the SDK's stdio client) with
``backend: qmd``: the answers are QMD's."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from qmdhelpers import PLANTED_LINE, PLANTED_PATH, PLANTED_QUESTION

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


@pytest.mark.timeout(180)
def test_memory_search_over_mcp_answers_from_qmd(qmd_workspace: Path, tmp_path: Path) -> None:
    args = ["-m", "mdrecall", "mcp", "-w", str(qmd_workspace), "-c", "backend=qmd", "-c", "provider=none",
            "-c", f"store.path={tmp_path / 'builtin.sqlite'}", "-c", f"qmd.indexDir={tmp_path / 'qmd'}", "--no-watch"]
    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home")}

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with open(tmp_path / "stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    deadline = time.monotonic() + 90
                    while True:  # the server indexes and starts QMD in the background after it starts
                        status = (await session.call_tool("memory_status", {})).structured_content
                        ready = status.get("lastUpdate") and status.get("process", {}).get("running")
                        if ready or time.monotonic() > deadline:
                            break
                        await anyio.sleep(0.2)
                    out["search"] = (await session.call_tool("memory_search", {"query": PLANTED_QUESTION})).structured_content
                    hit = out["search"]["results"][0]
                    out["get"] = (await session.call_tool("memory_get", {
                        "path": hit["path"], "from": hit["startLine"], "lines": hit["endLine"] - hit["startLine"] + 1,
                    })).structured_content
                    out["status"] = (await session.call_tool("memory_status", {})).structured_content
        return out

    out = anyio.run(scenario)
    search = out["search"]
    assert search["provider"] == "qmd" and search["mode"] == "keyword-only" and not search["warnings"], search
    top = search["results"][0]
    assert top["path"] == PLANTED_PATH and top["startLine"] <= PLANTED_LINE <= top["endLine"]
    assert "Priya" in out["get"]["text"] and out["get"]["path"] == PLANTED_PATH
    # memory_status is Status.to_dict(): the common fields with QMD's details beside them.
    status = out["status"]
    assert status["backend"] == "qmd" and status["answeredBy"] == "qmd" and status["fallback"] is None
    assert status["process"]["running"] and status["process"]["starts"] == 1
