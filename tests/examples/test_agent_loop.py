"""examples/agent_loop.py against a local OpenAI-compatible chat server that scripts tool calls.

The server speaks the Chat Completions wire format on 127.0.0.1 and decides each turn from what the
agent actually sent: ask for memory_search, then memory_get on the first hit it got back, then answer
with the text memory_get returned. So the answer can only be right if the tools really ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_loop.py"
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"
API_KEY = "sk-test-local"


def _load_example():
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class ScriptedChat:
    """Decides the next assistant message from the conversation, like a (very obedient) model."""

    def __init__(self, query: str, usage_tokens: int = 1200) -> None:
        self.query = query
        self.usage_tokens = usage_tokens
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = 0

    def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{self._ids}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}],
        }  # fmt: skip

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        last = messages[-1]
        if messages[0]["content"].startswith("Pre-compaction memory flush turn"):
            if last["role"] == "user":
                path = messages[0]["content"].split("only in ")[1].split(" ")[0]
                return self._call("append_daily_note", {"path": path, "text": "- Flush test: planner stays in v0.5."})
            return {"role": "assistant", "content": "NO_REPLY"}
        if last["role"] == "user":
            return self._call("memory_search", {"query": self.query, "maxResults": 3})
        result = json.loads(last["content"])
        previous = next(m for m in reversed(messages) if m.get("tool_calls"))
        name = previous["tool_calls"][0]["function"]["name"]
        if name == "memory_search":
            top = result["results"][0]
            span = top["endLine"] - top["startLine"] + 1
            return self._call("memory_get", {"path": top["path"], "from": top["startLine"], "lines": span})
        text = result["text"].split("\n\n[More content")[0]
        return {"role": "assistant", "content": f"From {result['path']}: {text}"}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        message = self.reply(body)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": self.usage_tokens - 50, "completion_tokens": 50, "total_tokens": self.usage_tokens},
        }  # fmt: skip


@pytest.fixture
def chat_server() -> Iterator[tuple[str, ScriptedChat]]:
    script = ScriptedChat("meal planner moved to v0.5")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append(body)
            script.headers.append(dict(self.headers))
            if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                payload, status = {"error": {"message": "bad key", "type": "invalid_request_error"}}, 401
            else:
                payload, status = script.completion(body), 200
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "workspace"
    if (EXAMPLE_WORKSPACE / "MEMORY.md").is_file():
        shutil.copytree(EXAMPLE_WORKSPACE, target, symlinks=True)
    else:
        (target / "memory").mkdir(parents=True)
        (target / "MEMORY.md").write_text("# MEMORY\n- Pebble is a recipe app.\n")
        (target / "memory" / "2026-11-09.md").write_text(
            "# 2026-11-09\n\n## Standup / scope decision\n- v0.4 ships without the meal planner; it moves to v0.5.\n"
        )
    return target


def test_agent_calls_memory_search_then_memory_get(chat_server, workspace: Path, tmp_path: Path) -> None:
    url, script = chat_server
    example = _load_example()
    from mdrecall.agent import create_memory_capability

    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}}
    chat = example.ChatClient(url, "scripted-model", API_KEY)
    try:
        with create_memory_capability(workspace, config, session_key="agent:main:cli:test") as memory:
            result = example.run_agent("What happened to the meal planner?", memory, chat)
    finally:
        chat.close()

    assert [c["name"] for c in result.tool_calls] == ["memory_search", "memory_get"]
    search, get = result.tool_calls
    assert search["result"]["results"], search["result"]
    top = search["result"]["results"][0]
    assert get["arguments"] == {"path": top["path"], "from": top["startLine"], "lines": top["endLine"] - top["startLine"] + 1}
    # The answer quotes exactly the lines memory_get read from disk.
    lines = (workspace / top["path"]).read_text().split("\n")[top["startLine"] - 1 : top["endLine"]]
    assert result.answer == f"From {top['path']}: " + "\n".join(lines)
    assert "planner" in result.answer.lower()

    # What the model was given: the Memory Recall section and the tool schemas, on every turn.
    assert len(script.requests) == 3
    first = script.requests[0]
    assert "## Memory Recall" in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["memory_search", "memory_get", "memory_status", "memory_history"]
    assert first["tool_choice"] == "auto"
    assert all(h.get("Authorization") == f"Bearer {API_KEY}" for h in script.headers)
    # Tool results went back as role=tool messages tied to the call ids.
    tool_msgs = [m for m in script.requests[-1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1", "call_2"]
    assert result.flushed_to is None


def test_pre_compaction_flush_appends_to_todays_note(chat_server, workspace: Path, tmp_path: Path) -> None:
    url, script = chat_server
    script.usage_tokens = 180_000  # past 200k - 20k - 4k: the next turn triggers the flush once
    example = _load_example()
    from mdrecall.agent import create_memory_capability

    memory_md = (workspace / "MEMORY.md").read_text()
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}}
    chat = example.ChatClient(url, "scripted-model", API_KEY)
    try:
        with create_memory_capability(workspace, config) as memory:
            result = example.run_agent("What happened to the meal planner?", memory, chat)
            plan = memory.flush_plan()
    finally:
        chat.close()

    assert result.flushed_to == plan.relative_path
    assert plan.relative_path == f"memory/{datetime.now().astimezone().strftime('%Y-%m-%d')}.md"
    assert "- Flush test: planner stays in v0.5." in (workspace / plan.relative_path).read_text()
    assert (workspace / "MEMORY.md").read_text() == memory_md  # never edited
    flush_calls = [c for c in result.tool_calls if c["name"] == "append_daily_note"]
    assert len(flush_calls) == 1  # once per compaction cycle, although every turn was over the threshold
    assert result.answer.startswith("From ")


def test_example_runs_as_a_script(chat_server, workspace: Path, tmp_path: Path) -> None:
    url, _ = chat_server
    env = dict(os.environ, MDRECALL_HOME=str(tmp_path / "home"), OPENAI_API_KEY=API_KEY)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "-w", str(workspace), "--base-url", url, "--model", "scripted",
         "--provider", "none", "What happened to the meal planner?"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith('-> memory_search {"query": "meal planner moved to v0.5", "maxResults": 3}: ')
    assert out[1].startswith("-> memory_get {") and "line(s) of" in out[1]
    assert out[2].startswith("From ")
