"""ChatGPT and Claude.ai data exports imported as session transcripts (``mdrecall import-chats``).

Both services export a ``conversations.json`` (inside a ``.zip``); docs/hosts/chatgpt.md and
docs/hosts/claude-ai.md describe what is read:

* ChatGPT: a list of ``{"id"/"conversation_id", "title", "create_time", "current_node", "mapping":
  {node: {"message": {"author": {"role"}, "content": {"content_type", "parts"}, "create_time",
  "recipient", "metadata"}, "parent", "children"}}}``. A conversation is a tree (every edit or
  regeneration is a branch); the branch read is the one the user last saw, from ``current_node`` up
  to the root.
* Claude.ai: a list of ``{"uuid", "name", "created_at", "chat_messages": [{"sender": "human"|"assistant",
  "text", "content": [{"type": "text", "text"}], "created_at"}]}``.

Why an import and not a source read in place (as the hosts' session logs are): an export is a
snapshot the user downloads now and then, one JSON file of hundreds of megabytes that is often a
single line, so a citation into it could not name a line, and it changes only when a new export
replaces it. Each conversation becomes one transcript, ``<sessions.dir>/<chatgpt|claude-ai>/transcripts/<id>.jsonl``:
a header line, then one ``{"role", "content", "timestamp"}`` line per message, so a hit cites the
message's own line. Secrets are redacted before anything is written (an export pasted into a
workspace kept in git must not carry an API key along). Importing again (a newer export) rewrites
only conversations that changed, atomically, and never deletes one that the new export lacks.

Malformed conversations and messages are skipped and counted, and content or sender types this
module does not know are counted by name: the report says what was left out, nothing raises.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from mdrecall.errors import MdrecallError
from mdrecall.sources.redact import redact_secrets

Service = Literal["chatgpt", "claude-ai"]
SERVICES: tuple[Service, ...] = ("chatgpt", "claude-ai")
EXPORT_NAME = "conversations.json"

#: ChatGPT content types that carry no conversation text (tool traffic, context, reasoning).
CHATGPT_SILENT_CONTENT = frozenset(
    {
        "code", "execution_output", "tether_browsing_display", "tether_quote", "system_error",
        "user_editable_context", "model_editable_context", "thoughts", "reasoning_recap", "sonic_webpage",
        "computer_output", "app_pairing_content",
    }
)  # fmt: skip
CHATGPT_TEXT_CONTENT = frozenset({"text", "multimodal_text"})
CHATGPT_ROLES = {"user": "user", "assistant": "assistant"}
CHATGPT_SILENT_ROLES = frozenset({"system", "tool"})
CLAUDE_SENDERS = {"human": "user", "assistant": "assistant"}
CLAUDE_SILENT_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document", "token_budget"})

_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]+")


class ExportError(MdrecallError):
    """The file is not an export this module reads (the message says what it found)."""


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    text: str
    timestamp: str | None


@dataclass(slots=True)
class Conversation:
    service: Service
    id: str
    title: str
    created: str | None
    updated: str | None
    messages: list[Message] = field(default_factory=list)


@dataclass(slots=True)
class ImportReport:
    service: Service
    directory: str
    conversations: int = 0
    messages: int = 0
    written: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    #: Conversations with no user or assistant text (nothing written).
    empty: int = 0
    #: Entries that were not conversations (not an object, no id).
    malformed: int = 0
    #: What was left out, by kind (``"content:execution_output"``, ``"role:tool"``): known, not text.
    skipped: dict[str, int] = field(default_factory=dict)
    #: Types this module does not know (``"content:new_widget"``): skipped, and worth a look.
    unknown: dict[str, int] = field(default_factory=dict)
    redacted: int = 0
    dry_run: bool = False

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "directory": self.directory,
            "conversations": self.conversations,
            "messages": self.messages,
            "written": len(self.written),
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "empty": self.empty,
            "malformed": self.malformed,
            "skipped": dict(sorted(self.skipped.items())),
            "unknown": dict(sorted(self.unknown.items())),
            "redacted": self.redacted,
            "dryRun": self.dry_run,
            "files": sorted(self.written + self.updated),
        }


# --- reading the export ---------------------------------------------------------------------------


def load_export(path: Path) -> Any:
    """The parsed ``conversations.json`` from the file itself, the export's ``.zip``, or its folder."""
    path = path.expanduser()
    if path.is_dir():
        path = path / EXPORT_NAME
        if not path.is_file():
            raise ExportError(f"{path.parent}: no {EXPORT_NAME} in this folder (unzip the export, or pass the .zip)")
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == EXPORT_NAME]
                if not names:
                    raise ExportError(f"{path}: the archive holds no {EXPORT_NAME}; is it a ChatGPT or Claude.ai data export?")
                with archive.open(min(names, key=len)) as member:
                    return json.load(io.TextIOWrapper(member, encoding="utf-8-sig"))
        with path.open(encoding="utf-8-sig") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ExportError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path}: not valid JSON ({exc}); is the download complete?") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise ExportError(f"{path}: cannot read it: {exc}") from None


