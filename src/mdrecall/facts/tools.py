"""The ``memory_history`` agent tool: the dated statements of one fact, oldest first.

``memory_history {topic, asOf?, maxResults?}`` -> ``{topic, asOf, statements: [{citation, path,
startLine, endLine, source, stated, statedAt, status, snippet, score, supersededBy?,
possiblyRestatedBy?}], warnings, reason}``; ``status`` is ``current``, ``superseded`` or
``possibly superseded`` (docs/facts.md). Registered by :mod:`mdrecall.facts.plugin` for the
Markdown backends; the agent layer checks the arguments against the schema before the handler runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdrecall.agent.arguments import ToolInputError, parse_as_of_arg

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager

MEMORY_HISTORY = "memory_history"
MAX_STATEMENTS = 50

DESCRIPTION = (
    "The history of one fact in memory: its dated statements, oldest first, each with its citation, when it "
    "was stated and its status (current, superseded by a newer statement, or possibly superseded). Use it "
    "when a fact may have changed over time ('where does the database run now, and before?'). asOf limits "
    "it to what was known then."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1, "description": "The fact to trace, e.g. 'database hosting'."},
        "asOf": {"type": "string", "description": "Only what was known then: an ISO date ('2026-03-31') or time."},
        "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_STATEMENTS,
                       "description": "Most statements to list (default 20)."},
    },
    "required": ["topic"],
    "additionalProperties": False,
}  # fmt: skip


def memory_history(manager: MemorySearchManager, arguments: dict[str, Any], session_key: str | None) -> dict[str, Any]:
    from mdrecall.search.history import DEFAULT_STATEMENTS, fact_history

    try:
        as_of = parse_as_of_arg(arguments)
    except ToolInputError as exc:
        raise ValueError(str(exc)) from None
    history = fact_history(manager, arguments["topic"], max_results=arguments.get("maxResults") or DEFAULT_STATEMENTS,
                           session_key=session_key, as_of=as_of)  # fmt: skip
    return history.to_dict()
