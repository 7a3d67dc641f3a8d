"""``memory_forget_lines`` over MCP (stdio, the official client): listed as destructive, a first call
that only shows the lines and a token, a second that deletes exactly those."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from forgethelpers import NOTE_PATH, TOKEN, TRANSCRIPT_PATH

pytest.importorskip("mcp")
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["MDRECALL_HOME"] = str(tmp_path / "home")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@pytest.mark.timeout(120)
def test_forgetting_over_mcp_takes_two_calls(fact_ws: Path, tmp_path: Path) -> None:
    (fact_ws / ".mdrecall.yaml").write_text(yaml.safe_dump({"provider": "none", "sources": ["memory", "sessions"]}), encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, env=_env(tmp_path),
                                   args=["-m", "mdrecall", "mcp", "-w", str(fact_ws), "--no-watch", "--session-key", "main"])  # fmt: skip

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
                call = session.call_tool
                out["first"] = (await call("memory_forget_lines", {"target": TOKEN})).structured_content
                out["untouched"] = (fact_ws / NOTE_PATH).read_text(encoding="utf-8")
                out["wrong"] = (await call("memory_forget_lines", {"target": TOKEN, "confirm": "feedfacefeedface"})).structured_content
                token = out["first"]["token"]
                # The host logs the conversation so far: the tool call and its answer both state the text.
                with (fact_ws / TRANSCRIPT_PATH).open("a", encoding="utf-8") as host:
                    host.write(json.dumps({"type": "message", "message": {"role": "assistant", "content": [
                        {"type": "toolCall", "name": "memory_forget_lines", "arguments": {"target": TOKEN}}]}}) + "\n")
                    host.write(json.dumps({"type": "message", "message": {"role": "toolResult", "content": [
                        {"type": "text", "text": json.dumps(out["first"])}]}}) + "\n")
                out["second"] = (await call("memory_forget_lines", {"target": TOKEN, "confirm": token})).structured_content
                out["search"] = (await call("memory_search", {"query": "vault code", "minScore": 0})).structured_content
                out["bad"] = await call("memory_forget_lines", {"target": f"{NOTE_PATH}#L80"})
                out["none"] = (await call("memory_forget_lines", {"target": "no such words anywhere"})).structured_content
        return out

    out = anyio.run(scenario)
    tool = out["tools"]["memory_forget_lines"]
    assert tool.annotations.destructive_hint is True and tool.annotations.read_only_hint is False
    first = out["first"]
    assert first["action"] == "confirm" and len(first["token"]) == 16
    assert {line["citation"] for line in first["lines"]} == {f"{NOTE_PATH}#L4", f"{TRANSCRIPT_PATH}#L2"}
    assert TOKEN in out["untouched"]  # the first call deletes nothing
    assert out["wrong"]["action"] == "changed" and out["wrong"]["token"] == first["token"]
    second = out["second"]
    assert second["action"] == "forgotten" and second["verification"]["verified"] is True, second
    assert second["lineCount"] == 4  # the two lines shown, and the two records of this conversation stating it
    assert TOKEN not in json.dumps(second)  # the answer (which the host logs too) repeats nothing forgotten
    assert TOKEN not in (fact_ws / NOTE_PATH).read_text(encoding="utf-8")
    assert TOKEN not in (fact_ws / TRANSCRIPT_PATH).read_text(encoding="utf-8")
    assert not any(TOKEN in r["snippet"] for r in out["search"]["results"])
    bad = out["bad"].structured_content or {}
    assert out["bad"].is_error or bad.get("code") == "invalid_arguments", out["bad"]
    assert out["none"]["action"] == "none"
