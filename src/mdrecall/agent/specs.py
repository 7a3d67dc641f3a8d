"""The memory tools as a model sees them: names, descriptions and JSON schemas (OpenAI/MCP format)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

MEMORY_SEARCH = "memory_search"
MEMORY_GET = "memory_get"
MEMORY_STATUS = "memory_status"
MEMORY_WRITE = "memory_write"

Corpus = Literal["memory", "sessions", "all"]

MAX_RESULTS_CAP = 50
MAX_LINES_CAP = 2000
#: The most characters one memory_write may hold (mdrecall.sources.remember.MAX_TEXT_CHARS).
MAX_WRITE_CHARS = 8000

MEMORY_SEARCH_DESCRIPTION = (
    "Mandatory recall step: search long-term memory (MEMORY.md + memory/*.md, plus session transcripts "
    "when they are indexed) before answering questions about prior work, decisions, dates, people, "
    "preferences, or todos. Returns ranked snippets with path and line range; then use memory_get to "
    "read only the lines you need. A result with supersededBy holds an out-of-date statement: prefer the "
    "newer one it cites. corpus selects memory files, sessions, or all (default); asOf answers as known then. "
    "If the response has disabled=true, memory retrieval is unavailable: tell the user, using the "
    "response's warning and action."
)
MEMORY_GET_DESCRIPTION = (
    "Safe exact excerpt read from MEMORY.md, memory/**/*.md or configured extra memory paths, usually a "
    "path returned by memory_search. Returns a bounded excerpt (default 120 lines) when lines is omitted; "
    "when more content exists the result has truncated=true and nextFrom, the line to pass as from to "
    "continue. Session transcripts cannot be read with this tool."
)
MEMORY_STATUS_DESCRIPTION = (
    "Report the memory index status: workspace, files and chunks indexed, embedding provider and model, "
    "search mode (hybrid, keyword-only, ...), freshness and any warnings."
)

MEMORY_WRITE_DESCRIPTION = (
    "Save a fact to long-term memory: appends one entry to today's daily note (memory/YYYY-MM-DD.md), "
    "or to target (MEMORY.md for durable facts, memory/<topic>.md for a topic), with a timestamp. "
    "Write short, self-contained facts (who, what, when), not conversation. Secrets are redacted. "
    "Returns the citation of what was written; it is searchable with memory_search at once."
)

MEMORY_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "What to look for: a question or keywords, e.g. 'database choice for search'.",
        },
        "maxResults": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RESULTS_CAP,
            "description": "Most results to return (default 10).",
        },
        "minScore": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Drop results scoring below this, from 0 to 1 (default 0.35).",
        },
        "corpus": {
            "type": "string",
            "enum": ["memory", "sessions", "all"],
            "description": "memory: MEMORY.md and memory/ files; sessions: past session transcripts; all (default): both.",
        },
        "asOf": {
            "type": "string",
            "description": (
                "Answer as known then: only notes dated on or before this date and messages before this time, "
                "e.g. '2026-03-31' (the whole day) or '2026-03-31T14:00:00Z'. Omit for everything known now."
            ),
        },
        "explain": {
            "type": "boolean",
            "description": "Also say why each result scored what it did, signal by signal on the score's scale (default false).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

MEMORY_GET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": (
                "Workspace-relative memory file, e.g. 'MEMORY.md' or 'memory/2026-01-31.md', or a citation from "
                "memory_search such as 'memory/2026-01-31.md#L3-L7' (from/lines default to its range)."
            ),
        },
        "from": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based (default 1)."},
        "lines": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LINES_CAP,
            "description": "How many lines to read (default and cap 120; output is also capped at 12,000 characters).",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}

MEMORY_STATUS_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

MEMORY_WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_WRITE_CHARS,
            "description": "The fact to remember, e.g. 'Deploys need a green canary for 30 minutes (decided 2026-11-05)'.",
        },
        "target": {
            "type": "string",
            "description": "Memory file to append to: MEMORY.md or memory/<name>.md (default: today's memory/YYYY-MM-DD.md).",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    #: The MCP annotations: False for tools that change memory (memory_write, memory_store), which
    #: clients show as such; ``destructive`` for tools that delete (memory_forget). A read-only tool
    #: is also idempotent.
    read_only: bool = True
    destructive: bool = False
    #: Not in a host's default tool set: offered when named (``MemoryTools(tools=...)``), as
    #: memory_write is; ``mdrecall mcp`` serves it unless ``--read-only`` (memory_forget_lines).
    opt_in: bool = False

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI-compatible ``tools`` entry (Chat Completions format)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }


TOOL_SPECS: dict[str, ToolSpec] = {
    MEMORY_SEARCH: ToolSpec(MEMORY_SEARCH, MEMORY_SEARCH_DESCRIPTION, MEMORY_SEARCH_SCHEMA),
    MEMORY_GET: ToolSpec(MEMORY_GET, MEMORY_GET_DESCRIPTION, MEMORY_GET_SCHEMA),
    MEMORY_STATUS: ToolSpec(MEMORY_STATUS, MEMORY_STATUS_DESCRIPTION, MEMORY_STATUS_SCHEMA),
    MEMORY_WRITE: ToolSpec(MEMORY_WRITE, MEMORY_WRITE_DESCRIPTION, MEMORY_WRITE_SCHEMA, read_only=False),
}
