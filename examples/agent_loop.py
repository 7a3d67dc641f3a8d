"""A small agent loop with mdrecall memory, against any OpenAI-compatible Chat Completions API.

It wires the MemoryCapability into a plain tool-calling loop (only ``httpx``, no agent framework):

- the "Memory Recall" section goes into the system prompt;
- ``memory_search`` / ``memory_get`` / ``memory_status`` are offered as tools and executed locally;
- optionally (``--auto-recall``) a ``<relevant-memories>`` block is injected before the question;
- when the reported token usage crosses the flush threshold, one silent pre-compaction flush turn
  lets the model append durable notes to today's ``memory/YYYY-MM-DD.md`` (and nothing else).

Run it against OpenAI, a local Ollama/llama.cpp/vLLM server, or anything that speaks the format::

    python examples/agent_loop.py -w examples/workspace \\
        --base-url http://localhost:11434/v1 --model llama3.1 \\
        "What did we decide about recipe search, and when?"

The API key comes from ``--api-key`` or ``OPENAI_API_KEY`` (local servers usually ignore it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mdrecall.agent import FlushState, MemoryCapability, append_flush_note, create_memory_capability
from mdrecall.agent.flush import SILENT_REPLY_TOKEN

BASE_SYSTEM_PROMPT = "You are a concise assistant for the user's software project. Answer from memory when you can."

APPEND_NOTE_TOOL = {
    "type": "function",
    "function": {
        "name": "append_daily_note",
        "description": "Append durable notes (Markdown bullet points) to today's memory file. Append-only.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "must be today's memory/YYYY-MM-DD.md"},
                "text": {"type": "string", "description": "Markdown to append"},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    },
}


@dataclass
class AgentResult:
    answer: str
    #: Every tool call made, in order: {"name", "arguments", "result"}.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: The file the pre-compaction flush appended to, if it ran and wrote something.
    flushed_to: str | None = None


class ChatClient:
    """Just enough of the Chat Completions API: one POST per model turn."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 120.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(headers=headers, timeout=timeout)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        response = self.http.post(self.url, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"chat API returned {response.status_code}: {response.text[:500]}")
        return response.json()

    def close(self) -> None:
        self.http.close()


def _run_tool_calls(
    message: dict[str, Any], execute: Any, log: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> None:
    for call in message.get("tool_calls") or []:
        name = call["function"]["name"]
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            args, result = {}, {"error": f"arguments are not valid JSON: {exc}"}
        else:
            result = execute(name, args)
        log.append({"name": name, "arguments": args, "result": result})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result, ensure_ascii=False)})


def run_memory_flush(memory: MemoryCapability, chat: ChatClient, transcript: list[dict[str, Any]],
                     log: list[dict[str, Any]]) -> str | None:  # fmt: skip
    """One silent flush turn: the model may only append to today's note, through one tool."""
    plan = memory.flush_plan()
    if plan is None:
        return None
    messages = [
        {"role": "system", "content": plan.system_prompt},
        *[m for m in transcript if m["role"] in ("user", "assistant") and m.get("content")],
        {"role": "user", "content": plan.prompt},
    ]
    written: list[str] = []

    def execute(name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name != "append_daily_note":
            return {"error": f"only append_daily_note is available during the flush, not {name}"}
        try:
            target = append_flush_note(memory.runtime.workspace, plan, str(args.get("text", "")), rel_path=args.get("path"))
        except PermissionError as exc:
            return {"error": str(exc)}
        written.append(plan.relative_path)
        return {"appended": plan.relative_path, "bytes": target.stat().st_size}

    for _ in range(3):
        reply = chat.complete(messages, [APPEND_NOTE_TOOL])["choices"][0]["message"]
        messages.append(reply)
        if not reply.get("tool_calls"):
            break  # usually NO_REPLY
        _run_tool_calls(reply, execute, log, messages)
    return written[-1] if written else None


def run_agent(
    question: str,
    memory: MemoryCapability,
    chat: ChatClient,
    *,
    max_steps: int = 8,
    auto_recall: bool = False,
    context_window: int = 200_000,
    flush_state: FlushState | None = None,
) -> AgentResult:
    """Answer ``question``, letting the model call the memory tools as often as it needs."""
    system = BASE_SYSTEM_PROMPT + "\n\n" + memory.system_prompt_section()
    user = question
    if auto_recall:
        block = memory.recall(question)
        if block:
            user = f"{block}\n\n{question}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    result = AgentResult(answer="", messages=messages)
    state = flush_state or FlushState()

    for _ in range(max_steps):
        response = chat.complete(messages, memory.openai_tools())
        message = response["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        _run_tool_calls(message, memory.call_tool, result.tool_calls, messages)

        tokens = (response.get("usage") or {}).get("total_tokens", 0)
        if state.decide(memory.flush_plan(), tokens=tokens, context_window=context_window).flush:
            result.flushed_to = run_memory_flush(memory, chat, messages, result.tool_calls)
            state.record_flush()
        if not message.get("tool_calls"):
            result.answer = (message.get("content") or "").strip()
            if result.answer.startswith(SILENT_REPLY_TOKEN):
                result.answer = ""
            return result
    raise RuntimeError(f"no final answer after {max_steps} model turns")


def _summary(call: dict[str, Any]) -> str:
    outcome = call["result"]
    if "error" in outcome:
        return f"error: {outcome['error']}"
    if "results" in outcome:
        return f"{len(outcome['results'])} result(s)"
    if call["name"] == "memory_get":
        return f"{outcome.get('lines')} line(s) of {outcome.get('path')}"
    return json.dumps(outcome, ensure_ascii=False)[:80]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question")
    parser.add_argument("-w", "--workspace", default=".", help="agent workspace with MEMORY.md and memory/")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"))
    parser.add_argument("--model", default=os.environ.get("MDRECALL_AGENT_MODEL", "gpt-4o-mini"))
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    parser.add_argument("--provider", default=None, help="embedding provider for memory (default: config / auto)")
    parser.add_argument("--session-key", default="agent:main:cli:example")
    parser.add_argument("--auto-recall", action="store_true", help="inject <relevant-memories> before the question")
    parser.add_argument("--context-window", type=int, default=200_000)
    args = parser.parse_args(argv)

    config = {"provider": args.provider} if args.provider else None
    chat = ChatClient(args.base_url, args.model, args.api_key)
    try:
        with create_memory_capability(Path(args.workspace), config, session_key=args.session_key) as memory:
            result = run_agent(
                args.question, memory, chat, auto_recall=args.auto_recall, context_window=args.context_window
            )
    finally:
        chat.close()
    for call in result.tool_calls:
        print(f"-> {call['name']} {json.dumps(call['arguments'], ensure_ascii=False)}: {_summary(call)}")
    if result.flushed_to:
        print(f"(memory flush appended to {result.flushed_to})")
    print(result.answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
