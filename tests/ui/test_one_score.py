"""One hit, three surfaces: ``mdrecall search --explain`` (the real CLI), ``memory_search`` over real
MCP (stdio, the official client) and the web inspector (uvicorn, real HTTP) report the same score
and the same signals, each on the score's own scale (search/explain.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("starlette")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from uihelpers import serving

from mdrecall import open_manager

QUERY = "which port does the billing database listen on"
NOTES = {
    "MEMORY.md": "# Memory\n\n- The billing database runs on db-2 and listens on port 5433.\n- Lunch is at noon.\n",
    "memory/2026-03-02.md": "# 2026-03-02\n\n- Moved the billing exports to S3.\n",
}


def _workspace(root: Path) -> Path:
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "MDRECALL_HOME": str(tmp / "home")}


def _args(ws: Path, store: Path) -> list[str]:
    return ["-w", str(ws), "-c", "provider=none", "-c", f"store.path={store}"]


def _signals(explanation: dict[str, Any]) -> dict[str, float]:
    return {k: float(v["score"]) for k, v in explanation.items() if isinstance(v, dict) and "score" in v}


@pytest.mark.timeout(120)
def test_cli_mcp_and_inspector_agree(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    store = tmp_path / "index.sqlite"
    cli = subprocess.run([sys.executable, "-m", "mdrecall", "search", QUERY, *_args(ws, store), "--json", "--explain", "-n", "1"],
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    cli_hit = json.loads(cli.stdout)["results"][0]
    cli_explain = cli_hit["explain"]

    async def over_mcp() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "mdrecall", "mcp", *_args(ws, store), "--no-watch"],
                                       env=_env(tmp_path))  # fmt: skip
        with open(tmp_path / "mcp.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.call_tool("memory_search", {"query": QUERY, "maxResults": 1, "explain": True})
                assert result.structured_content is not None
                return result.structured_content

    mcp_hit = anyio.run(over_mcp)["results"][0]

    config = {"provider": "none", "store": {"path": str(store)}, "sync": {"watch": False}}
    with open_manager(ws, config) as manager, serving(manager) as url:
        page = httpx.get(f"{url}/search", params={"q": QUERY, "n": "1"}, timeout=30).text
    first = page.split('<li class="hit" id="hit-1">', 1)[1].split('<li class="hit"', 1)[0].split("</ol>", 1)[0]
    assert 'href="/' in first and "MEMORY.md" in first
    rows = dict(re.findall(r'<tr class="signal"><th>([^<]+)</th><td>([0-9.]+)', first))

    assert cli_hit["path"] == mcp_hit["path"] == "MEMORY.md" and cli_hit["startLine"] == mcp_hit["startLine"]
    score = round(cli_hit["score"], 3)
    assert round(mcp_hit["score"], 3) == score == round(float(rows["score"]), 3)
    assert cli_explain["score"] == pytest.approx(cli_hit["score"], abs=1e-4)
    assert _signals(cli_explain) == _signals(mcp_hit["explanation"])
    assert float(rows["keyword (score alone)"]) == pytest.approx(cli_explain["keyword"]["score"], abs=1e-3)
    assert cli_explain["keyword"]["matched"] == mcp_hit["explanation"]["keyword"]["matched"]
    assert "logit" not in json.dumps(mcp_hit["explanation"]) and "logit" not in page
