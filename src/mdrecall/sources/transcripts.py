"""Session transcripts (source ``"sessions"``): JSONL chat logs rendered as searchable text.

Layout: ``<workspace>/<sessions.dir>/<sessionKey>/transcripts/*.jsonl`` (``sessions.dir`` defaults to
``.openclaw/sessions``), one JSON object per line. Two record shapes are accepted:

* OpenClaw: ``{"type": "message", "message": {"role", "content", "timestamp"}}``
* flat:     ``{"role", "content", "timestamp"}`` (also the older Codex CLI layout)
* Claude Code and Codex CLI session logs (:mod:`mdrecall.sources.hostlogs`)

Only user and assistant text is kept (string content, or the ``text`` blocks of a block list); tool
calls and results, images, system wrappers, cron and heartbeat traffic are dropped. Each message is
sanitised, redacted, collapsed to one line and rendered as ``User: …`` / ``Assistant: …``; long
messages are wrapped. ``line_map[i]`` is the 1-based JSONL line that rendered line ``i`` came from, so
a chunk covering rendered lines a..b cites JSONL lines ``line_map[a-1]..line_map[b-1]``.

Transcripts are written by other programs and are often truncated mid-line or mis-encoded, so nothing
in here raises on bad input: bad lines are skipped and counted, and so are host log records of a
type :mod:`mdrecall.sources.hostlogs` does not know.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mdrecall.sources.hostlogs import clean_host_text, read_host_record
from mdrecall.sources.redact import redact_secrets
from mdrecall.text import collapse_whitespace

SESSIONS_SOURCE = "sessions"
DEFAULT_SESSIONS_DIR = ".openclaw/sessions"
# Matches OpenClaw's SESSION_EXPORT_CONTENT_WRAP_CHARS.
WRAP_CHARS = 800

_ROLE_PREFIX = {"user": "User", "assistant": "Assistant"}
_SYSTEM_WRAPPER = re.compile(r"^System(?: \(untrusted\))?: \[[^\]]+\]\s*")
_HEARTBEAT_PROMPT_START = "Read HEARTBEAT.md if it exists"
_HEARTBEAT_OK = "HEARTBEAT_OK"
_SILENT_REPLY = "NO_REPLY"
_DREAMING_PREFIX = "dreaming-narrative-"
# Channel envelopes a gateway puts on user messages: a label line, then a fenced JSON block, e.g.
#
#     Conversation info (untrusted metadata):
#     ```json
#     {"message_id": "87", "sender_id": "8726379476", "sender": "Xiao"}
#     ```
#
#     Sender (untrusted metadata):
#     ```json
#     {"label": "Xiao (8726379476)", "id": "8726379476", "name": "Xiao"}
#     ```
#
# The labels are OpenClaw's (stripInboundMetadata), plus older "... info" forms; a label line may
# carry a "[Wed 2026-04-01 10:19 GMT+8]" stamp in front.
INBOUND_LABELS = (
    "Conversation info (untrusted metadata):",
    "Sender (untrusted metadata):",
    "Thread starter (untrusted, for context):",
    "Replied message (untrusted, for context):",
    "Reply target of current user message (untrusted, for context):",
    "Forwarded message context (untrusted metadata):",
    "Chat history since last reply (untrusted, for context):",
)
_INBOUND_LABEL_LINE = re.compile(
    r"^[ \t]*(?:\[[^\]\n]*\][ \t]*)?(?:"
    + "|".join(re.escape(label) for label in INBOUND_LABELS)
    + r"|(?:Conversation info|Sender info|Thread info|Channel info)\b[^\n]*)[ \t]*$"
)
_INBOUND_HINT = re.compile(r"untrusted|Conversation info|Sender info|Thread info|Channel info")
_FENCE_OPEN = ("```json", "```")


@dataclass(frozen=True, slots=True)
class RenderedTranscript:
    text: str
    line_map: list[int]
    message_count: int
    # Per kept message: epoch milliseconds, or None when the record had no usable timestamp.
    timestamps: list[int | None] = field(default_factory=list)
    # JSONL lines that were not valid JSON objects (truncated writes, garbage).
    skipped_lines: int = 0
    # Host log records of a type not known (``"claude-code:<type>"``): skipped, counted per type.
    unknown_records: dict[str, int] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n") if self.text else []

    @property
    def hash(self) -> str:
        """Content identity (OpenClaw's formula): text, line map and timestamps."""
        stamps = ",".join("" if t is None else str(t) for t in self.timestamps)
        payload = f"{self.text}\n{','.join(map(str, self.line_map))}\n{stamps}"
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def jsonl_lines(self, start_line: int, end_line: int) -> tuple[int, int]:
        """Map a 1-based rendered line range to the JSONL line range it came from."""
        if not self.line_map:
            return start_line, end_line
        lo = min(max(start_line, 1), len(self.line_map))
        hi = min(max(end_line, lo), len(self.line_map))
        return self.line_map[lo - 1], self.line_map[hi - 1]


def _parse_timestamp(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        # Below 1e11 is seconds (1e11 ms is 1973), as OpenClaw decides.
        return int(value * 1000) if value < 1e11 else int(value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            return int(datetime.fromisoformat(text).timestamp() * 1000)
        except ValueError:
            return None
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            # "text" everywhere; "input_text"/"output_text" in Codex CLI logs
            if isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text")
            and isinstance(block.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def _is_dreaming_record(record: dict[str, Any]) -> bool:
    data = record.get("data")
    candidates = [record.get("runId"), record.get("sessionKey")]
    if isinstance(data, dict):
        candidates.append(data.get("runId"))
    return any(isinstance(c, str) and c.startswith(_DREAMING_PREFIX) for c in candidates)


def _message_of(record: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """Return (role, content, timestamp) for a message record of either shape, else None."""
    if record.get("type") == "message" and isinstance(record.get("message"), dict):
        msg = record["message"]
        ts = msg.get("timestamp", record.get("timestamp"))
    elif "role" in record and "content" in record and record.get("type") in (None, "message"):
        msg = record
        ts = record.get("timestamp")
    else:
        host = read_host_record(record)
        return host.message if host is not None else None
    role = msg.get("role")
    if role not in _ROLE_PREFIX:
        return None
    return role, msg.get("content"), ts


def strip_inbound_metadata(text: str) -> str:
    """Remove the channel envelopes (label line + fenced JSON block, and the blank lines after it)."""
    if not _INBOUND_HINT.search(text):
        return text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _INBOUND_LABEL_LINE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j].strip() in _FENCE_OPEN:
                # Everything up to the closing fence is metadata (to the end, if it never closes:
                # OpenClaw does the same, and an open envelope is not a message).
                k = j + 1
                while k < len(lines) and lines[k].strip() != "```":
                    k += 1
                i = k + 1
                while i < len(lines) and not lines[i].strip():
                    i += 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def sanitize_message(role: str, text: str) -> str | None:
    """Clean one message's text; None when the message carries nothing worth indexing."""
    if role == "user":
        # Envelopes must go before newlines are collapsed, or the fences can no longer be found.
        text = strip_inbound_metadata(text)
    # Redact before collapsing whitespace so multi-line secrets (PEM blocks) are seen whole.
    text = redact_secrets(text)
    text = collapse_whitespace(text)
    if not text:
        return None
    if role == "user":
        if _SYSTEM_WRAPPER.match(text) or text.startswith("[cron:"):
            return None
        if text.startswith(_HEARTBEAT_PROMPT_START):
            return None
    else:
        if text == _HEARTBEAT_OK or text == _SILENT_REPLY:
            return None
    return text


def wrap_text(text: str, width: int = WRAP_CHARS) -> list[str]:
    """Split at the last space at or before ``width``; hard-cut words longer than ``width``."""
    segments: list[str] = []
    rest = text
    while len(rest) > width:
        cut = rest.rfind(" ", 0, width + 1)
        if cut <= 0:
            cut = width
        segments.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        segments.append(rest)
    return segments


def _records(text: str, first_line: int) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Each non-blank JSONL line of ``text`` (numbered from ``first_line``) and its JSON object, None
    for a line that is not one (truncated writes, garbage)."""
    # Lines end at "\n" only: str.splitlines() also breaks at U+2028/U+2029/U+0085 (and \x0b, \x1c…),
    # which JavaScript's JSON writer leaves unescaped inside strings; splitting there would drop the
    # message and shift every later line number (so every later citation) by one.
    for lineno, line in enumerate(text.split("\n"), start=first_line):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        yield lineno, record if isinstance(record, dict) else None


def render_transcript(raw: bytes | str, *, redact: bool = True) -> RenderedTranscript:
    """Render a JSONL transcript into ``User: …`` / ``Assistant: …`` lines with a JSONL line map.

    ``redact=False`` exists for tests and debugging only; anything stored must be redacted.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, (bytes, bytearray)) else raw
    rendering = _Rendering(redact)
    rendering.add(text, 1)
    return rendering.result()


class TranscriptRenderer:
    """Renders transcripts that grow by appends, rendering only what was appended since the last call.

    Each JSONL line renders on its own (a dreaming record, which empties the whole transcript, is
    the one exception, and stays so: :meth:`_Rendering.add` stops there), so a text that starts with
    what was rendered before through its last complete line renders the same as the whole text
    would: the earlier lines' rendering, then the rest's. A text that does not start so (a rewrite,
    a truncation) is rendered whole. What is kept per file: the text through its last complete line
    and the rendering of it, for the ``max_files`` files rendered last, at most ``max_chars``
    characters of text in all.
    """

    def __init__(self, *, redact: bool = True, max_files: int = 16, max_chars: int = 16 << 20) -> None:
        self.redact = redact
        self.max_files, self.max_chars = max_files, max_chars
        #: key -> (text through its last complete line, its line count, the rendering of it)
        self._kept: OrderedDict[str, tuple[str, int, _Rendering]] = OrderedDict()
        self._lock = threading.Lock()

    def render(self, key: str, text: str) -> RenderedTranscript:
        with self._lock:
            kept = self._kept.pop(key, None)
        cut = text.rfind("\n") + 1
        if kept is not None and len(kept[0]) <= cut and text.startswith(kept[0]):
            complete, lines, rendering = kept
            rendering = rendering.copy()
            rendering.add(text[len(complete):cut], lines + 1)
        else:
            rendering = _Rendering(self.redact)
            rendering.add(text[:cut], 1)
        lines = text.count("\n", 0, cut)
        whole = rendering.copy()
        whole.add(text[cut:], lines + 1)  # an unfinished last line: rendered now, again once finished
        if cut <= self.max_chars:
            with self._lock:
                self._kept[key] = (text[:cut], lines, rendering)
                held = sum(len(entry[0]) for entry in self._kept.values())
                while len(self._kept) > self.max_files or held > self.max_chars:
                    held -= len(self._kept.popitem(last=False)[1][0])
        return whole.result()

    def forget(self, key: str) -> None:
        with self._lock:
            self._kept.pop(key, None)


@dataclass
class _Rendering:
    """A transcript's rendering so far, line by line (:meth:`add`)."""

    redact: bool
    out_lines: list[str] = field(default_factory=list)
    line_map: list[int] = field(default_factory=list)
    timestamps: list[int | None] = field(default_factory=list)
    skipped: int = 0
    unknown: dict[str, int] = field(default_factory=dict)
    dreaming: bool = False

    def copy(self) -> _Rendering:
        return _Rendering(self.redact, list(self.out_lines), list(self.line_map), list(self.timestamps),
                          self.skipped, dict(self.unknown), self.dreaming)  # fmt: skip

    def add(self, text: str, first_lineno: int) -> None:
        """Render the lines of ``text``, the first of them JSONL line ``first_lineno``."""
        if self.dreaming or not text:
            return
        for lineno, record in _records(text, first_lineno):
            if record is None:
                self.skipped += 1
                continue
            if _is_dreaming_record(record):
                self.dreaming = True
                return
            parsed = _message_of(record)
            if parsed is None:
                host = read_host_record(record)
                if host is not None and host.unknown is not None:
                    name = f"{host.kind}:{host.unknown}"
                    self.unknown[name] = self.unknown.get(name, 0) + 1
                continue
            role, content, ts = parsed
            body = _content_text(content)
            body = (clean_host_text(role, body) or "") if body else ""
            if not body:
                continue
            clean = sanitize_message(role, body) if self.redact else collapse_whitespace(body) or None
            if clean is None:
                continue
            prefix = _ROLE_PREFIX[role]
            for segment in wrap_text(clean):
                self.out_lines.append(f"{prefix}: {segment}")
                self.line_map.append(lineno)
            self.timestamps.append(_parse_timestamp(ts))

    def result(self) -> RenderedTranscript:
        if self.dreaming:
            # Dreaming runs are the memory system talking to itself; indexing them would echo memories back.
            return RenderedTranscript(text="", line_map=[], message_count=0, timestamps=[], skipped_lines=self.skipped)
        return RenderedTranscript(
            text="\n".join(self.out_lines),
            line_map=list(self.line_map),
            message_count=len(self.timestamps),
            timestamps=list(self.timestamps),
            skipped_lines=self.skipped,
            unknown_records=dict(self.unknown),
        )


def message_times(raw: bytes | str, first_line: int = 1) -> dict[int, int | None]:
    """JSONL line number -> the time of the message on it (epoch milliseconds; None when the record
    has no usable timestamp), for every user or assistant message record (what citations point at).
    ``first_line``: the number of ``raw``'s first line (the rest of a file parsed before).

    For "as of" search and knowledge updates (search/dating.py); bad lines are skipped, as
    :func:`render_transcript` skips them."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, (bytes, bytearray)) else raw
    out: dict[int, int | None] = {}
    for lineno, record in _records(text, first_line):
        parsed = _message_of(record) if record is not None else None
        if parsed is not None:
            out[lineno] = _parse_timestamp(parsed[2])
    return out


def sessions_root(workspace: Path, sessions_dir: str | Path = DEFAULT_SESSIONS_DIR) -> Path:
    root = Path(sessions_dir).expanduser()
    return root if root.is_absolute() else workspace / root


def is_transcript_file_name(name: str) -> bool:
    """``*.jsonl`` files, minus index files, checkpoints and archives (which OpenClaw leaves empty)."""
    if not name.endswith(".jsonl") or name.startswith("."):
        return False
    if name == "sessions.json" or ".checkpoint." in name:
        return False
    return not any(tag in name for tag in (".reset.", ".deleted.", ".bak."))


def list_transcripts(
    workspace: Path | str, sessions_dir: str | Path = DEFAULT_SESSIONS_DIR
) -> list[tuple[str, Path]]:
    """Return ``(session_key, path)`` for every transcript, sorted; links leaving the root are skipped."""
    workspace = Path(workspace)
    root = sessions_root(workspace, sessions_dir)
    if not root.is_dir():
        return []
    try:
        real_root = root.resolve()
    except OSError:
        return []
    found: list[tuple[str, Path]] = []
    try:
        session_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    for session_dir in session_dirs:
        transcripts = session_dir / "transcripts"
        if not transcripts.is_dir():
            continue
        try:
            entries = sorted(transcripts.iterdir())
        except OSError:
            continue
        for path in entries:
            if not is_transcript_file_name(path.name):
                continue
            try:
                if not path.is_file() or not path.resolve().is_relative_to(real_root):
                    continue
            except OSError:
                continue
            found.append((session_dir.name, path))
    return found