def detect_service(data: Any) -> Service:
    if not isinstance(data, list):
        raise ExportError(f"expected a list of conversations, found a JSON {type(data).__name__}")
    for item in data:
        if isinstance(item, Mapping):
            if "mapping" in item:
                return "chatgpt"
            if "chat_messages" in item:
                return "claude-ai"
    raise ExportError("no conversation in it has a 'mapping' (ChatGPT) or 'chat_messages' (Claude.ai); pass --from to say which it is")


def _iso(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _chatgpt_branch(mapping: Mapping[str, Any], current: Any) -> list[Mapping[str, Any]]:
    """The nodes from the root to ``current`` (the branch last shown); the newest leaf without one."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [k for k, v in mapping.items() if isinstance(v, Mapping) and not v.get("children")]
        if not leaves:
            return []

        def stamp(key: str) -> float:
            message = mapping[key].get("message")
            value = message.get("create_time") if isinstance(message, Mapping) else None
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        current = max(leaves, key=stamp)
    branch: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, Mapping):
            break
        branch.append(node)
        node_id = node.get("parent")
    return branch[::-1]


def _chatgpt_message(node: Mapping[str, Any], report: ImportReport) -> Message | None:
    message = node.get("message")
    if not isinstance(message, Mapping):
        return None  # the root placeholder
    author = message.get("author")
    role = author.get("role") if isinstance(author, Mapping) else None
    if role not in CHATGPT_ROLES:
        report.count(report.skipped if role in CHATGPT_SILENT_ROLES else report.unknown, f"role:{role}")
        return None
    metadata = message.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("is_visually_hidden_from_conversation"):
        report.count(report.skipped, "hidden")
        return None
    if message.get("recipient", "all") != "all":
        report.count(report.skipped, "to-tool")  # the assistant calling a tool (browser, python)
        return None
    content = message.get("content")
    kind = content.get("content_type") if isinstance(content, Mapping) else None
    if kind not in CHATGPT_TEXT_CONTENT:
        report.count(report.skipped if kind in CHATGPT_SILENT_CONTENT else report.unknown, f"content:{kind}")
        return None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    text = "\n".join(p for p in parts if isinstance(p, str)) if isinstance(parts, list) else ""
    if not text.strip():
        return None
    return Message(CHATGPT_ROLES[role], text, _iso(message.get("create_time")))


def _chatgpt(item: Mapping[str, Any], report: ImportReport) -> Conversation | None:
    ident = item.get("conversation_id") or item.get("id")
    mapping = item.get("mapping")
    if not isinstance(ident, str) or not isinstance(mapping, Mapping):
        report.malformed += 1
        return None
    conversation = Conversation("chatgpt", ident, str(item.get("title") or ""), _iso(item.get("create_time")),
                                _iso(item.get("update_time")))  # fmt: skip
    for node in _chatgpt_branch(mapping, item.get("current_node")):
        found = _chatgpt_message(node, report)
        if found is not None:
            conversation.messages.append(found)
    return conversation


def _claude_text(message: Mapping[str, Any], report: ImportReport) -> str:
    content = message.get("content")
    if isinstance(content, list) and content:
        parts = []
        for block in content:
            if not isinstance(block, Mapping):
                report.count(report.skipped, "malformed-block")
                continue
            kind, text = block.get("type"), block.get("text")
            if kind == "text" and isinstance(text, str):
                parts.append(text)
            else:
                report.count(report.skipped if kind in CLAUDE_SILENT_BLOCKS else report.unknown, f"content:{kind}")
        return "\n".join(parts)
    text = message.get("text")
    return text if isinstance(text, str) else ""


def _claude(item: Mapping[str, Any], report: ImportReport) -> Conversation | None:
    ident = item.get("uuid")
    messages = item.get("chat_messages")
    if not isinstance(ident, str) or not isinstance(messages, list):
        report.malformed += 1
        return None
    conversation = Conversation("claude-ai", ident, str(item.get("name") or ""), _iso(item.get("created_at")),
                                _iso(item.get("updated_at")))  # fmt: skip
    for message in messages:
        if not isinstance(message, Mapping):
            report.count(report.skipped, "malformed-message")
            continue
        sender = message.get("sender")
        if sender not in CLAUDE_SENDERS:
            report.count(report.unknown, f"sender:{sender}")
            continue
        text = _claude_text(message, report)
        if text.strip():
            conversation.messages.append(Message(CLAUDE_SENDERS[sender], text, _iso(message.get("created_at"))))
    return conversation


def read_conversations(data: Any, service: Service, report: ImportReport) -> Iterable[Conversation]:
    if not isinstance(data, list):
        raise ExportError(f"expected a list of conversations, found a JSON {type(data).__name__}")
    reader = _chatgpt if service == "chatgpt" else _claude
    for item in data:
        if not isinstance(item, Mapping):
            report.malformed += 1
            continue
        found = reader(item, report)
        if found is not None:
            yield found


# --- writing transcripts --------------------------------------------------------------------------


def transcript_name(conversation: Conversation) -> str:
    safe = _SAFE_ID.sub("-", conversation.id).strip("-")[:100]
    return f"{safe or 'conversation'}.jsonl"


def render_jsonl(conversation: Conversation, source_name: str) -> tuple[str, int]:
    """(the transcript's text, secrets redacted): a header line, then one line per message."""
    redacted = 0

    def clean(text: str) -> str:
        nonlocal redacted
        out = redact_secrets(text)
        redacted += out.count("[REDACTED:") - text.count("[REDACTED:")
        return out

    header = {"type": "conversation", "source": f"{conversation.service}-export", "id": conversation.id,
              "title": clean(conversation.title), "createdAt": conversation.created, "updatedAt": conversation.updated,
              "importedFrom": source_name}  # fmt: skip
    lines = [json.dumps(header, ensure_ascii=False)]
    for message in conversation.messages:
        record: dict[str, Any] = {"role": message.role, "content": clean(message.text)}
        if message.timestamp:
            record["timestamp"] = message.timestamp
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + "\n", redacted


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def import_export(source: Path, sessions_root: Path, *, service: Service | None = None, dry_run: bool = False) -> ImportReport:
    """Write the export's conversations as transcripts under ``sessions_root/<service>/transcripts``."""
    data = load_export(source)
    chosen = service or detect_service(data)
    directory = sessions_root / chosen / "transcripts"
    report = ImportReport(chosen, str(directory), dry_run=dry_run)
    for conversation in read_conversations(data, chosen, report):
        report.conversations += 1
        if not conversation.messages:
            report.empty += 1
            continue
        report.messages += len(conversation.messages)
        text, redacted = render_jsonl(conversation, source.name)
        report.redacted += redacted
        target = directory / transcript_name(conversation)
        try:
            before = target.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            before = None
        if before is not None and _same_conversation(before, text):
            report.unchanged += 1
            continue
        (report.updated if before is not None else report.written).append(str(target))
        if not dry_run:
            _write_atomic(target, text)
    return report


def _same_conversation(before: str, after: str) -> bool:
    """Equal but for the header's ``importedFrom`` (the same conversation from a renamed download)."""
    if before == after:
        return True
    old, _, old_rest = before.partition("\n")
    new, _, new_rest = after.partition("\n")
    if old_rest != new_rest:
        return False
    try:
        a, b = json.loads(old), json.loads(new)
    except ValueError:
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        a.pop("importedFrom", None)
        b.pop("importedFrom", None)
    return bool(a == b)
