"""Tools, auto-recall and auto-capture from plugins (``register_tools``, ``auto_recall``, ``auto_capture``),
over the builtin engine: any plugin can add them, a broken plugin contributes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from mdrecall import MemorySearchManager, open_manager, plugins
from mdrecall.agent import create_memory_capability
from mdrecall.agent.specs import ToolSpec
from mdrecall.agent.tools import MemoryTools
from mdrecall.plugins import hookimpl
from mdrecall.testing import registered

COUNT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "word": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 5},
        "unit": {"type": "string", "enum": ["files", "lines"]},
    },
    "required": ["word"],
    "additionalProperties": False,
}


def count_word(manager: MemorySearchManager, args: dict[str, Any], session_key: str | None) -> dict[str, Any]:
    if args["word"] == "boom":
        raise RuntimeError("the store is down")
    if args["word"] == "nonsense":
        raise ValueError("nonsense is not a word this tool counts")
    hits = manager.search(args["word"], max_results=args.get("limit", 5), min_score=0).results
    return {"word": args["word"], "files": len({h.path for h in hits}), "sessionKey": session_key, "args": args}


class ToolsPlugin:
    @hookimpl
    def register_tools(self, register: Callable[..., None]) -> None:
        register(ToolSpec("memory_count", "Count files mentioning a word.", COUNT_SCHEMA), count_word)
        register(ToolSpec("memory_erase", "Only for a store that can erase.", {"type": "object", "properties": {}},
                          read_only=False, destructive=True), count_word, backends=("erasable",))  # fmt: skip


class BuiltinEraser:
    """The same name as ToolsPlugin's memory_erase, for another backend: both are kept."""

    @hookimpl
    def register_tools(self, register: Callable[..., None]) -> None:
        def erase(manager: MemorySearchManager, args: dict[str, Any], session_key: str | None) -> dict[str, Any]:
            return {"erased": args["path"], "backend": manager.backend}

        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        register(ToolSpec("memory_erase", "Erase a note.", schema, read_only=False, destructive=True), erase,
                 backends=["builtin"])  # fmt: skip


class CountForEveryone:
    """memory_count again, for backends ToolsPlugin's already covers: refused."""

    @hookimpl
    def register_tools(self, register: Callable[..., None]) -> None:
        register(ToolSpec("memory_count", "Count again.", COUNT_SCHEMA), count_word, backends=("builtin",))


class BrokenToolsPlugin:
    @hookimpl
    def register_tools(self, register: Callable[..., None]) -> None:
        register(ToolSpec("memory_search", "A second memory_search.", {"type": "object", "properties": {}}), count_word)


@pytest.fixture
def manager(example_ws: Path, tmp_path: Path) -> Iterator[MemorySearchManager]:
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}
    with open_manager(example_ws, config, use_global_config=False) as opened:
        yield opened


def test_a_plugin_tool_is_offered_checked_and_run(manager: MemorySearchManager) -> None:
    with registered(ToolsPlugin()):
        tools = MemoryTools(manager, session_key="agent:main:cli")
        assert tools.names == ("memory_search", "memory_get", "memory_status", "memory_history", "memory_count")
        assert [t["function"]["name"] for t in tools.openai_tools()][-1] == "memory_count"
        out = tools.call("memory_count", {"word": "  Meilisearch ", "limit": "2"})
        assert out["args"] == {"word": "Meilisearch", "limit": 2} and out["files"] >= 1
        assert out["sessionKey"] == "agent:main:cli"  # the host's key, never the model's
        for bad, message in [
            ({}, "word is required"),
            ({"word": ""}, "word must be a non-empty string"),
            ({"word": "x", "limit": 9}, "limit must be from 1 to 5"),
            ({"word": "x", "unit": "bytes"}, "unit must be one of files, lines"),
            ({"word": "x", "sessionKey": "agent:other"}, "unknown argument(s) sessionKey"),
        ]:
            answer = tools.call("memory_count", bad)
            assert answer["code"] == "invalid_arguments" and message in answer["error"], (bad, answer)
        assert tools.call("memory_count", {"word": "nonsense"}) == {
            "error": "nonsense is not a word this tool counts", "code": "invalid_arguments"}  # fmt: skip
        down = tools.call("memory_count", {"word": "boom"})
        assert down["disabled"] is True and "the store is down" in down["error"]
    # Unregistered: no longer offered by a new tool set, and an old one says so instead of crashing.
    assert "memory_count" not in MemoryTools(manager).names
    assert tools.call("memory_count", {"word": "x"})["code"] == "unavailable"


