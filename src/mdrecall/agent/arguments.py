"""Tool-call arguments as a model sends them, checked: the standard tools' parsers, and
:func:`parse_arguments`, which checks a plugin tool's arguments against its JSON schema.

Models sometimes send numbers as strings or as ``5.0``; what is unambiguous is accepted. Anything
else is a :class:`ToolInputError` whose message says which argument and why, for the model to read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mdrecall.agent.specs import (
    MAX_LINES_CAP,
    MAX_RESULTS_CAP,
    MAX_WRITE_CHARS,
    MEMORY_GET,
    MEMORY_GET_SCHEMA,
    MEMORY_SEARCH,
    MEMORY_SEARCH_SCHEMA,
    MEMORY_WRITE,
    MEMORY_WRITE_SCHEMA,
    Corpus,
    ToolSpec,
)
from mdrecall.search.asof import parse_as_of


class ToolInputError(ValueError):
    """Arguments a model sent that do not fit the schema; the message says which and why."""


def int_arg(args: Mapping[str, Any], key: str, lo: int, hi: int) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    # Models sometimes send numbers as strings or as 5.0; accept what is unambiguous.
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"{key} must be an integer from {lo} to {hi} (got {value!r})")
    if not lo <= value <= hi:
        raise ToolInputError(f"{key} must be from {lo} to {hi} (got {value})")
    return value


def float_arg(args: Mapping[str, Any], key: str, lo: float, hi: float) -> float | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ToolInputError(f"{key} must be a number from {lo} to {hi} (got {value!r})") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolInputError(f"{key} must be a number from {lo} to {hi} (got {value!r})")
    if not lo <= value <= hi:
        raise ToolInputError(f"{key} must be from {lo} to {hi} (got {value})")
    return float(value)


def check_known(args: Mapping[str, Any], schema: Mapping[str, Any], tool: str) -> None:
    if not isinstance(args, Mapping):
        raise ToolInputError(f"{tool} arguments must be a JSON object (got {type(args).__name__})")
    unknown = sorted(set(args) - set(schema["properties"]))
    if unknown:
        allowed = ", ".join(schema["properties"]) or "none"
        raise ToolInputError(f"{tool} got unknown argument(s) {', '.join(unknown)}; allowed: {allowed}")


def parse_arguments(args: Mapping[str, Any], spec: ToolSpec) -> dict[str, Any]:
    """A plugin tool's arguments checked against its schema: no unknown keys, the required ones
    present, and each value of its type (strings stripped, ``minLength`` after stripping), within
    ``minimum``/``maximum`` and in ``enum``. Absent optional keys are left out."""
    schema = spec.input_schema
    check_known(args, schema, spec.name)
    required = set(schema.get("required", ()))
    out: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        if args.get(key) is None:
            if key in required:
                raise ToolInputError(f"{key} is required")
            continue
        kind = prop.get("type")
        value: Any = args[key]
        if kind == "integer":
            value = int_arg(args, key, prop.get("minimum", -(2**63)), prop.get("maximum", 2**63))
        elif kind == "number":
            value = float_arg(args, key, prop.get("minimum", -math.inf), prop.get("maximum", math.inf))
        elif kind == "string":
            if not isinstance(value, str):
                raise ToolInputError(f"{key} must be a string (got {type(value).__name__})")
            value = value.strip()
            if len(value) < prop.get("minLength", 0):
                raise ToolInputError(f"{key} must be a non-empty string" if prop.get("minLength") == 1
                                     else f"{key} must have at least {prop['minLength']} characters")  # fmt: skip
        elif kind == "boolean" and not isinstance(value, bool):
            raise ToolInputError(f"{key} must be true or false (got {value!r})")
        if "enum" in prop and value not in prop["enum"]:
            raise ToolInputError(f"{key} must be one of {', '.join(map(str, prop['enum']))} (got {value!r})")
        out[key] = value
    return out


def parse_search_args(args: Mapping[str, Any]) -> tuple[str, int | None, float | None, Corpus]:
    check_known(args, MEMORY_SEARCH_SCHEMA, MEMORY_SEARCH)
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolInputError("query is required: a non-empty string saying what to look for")
    corpus: Corpus = args.get("corpus") or "all"
    if corpus not in ("memory", "sessions", "all"):
        raise ToolInputError(f"corpus must be one of memory, sessions, all (got {corpus!r})")
    return (
        query.strip(),
        int_arg(args, "maxResults", 1, MAX_RESULTS_CAP),
        float_arg(args, "minScore", 0.0, 1.0),
        corpus,
    )


def parse_as_of_arg(args: Mapping[str, Any]) -> datetime | None:
    """``asOf``: an ISO date (the end of that day, UTC) or time; None when absent."""
    value = args.get("asOf")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError("asOf must be an ISO date or time string, e.g. 2026-03-31 or 2026-03-31T14:00:00Z")
    try:
        return parse_as_of(value)
    except ValueError as exc:
        raise ToolInputError(f"asOf: {exc}") from None


def parse_get_args(args: Mapping[str, Any]) -> tuple[str, int | None, int | None]:
    check_known(args, MEMORY_GET_SCHEMA, MEMORY_GET)
    path = args.get("path")
    if not isinstance(path, str):
        raise ToolInputError("path is required: a memory file such as MEMORY.md or memory/2026-01-31.md")
    return path, int_arg(args, "from", 1, 10**9), int_arg(args, "lines", 1, MAX_LINES_CAP)


def parse_write_args(args: Mapping[str, Any]) -> tuple[str, str | None]:
    check_known(args, MEMORY_WRITE_SCHEMA, MEMORY_WRITE)
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("text is required: a non-empty string, the fact to remember")
    if len(text) > MAX_WRITE_CHARS:
        raise ToolInputError(f"text must be at most {MAX_WRITE_CHARS} characters (got {len(text)})")
    target = args.get("target")
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise ToolInputError("target must be a memory file path such as MEMORY.md or memory/projects.md")
    return text, target.strip() if isinstance(target, str) else None
