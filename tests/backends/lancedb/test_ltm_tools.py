"""memory_store / memory_recall / memory_forget through MemoryCapability, on a folder and on S3."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mdrecall.agent.plugin import create_memory_capability


@pytest.fixture
def capability(local_model: Any, ltm_ws: Any, target: Any) -> Any:
    cap = create_memory_capability(ltm_ws, target.config())
    yield cap
    cap.close()


def test_tools_offered_for_the_lancedb_backend(capability: Any) -> None:
    names = [spec.name for spec in capability.tools.specs()]
    assert names == ["memory_search", "memory_get", "memory_status", "memory_store", "memory_recall", "memory_forget"]
    specs = {s.name: s for s in capability.tools.specs()}
    assert specs["memory_forget"].destructive and not specs["memory_store"].read_only
    assert {t["function"]["name"] for t in capability.openai_tools()} >= {"memory_store", "memory_recall"}


def test_store_recall_and_near_duplicates(capability: Any) -> None:
    first = capability.call_tool("memory_store", {"text": "I prefer dark mode in every editor and terminal."})
    assert first["action"] == "created" and first["category"] == "preference"
    assert first["citation"] == f"ltm:{first['id']}#L1"
    assert capability.call_tool("memory_get", {"path": first["citation"]})["text"] == first["text"]
    again = capability.call_tool("memory_store", {"text": "i prefer DARK MODE in every editor and terminal!"})
    assert again["action"] == "duplicate" and again["existingId"] == first["id"]
    reworded = capability.call_tool("memory_store", {"text": "I prefer dark mode in all editors and terminals"})
    assert reworded["action"] == "duplicate"
    # A changed preference is not a duplicate: the newer statement must be there to be recalled.
    changed = capability.call_tool("memory_store", {"text": "I prefer light mode in every editor and terminal now.",
                                                    "importance": 0.9, "category": "preference"})
    assert changed["action"] == "created"
    recalled = capability.call_tool("memory_recall", {"query": "editor colour theme", "limit": 3})
    assert recalled["count"] == 2
    assert {m["id"] for m in recalled["memories"]} == {first["id"], changed["id"]}
    assert all(0 < m["score"] <= 1 and m["citation"] == f"ltm:{m['id']}#L1" for m in recalled["memories"])
    assert "untrusted" in recalled["text"]
    none = capability.call_tool("memory_recall", {"query": "How many moons does Jupiter have?"})
    assert none == {"count": 0, "memories": [], "text": "No relevant memories found."}
    # memory_search and memory_get work unchanged on the same entries
    search = capability.call_tool("memory_search", {"query": "dark mode", "corpus": "memory"})
    assert search["results"] and search["results"][0]["path"].startswith("ltm:")
    got = capability.call_tool("memory_get", {"path": search["results"][0]["path"]})
    assert "mode" in got["text"]


def test_duplicate_storm_stores_one(capability: Any) -> None:
    variants = ["We decided to use PostgreSQL 16 for the billing service."] * 5 + [
        "we decided to use postgresql 16 for the billing service",
        "We decided to use PostgreSQL 16 for the billing service!!",
        "We have decided to use PostgreSQL 16 for the billing service.",
        "  We decided to use PostgreSQL 16   for the billing service. ",
    ]
    outcomes = [capability.call_tool("memory_store", {"text": t}) for t in variants]
    assert [o["action"] for o in outcomes].count("created") == 1
    assert capability.runtime.manager().count() == 1


def test_bad_arguments_are_answers_not_exceptions(capability: Any) -> None:
    assert capability.call_tool("memory_store", {"text": ""})["code"] == "invalid_arguments"
    assert capability.call_tool("memory_store", {"text": "x", "category": "gossip"})["code"] == "invalid_arguments"
    assert capability.call_tool("memory_store", {"text": "I like tea", "importance": 7})["code"] == "invalid_arguments"
    assert capability.call_tool("memory_recall", {"query": "tea", "bogus": 1})["code"] == "invalid_arguments"
    assert capability.call_tool("memory_forget", {})["code"] == "missing_param"
    assert capability.call_tool("memory_forget", {"memoryId": "not-a-uuid"})["code"] == "invalid_id"
    too_long = capability.call_tool("memory_store", {"text": "I like tea. " * 1000})
    assert too_long["code"] == "invalid_arguments" and "at most" in too_long["error"]


def test_secrets_are_redacted_by_memory_store(capability: Any, target: Any) -> None:
    out = capability.call_tool("memory_store", {"text": "The deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789AB for CI."})
    assert "ghp_" not in out["text"]
    capability.runtime.manager().sync(force=True)
    assert not any(b"ghp_abcdefghij" in data for data in target.files().values())


def test_forget_by_query_only_when_unambiguous(capability: Any) -> None:
    store = lambda text: capability.call_tool("memory_store", {"text": text})  # noqa: E731
    tea = store("I drink green tea every morning.")
    store("My flight to Lisbon leaves on 14 May from gate B12.")
    store("My flight to Lisbon returns on 21 May to gate A4.")
    ambiguous = capability.call_tool("memory_forget", {"query": "my flight to Lisbon"})
    assert ambiguous["action"] == "candidates" and len(ambiguous["candidates"]) == 2
    assert capability.runtime.manager().count() == 3
    nothing = capability.call_tool("memory_forget", {"query": "What is the capital of Australia?"})
    assert nothing["action"] == "none"
    done = capability.call_tool("memory_forget", {"query": "I drink green tea every morning"})
    assert done["action"] == "deleted" and done["id"] == tea["id"]
    assert capability.runtime.manager().count() == 2
    by_id = capability.call_tool("memory_forget", {"memoryId": ambiguous["candidates"][0]["id"]})
    assert by_id["action"] == "deleted"
    assert capability.call_tool("memory_forget", {"memoryId": by_id["id"]})["action"] == "not_found"


def test_forgotten_text_leaves_no_byte_in_any_file(capability: Any, target: Any) -> None:
    """The memory is gone from every version, data file, deletion file and index after the call."""
    secret = "Kumquat-Zebra-7731 is the codeword for the surprise party"
    kept = "Marmalade-Otter-4410 is the codeword for the board meeting"
    manager = capability.runtime.manager()
    doomed = capability.call_tool("memory_store", {"text": secret})
    capability.call_tool("memory_store", {"text": kept})
    for i in range(6):  # more versions and fragments around it
        capability.call_tool("memory_store", {"text": f"I always water plant number {i} on {['Monday', 'Tuesday', 'Friday'][i % 3]}s."})
    manager.sync(force=True)  # compaction + full-text index: the text is in a merged file and the index
    words = [w.encode() for w in re.findall(r"[A-Za-z0-9-]{6,}", secret) if w.lower() not in kept.lower()]

    def files_with(patterns: list[bytes]) -> list[str]:
        return sorted(path for path, data in target.files().items() if any(p in data for p in patterns))

    # Positive control: before forgetting, the words are found on disk (the check can fail).
    assert files_with(words), "the test cannot see the stored text"
    assert files_with([b"Marmalade-Otter-4410"])

    result = capability.call_tool("memory_forget", {"memoryId": doomed["id"]})
    assert result["action"] == "deleted"
    assert files_with(words) == []
    assert files_with([b"Marmalade-Otter-4410"]), "the other memory must survive"
    assert capability.call_tool("memory_recall", {"query": "surprise party codeword"})["memories"][0]["text"] == kept
    # the keyword index was rebuilt without it
    assert manager.store.keyword("Kumquat", manager.agent_id, 5) == []
    assert [r.text for r, _ in manager.store.keyword("Marmalade", manager.agent_id, 5)] == [kept]