def test_mcp_serves_plugin_tools_and_a_read_only_server_only_the_read_only_ones() -> None:
    from mdrecall.mcp.server import served_tools

    with registered(ToolsPlugin()):
        # memory_forget_lines: the forget plugin's (an opt-in tool: served by MCP, not a host's default).
        assert served_tools("builtin") == ("memory_search", "memory_get", "memory_status", "memory_write", "memory_history",
                                           "memory_forget_lines", "memory_count")  # fmt: skip
        assert served_tools("erasable") == ("memory_search", "memory_get", "memory_status", "memory_write",
                                            "memory_forget_lines", "memory_count", "memory_erase")  # fmt: skip
        assert served_tools("erasable", read_only=True) == ("memory_search", "memory_get", "memory_status", "memory_count")


def test_a_tool_for_another_backend_is_not_offered(manager: MemorySearchManager) -> None:
    with registered(ToolsPlugin()):
        assert "memory_erase" not in MemoryTools(manager).names
        forced = MemoryTools(manager, tools=("memory_search", "memory_erase"))
        assert [s.name for s in forced.specs()] == ["memory_search", "memory_erase"]
        assert forced.specs()[1].destructive and not forced.specs()[1].read_only
        assert forced.call("memory_erase", {})["code"] == "unsupported_backend"


def test_one_name_for_disjoint_backends_each_its_own(manager: MemorySearchManager) -> None:
    with registered(ToolsPlugin()), registered(BuiltinEraser()), registered(CountForEveryone(), name="count-again"):
        tools = MemoryTools(manager)
        assert tools.names == ("memory_search", "memory_get", "memory_status", "memory_history", "memory_count", "memory_erase")
        assert tools.specs()[-1].description == "Erase a note."
        assert tools.call("memory_erase", {"path": "memory/x.md"}) == {"erased": "memory/x.md", "backend": "builtin"}
        assert "'memory_count' is already registered for builtin" in plugins.plugin_errors()["count-again"]
        assert tools.specs()[4].description == "Count files mentioning a word."


def test_a_plugin_that_takes_a_standard_name_contributes_nothing(manager: MemorySearchManager) -> None:
    with registered(BrokenToolsPlugin(), name="broken-tools"):
        assert MemoryTools(manager).names == ("memory_search", "memory_get", "memory_status", "memory_history")
        assert "already registered" in plugins.plugin_errors()["broken-tools"]
        assert "results" in MemoryTools(manager).call("memory_search", {"query": "Meilisearch"})


class RecallCapturePlugin:
    def __init__(self) -> None:
        self.turns: list[list[Mapping[str, Any]]] = []

    @hookimpl
    def auto_recall(self, manager: MemorySearchManager, prompt: str, session_key: str | None) -> str | None:
        return f"<relevant-memories>\n1. about {prompt} for {session_key}\n</relevant-memories>" if "tea" in prompt else None

    @hookimpl
    def auto_capture(self, manager: MemorySearchManager, messages: Sequence[Mapping[str, Any]], session_key: str | None,
                     success: bool) -> dict[str, Any] | None:  # fmt: skip
        self.turns.append(list(messages))
        return {"captured": [{"text": m["content"]} for m in messages if m["role"] == "user"] if success else []}


class FailingRecallPlugin:
    @hookimpl
    def auto_recall(self, manager: MemorySearchManager, prompt: str, session_key: str | None) -> str | None:
        raise RuntimeError("recall exploded")


def test_auto_recall_and_capture_come_from_plugins(example_ws: Path, tmp_path: Path) -> None:
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}
    with create_memory_capability(example_ws, config, session_key="agent:main:cli") as memory:
        # Nothing registered: no block, no capture, and saying why.
        assert memory.auto_recall("green tea please") == ""
        assert memory.auto_capture([{"role": "user", "content": "I like tea."}]) == {
            "captured": [], "disabled": "no plugin captures for backend 'builtin'"}  # fmt: skip
        plugin = RecallCapturePlugin()
        with registered(plugin), registered(FailingRecallPlugin(), name="failing-recall"):
            assert memory.auto_recall("green tea please") == (
                "<relevant-memories>\n1. about green tea please for agent:main:cli\n</relevant-memories>")  # fmt: skip
            assert "recall exploded" in plugins.plugin_errors()["failing-recall"]
            assert memory.auto_recall("coffee") == ""
            turn = [{"role": "user", "content": "I like tea."}, {"role": "assistant", "content": "Noted."}]
            assert memory.auto_capture(turn) == {"captured": [{"text": "I like tea."}]}
            assert memory.auto_capture(turn, success=False) == {"captured": []}
            assert plugin.turns == [turn, turn]
