"""memory_search / memory_get / memory_status handlers over a real manager on the example workspace."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mdrecall import open_manager
from mdrecall.agent.specs import TOOL_SPECS
from mdrecall.agent.tools import MemoryTools, chat_type_from_session_key, unavailable_result
from mdrecall.embeddings.base import ProviderBase
from mdrecall.errors import ConfigError, EmbeddingError, ProviderUnavailableError, StoreError
from mdrecall.testing import plugin, registered
from mdrecall.types import format_citation

GROUP_KEY = "agent:main:telegram:group:4242"


@pytest.fixture(scope="module")
def manager(example_ws: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store") / "index.sqlite"
    m = open_manager(
        example_ws,
        {"provider": "none", "sources": ["memory", "sessions"], "store": {"path": str(store)}},
        use_global_config=False,
    )
    m.sync()
    yield m
    m.close()


@pytest.fixture(scope="module")
def tools(manager) -> MemoryTools:
    return MemoryTools(manager, session_key="main")


# --- schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TOOL_SPECS))
def test_schemas_are_valid_json_schema(name: str) -> None:
    spec = TOOL_SPECS[name]
    jsonschema.Draft202012Validator.check_schema(spec.input_schema)
    assert spec.input_schema["type"] == "object" and spec.input_schema["additionalProperties"] is False
    openai = spec.to_openai()
    assert openai["type"] == "function" and openai["function"]["name"] == name
    json.dumps(openai)  # serialisable as-is


def test_schema_accepts_the_documented_shapes() -> None:
    search = jsonschema.Draft202012Validator(TOOL_SPECS["memory_search"].input_schema)
    assert search.is_valid({"query": "x", "maxResults": 5, "minScore": 0.2, "corpus": "sessions"})
    assert not search.is_valid({"query": "x", "corpus": "wiki"})
    assert not search.is_valid({"maxResults": 3})
    assert not search.is_valid({"query": "x", "sessionKey": "someone-else"})  # the model cannot pick a scope
    get = jsonschema.Draft202012Validator(TOOL_SPECS["memory_get"].input_schema)
    assert get.is_valid({"path": "MEMORY.md", "from": 3, "lines": 10})
    assert not get.is_valid({"path": "MEMORY.md", "from": 0})


def test_descriptions_tell_the_model_when_and_how() -> None:
    search = TOOL_SPECS["memory_search"].description
    assert "Mandatory recall step" in search and "disabled=true" in search and "memory_get" in search
    assert "nextFrom" in TOOL_SPECS["memory_get"].description


# --- memory_search ---------------------------------------------------------------------------------


def test_search_result_shape(tools: MemoryTools) -> None:
    out = tools.call("memory_search", {"query": "Meilisearch full-text search decision"})
    assert set(out) >= {"results", "provider", "model", "mode", "freshness", "citations", "degraded", "warnings"}
    assert out["provider"] == "none" and out["mode"] == "keyword-only"
    assert out["results"], out
    hit = out["results"][0]
    assert set(hit) == {"path", "startLine", "endLine", "score", "snippet", "source", "citation"}
    assert hit["path"] == "MEMORY.md"
    assert hit["citation"] == format_citation(hit["path"], hit["startLine"], hit["endLine"])
    assert hit["snippet"].endswith(f"\n\nSource: {hit['citation']}")
    assert "Meilisearch" in hit["snippet"]
    json.dumps(out)


def test_max_results_and_min_score_are_honoured(tools: MemoryTools) -> None:
    out = tools.call("memory_search", {"query": "Pebble", "maxResults": 2, "minScore": 0})
    assert 1 <= len(out["results"]) <= 2
    strict = tools.call("memory_search", {"query": "Pebble", "minScore": 1.0})
    assert all(r["score"] >= 1.0 for r in strict["results"])


def test_numbers_sent_as_strings_are_accepted(tools: MemoryTools) -> None:
    out = tools.call("memory_search", {"query": "Pebble", "maxResults": "1", "minScore": "0"})
    assert "error" not in out and len(out["results"]) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "query is required"),
        ({"query": "   "}, "query is required"),
        ({"query": "x", "maxResults": "lots"}, "maxResults must be an integer"),
        ({"query": "x", "maxResults": 0}, "maxResults must be from 1"),
        ({"query": "x", "minScore": 2}, "minScore must be from 0"),
        ({"query": "x", "corpus": "wiki"}, "corpus must be one of memory, sessions, all"),
        ({"query": "x", "sessionKey": "main"}, "unknown argument(s) sessionKey"),
    ],
)
def test_bad_search_arguments_are_explained(tools: MemoryTools, args: dict[str, Any], fragment: str) -> None:
    out = tools.call("memory_search", args)
    assert out["results"] == [] and out["code"] == "invalid_arguments"
    assert fragment in out["error"]


def test_corpus_filters(tools: MemoryTools) -> None:
    memory = tools.call("memory_search", {"query": "meal planner rows JSON blobs", "corpus": "memory", "minScore": 0})
    sessions = tools.call("memory_search", {"query": "meal planner rows JSON blobs", "corpus": "sessions", "minScore": 0})
    both = tools.call("memory_search", {"query": "meal planner rows JSON blobs", "minScore": 0})
    assert memory["results"] and {r["source"] for r in memory["results"]} == {"memory"}
    assert sessions["results"] and {r["source"] for r in sessions["results"]} == {"sessions"}
    assert {r["source"] for r in both["results"]} == {"memory", "sessions"}


def test_sessions_corpus_when_not_indexed(example_ws: Path, tmp_path: Path) -> None:
    with open_manager(example_ws, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}}) as m:
        out = MemoryTools(m).call("memory_search", {"query": "meal planner", "corpus": "sessions"})
    assert out["results"] == [] and "not indexed" in out["warnings"][0]


# --- session scoping, through the tools -----------------------------------------------------------


def test_session_hits_only_for_the_owning_session(tools: MemoryTools) -> None:
    query = {"query": "SELECT recipe_id count GROUP BY recipe_id", "corpus": "sessions", "minScore": 0}
    own = tools.call("memory_search", query)  # default session key "main" owns the transcript
    assert own["results"] and all(r["path"].startswith(".openclaw/sessions/main/") for r in own["results"])
    assert tools.call("memory_search", query, session_key="agent:main:cli:other")["results"] == []
    assert tools.call("memory_search", query, session_key=GROUP_KEY)["results"] == []
    anonymous = MemoryTools(tools.manager())  # no session key at all
    assert anonymous.call("memory_search", query)["results"] == []


def test_other_sessions_still_see_memory_files(tools: MemoryTools) -> None:
    out = tools.call("memory_search", {"query": "meal planner rows JSON blobs", "minScore": 0}, session_key=GROUP_KEY)
    assert out["results"] and {r["source"] for r in out["results"]} == {"memory"}


# --- citations -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        (None, "direct"),
        ("main", "direct"),
        ("agent:main:cli:memory-search", "direct"),
        (GROUP_KEY, "group"),
        ("agent:main:discord:channel:general", "channel"),
        ("agent:group:whatsapp:dm:1", "direct"),  # the agent id is not a chat token
    ],
)
def test_chat_type_from_session_key(key: str | None, kind: str) -> None:
    assert chat_type_from_session_key(key) == kind


def test_citations_auto_hides_sources_in_group_chats(tools: MemoryTools) -> None:
    out = tools.call("memory_search", {"query": "Meilisearch"}, session_key=GROUP_KEY)
    assert out["citations"] == "auto" and out["results"]
    assert all(r["citation"] is None and "Source:" not in r["snippet"] for r in out["results"])


@pytest.mark.parametrize(("mode", "key", "cited"), [("on", GROUP_KEY, True), ("off", "main", False)])
def test_citations_on_and_off(manager, mode: str, key: str, cited: bool) -> None:
    out = MemoryTools(manager, citations=mode).call("memory_search", {"query": "Meilisearch"}, session_key=key)
    assert out["citations"] == mode and out["results"]
    assert all((r["citation"] is not None) == cited for r in out["results"])
    assert all(("\n\nSource: " in r["snippet"]) == cited for r in out["results"])


def test_citations_mode_comes_from_config(example_ws: Path, tmp_path: Path) -> None:
    cfg = {"provider": "none", "citations": "off", "store": {"path": str(tmp_path / "i.sqlite")}}
    with open_manager(example_ws, cfg) as m:
        out = MemoryTools(m).call("memory_search", {"query": "Meilisearch"})
    assert out["citations"] == "off" and all(r["citation"] is None for r in out["results"])


# --- memory_get ------------------------------------------------------------------------------------


def test_get_exact_lines(tools: MemoryTools, example_ws: Path) -> None:
    lines = (example_ws / "memory" / "2026-11-09.md").read_text().split("\n")
    out = tools.call("memory_get", {"path": "memory/2026-11-09.md", "from": 2, "lines": 2})
    assert out["path"] == "memory/2026-11-09.md" and out["from"] == 2 and out["lines"] == 2
    assert out["truncated"] is True and out["nextFrom"] == 4
    assert out["text"] == "\n".join(lines[1:3]) + "\n\n[More content available. Use from=4 to continue.]"


def test_get_whole_small_file_has_no_truncation_fields(tools: MemoryTools, example_ws: Path) -> None:
    out = tools.call("memory_get", {"path": "MEMORY.md"})
    assert out["text"] == (example_ws / "MEMORY.md").read_text().rstrip("\n")
    assert "truncated" not in out and "nextFrom" not in out


def test_get_bounded_with_continuation(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "long.md").write_text("".join(f"line {i}\n" for i in range(1, 151)))
    with open_manager(tmp_path, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}}) as m:
        first = MemoryTools(m).call("memory_get", {"path": "memory/long.md"})
        assert first["lines"] == 120 and first["nextFrom"] == 121 and first["truncated"] is True
        assert first["text"].endswith("Use from=121 to continue.]")
        rest = MemoryTools(m).call("memory_get", {"path": "memory/long.md", "from": first["nextFrom"]})
    assert rest["text"].split("\n")[0] == "line 121" and rest["text"].endswith("line 150")
    assert "truncated" not in rest


def test_a_line_longer_than_max_chars_offers_no_continuation_into_it(tmp_path: Path) -> None:
    """A continuation at the next line would silently skip the rest of the cut one (OpenClaw: none)."""
    (tmp_path / "memory").mkdir()
    long_line = "".join(f"word{i} " for i in range(4000))  # ~31k characters
    (tmp_path / "memory" / "wide.md").write_text(f"# Wide\n{long_line}\nafter the long line\n")
    with open_manager(tmp_path, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}}) as m:
        head = MemoryTools(m).call("memory_get", {"path": "memory/wide.md"})
        assert head["text"].startswith("# Wide\n\n[More content available. Use from=2")  # the line does not fit
        out = MemoryTools(m).call("memory_get", {"path": "memory/wide.md", "from": head["nextFrom"]})
        raw = m.read_file("memory/wide.md", from_line=2)
    assert out["truncated"] is True and "nextFrom" not in out and out["lineCut"] is True
    assert out["text"].startswith(long_line[:12_000])
    assert out["text"].endswith("If you need the full raw line, use read on the source file.]")
    assert raw.line_cut is True and raw.next_from is None and len(raw.text) == 12_000
    assert raw.to_dict()["lineCut"] is True and "nextFrom" not in raw.to_dict()


def test_get_accepts_the_citations_search_prints(tools: MemoryTools, example_ws: Path) -> None:
    hit = tools.call("memory_search", {"query": "Meilisearch"})["results"][0]
    lines = (example_ws / hit["path"]).read_text().split("\n")
    out = tools.call("memory_get", {"path": hit["citation"]})
    assert "error" not in out, out
    assert (out["path"], out["from"], out["lines"]) == (hit["path"], hit["startLine"], hit["endLine"] - hit["startLine"] + 1)
    assert out["text"].split("\n\n[More")[0] == "\n".join(lines[hit["startLine"] - 1 : hit["endLine"]])
    for citation, expected in [("memory/2026-11-09.md#L2", (2, 1)), ("memory/2026-11-09.md#L2-3", (2, 2)),
                               ("memory/2026-11-09.md#L2-L3", (2, 2))]:
        got = tools.call("memory_get", {"path": citation})
        assert (got["path"], got["from"], got["lines"]) == ("memory/2026-11-09.md", *expected)
    # Explicit from/lines win over the citation's range; a backwards range is refused.
    assert tools.call("memory_get", {"path": "memory/2026-11-09.md#L2-L3", "lines": 1})["lines"] == 1
    assert tools.call("memory_get", {"path": "memory/2026-11-09.md#L5-L2"})["code"] == "invalid_path"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [({}, "path is required"), ({"path": 7}, "path is required"), ({"path": "MEMORY.md", "from": 0}, "from must be"),
     ({"path": "MEMORY.md", "lines": "x"}, "lines must be an integer"), ({"path": "MEMORY.md", "corpus": "wiki"}, "unknown")],
)  # fmt: skip
def test_bad_get_arguments(tools: MemoryTools, args: dict[str, Any], fragment: str) -> None:
    out = tools.call("memory_get", args)
    assert out["text"] == "" and out["code"] == "invalid_arguments" and fragment in out["error"]


# --- memory_status and dispatch --------------------------------------------------------------------


def test_status(tools: MemoryTools) -> None:
    out = tools.call("memory_status", {})
    assert out["available"] is True and out["files"] > 0 and out["provider"] == "none"
    assert out["citations"] == "auto"
    json.dumps(out)


def test_unknown_tool(tools: MemoryTools) -> None:
    assert "unknown tool" in tools.call("memory_forget", {"query": "x"})["error"]


def test_restricted_tool_set(manager) -> None:
    only_get = MemoryTools(manager, tools=("memory_get",))
    assert [s.name for s in only_get.specs()] == ["memory_get"]
    assert "unknown tool" in only_get.call("memory_search", {"query": "x"})["error"]


async def _acall(tools: MemoryTools) -> dict[str, Any]:
    return await tools.acall("memory_search", {"query": "Meilisearch"})


def test_async_call(tools: MemoryTools) -> None:
    import asyncio

    assert asyncio.run(_acall(tools))["results"]


# --- when search is impossible, or the embedding service fails --------------------------------------


def test_missing_workspace_disables_search_with_an_explanation(tmp_path: Path) -> None:
    def opener():
        return open_manager(tmp_path / "does-not-exist", {"provider": "none"})

    out = MemoryTools(opener).call("memory_search", {"query": "anything"})
    assert out["disabled"] is True and out["results"] == []
    assert "does-not-exist" in out["error"] and out["warning"] and out["action"]


def test_unknown_provider_is_a_configuration_problem(example_ws: Path, tmp_path: Path) -> None:
    with open_manager(example_ws, {"provider": "no-such-provider", "store": {"path": str(tmp_path / "i.sqlite")}}) as m:
        out = MemoryTools(m).call("memory_search", {"query": "Meilisearch"})
    assert out["disabled"] is True
    assert "no-such-provider" in out["error"]
    assert out["warning"] == "Memory search is unavailable because the memory configuration is invalid."


@pytest.mark.parametrize(
    ("exc", "warning_fragment", "action_fragment"),
    [
        (EmbeddingError("Error code: 429 - insufficient_quota", status=429), "quota is exhausted", "Top up"),
        (EmbeddingError("connection refused"), "embedding/provider error", "Check embedding provider"),
        (ProviderUnavailableError("install mdrecall[local]"), "cannot be used here", "provider: none"),
        (StoreError("database is locked"), "index cannot be opened", "store.path"),
        (ConfigError("unknown key 'qurey'"), "configuration is invalid", "Fix the mdrecall configuration"),
    ],
)
def test_unavailable_messages(exc: Exception, warning_fragment: str, action_fragment: str) -> None:
    out = unavailable_result(exc)
    assert out["results"] == [] and out["disabled"] is True and out["unavailable"] is True
    assert out["error"] == str(exc)
    assert warning_fragment in out["warning"] and action_fragment in out["action"]


class _QuotaExhaustedProvider(ProviderBase):
    """A real provider plugin whose service stores documents fine but then runs out of quota."""

    id = "quota-test"
    model = "quota-test-1"
    dims = 16
    identity = {"provider": "quota-test", "model": "quota-test-1"}
    max_input_tokens = 512
    max_batch_items = 64

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise EmbeddingError("Error code: 429 - insufficient_quota", retryable=False, status=429)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    @staticmethod
    def _vec(text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [b / 255.0 for b in digest[:16]]


def test_failing_embedding_service_degrades_to_keyword_results(example_ws: Path, tmp_path: Path) -> None:
    cfg = {"provider": "quota-test", "store": {"path": str(tmp_path / "i.sqlite")}}
    with registered(plugin(providers={"quota-test": lambda config: _QuotaExhaustedProvider()})):
        with open_manager(example_ws, cfg, use_global_config=False) as m:
            out = MemoryTools(m).call("memory_search", {"query": "Meilisearch"})
    assert "disabled" not in out
    assert out["degraded"] is True and out["results"]
    assert any("insufficient_quota" in w for w in out["warnings"])
    assert "Meilisearch" in out["results"][0]["snippet"]


# --- configurable scope ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def open_scope_tools(example_ws: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("scope-all") / "index.sqlite"
    cfg = {"provider": "none", "sources": ["memory", "sessions"], "sessions": {"visibility": "all"},
           "store": {"path": str(store)}}  # fmt: skip
    with open_manager(example_ws, cfg, use_global_config=False) as m:
        yield MemoryTools(m)


SESSION_QUERY = {"query": "SELECT recipe_id count GROUP BY recipe_id", "corpus": "sessions", "minScore": 0}


def test_visibility_all_shares_transcripts_between_direct_sessions(open_scope_tools: MemoryTools) -> None:
    assert open_scope_tools.call("memory_search", SESSION_QUERY, session_key="agent:main:cli:other")["results"]


def test_group_keys_never_see_private_sessions_even_when_shared(open_scope_tools: MemoryTools) -> None:
    assert open_scope_tools.call("memory_search", SESSION_QUERY, session_key=GROUP_KEY)["results"] == []
