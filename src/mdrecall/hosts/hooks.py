"""``mdrecall hook recall|flush|capture``: what a host's hooks read and print, failing open.

A hook runs inside someone else's agent, before or after every turn. Whatever goes wrong here (no
index yet, the embedding model missing, a slow disk, a bug) must cost the user nothing but the
memory: the hook exits 0, prints nothing, and writes one line to ``<MDRECALL_HOME>/logs/hooks.log``.
Claude Code treats exit code 2 from UserPromptSubmit as "block this prompt and erase it", so no
path here ever exits with anything but 0. A :class:`Watchdog` ends the process (exit 0, logged) when
the time limit passes, whatever the work is doing then.

Inputs, per host (docs/hosts/claude-code.md, docs/hosts/codex.md):

* Claude Code sends one JSON object on stdin: ``session_id``, ``transcript_path``, ``cwd``,
  ``hook_event_name`` and per event ``prompt`` (UserPromptSubmit), ``source`` (SessionStart),
  ``trigger`` (PreCompact), ``stop_hook_active`` (Stop). UserPromptSubmit and SessionStart add
  ``hookSpecificOutput.additionalContext`` from stdout to the model's context.
* Codex CLI runs its ``notify`` program after each turn with one JSON argument:
  ``{"type": "agent-turn-complete", "input-messages": [...], "last-assistant-message": "..."}``.
* ``--host generic``: stdin holds ``{"prompt": ...}`` / ``{"messages": [{"role", "content"}]}`` (or
  the prompt as plain text); recall prints the block as text.

What each does:

* recall: the ``<relevant-memories>`` block (:func:`mdrecall.agent.prompts.format_relevant_memories`)
  for the prompt, nothing when nothing relevant is found; on SessionStart, the "Memory Recall"
  section telling the model its memory tools exist.
* capture (Stop, notify): the sentences of the finished turn worth keeping, by the LanceDB backend's
  auto-capture rules (:func:`mdrecall.backends.lancedb.capture.plan_capture`, with the
  ``lancedb.capture*`` settings), appended to today's daily note through ``remember`` (or stored by the
  backend's own ``auto_capture``, LanceDB). A cursor per session remembers how far the transcript
  was read, so a turn is captured once.
* flush (PreCompact): Claude Code gives a pre-compaction hook no turn of its own, so the flush plan
  (its target note, its enabled switch) is carried out here: everything not captured yet goes to the
  plan's note, and the host's own log is indexed when it is a source, before compaction drops it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig, mdrecall_home
from mdrecall.contract import MemorySearchManager

HOSTS = ("claude-code", "codex", "generic")
LOG_MAX_BYTES = 1 << 20
#: Prompts shorter than this are greetings and acknowledgements: nothing to recall.
MIN_PROMPT_CHARS = 5
#: What of a long prompt is searched (a pasted log would make a slow, unfocused query).
MAX_QUERY_CHARS = 2000
DEFAULT_RESULTS = 5
#: Markup a Markdown reader never sees (mdrecall's provenance, review markers): not for the model either.
_HTML_COMMENT = re.compile(r"[ \t]*<!--.*?-->", re.DOTALL)

Opener = Callable[[Path, MemoryConfig], MemorySearchManager]


class Skip(Exception):
    """Nothing to do, for a reason worth a line in the log."""


# --- the log and the watchdog ---------------------------------------------------------------------


def log_path() -> Path:
    return mdrecall_home() / "logs" / "hooks.log"


def log_line(kind: str, host: str, message: str) -> None:
    """One line in the hooks log (rotated to ``hooks.log.1`` past 1 MiB); never raises."""
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = " ".join(message.split())[:500]
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {kind} {host}: {text}\n")
    except OSError:
        pass


class Watchdog:
    """Ends the process with exit 0 once ``seconds`` pass, after logging why. Output is written under
    :attr:`lock`, so the process never ends halfway through printing it."""

    def __init__(self, seconds: float, kind: str, host: str, exit: Callable[[int], object] = os._exit) -> None:
        self.lock = threading.Lock()
        self._exit = exit
        self._timer = threading.Timer(seconds, self._fire, args=(seconds, kind, host))
        self._timer.daemon = True

    def start(self) -> Watchdog:
        self._timer.start()
        return self

    def cancel(self) -> None:
        self._timer.cancel()

    def _fire(self, seconds: float, kind: str, host: str) -> None:
        with self.lock:
            log_line(kind, host, f"gave up after {seconds:g}s (time limit): nothing printed; a slow index or model "
                                 "load? `mdrecall doctor` says more")  # fmt: skip
            self._exit(0)


# --- what the host sent ---------------------------------------------------------------------------


@dataclass(slots=True)
class HookInput:
    host: str
    event: str = ""
    prompt: str = ""
    session_id: str = ""
    transcript_path: str = ""
    #: The messages of the turn, when the host sends them (Codex notify, generic).
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: Claude Code's Stop with ``stop_hook_active``: another hook keeps the turn going.
    continuing: bool = False
    raw: dict[str, Any] = field(default_factory=dict)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_input(host: str, text: str) -> HookInput:
    """The hook's input from what the host sent (stdin, or Codex's argument); raises :class:`Skip`
    for input that is not what the host documents."""
    stripped = text.strip()
    try:
        data = json.loads(stripped) if stripped else {}
    except ValueError:
        if host != "generic":
            raise Skip(f"the input is not JSON ({stripped[:60]!r})") from None
        return HookInput(host, prompt=stripped)
    if not isinstance(data, dict):
        if host == "generic" and isinstance(data, str):
            return HookInput(host, prompt=data)
        raise Skip(f"the input is a JSON {type(data).__name__}, not an object")
    found = HookInput(host, raw=data)
    if host == "codex":
        found.event = _text(data.get("type"))
        found.session_id = _text(data.get("thread-id") or data.get("turn-id"))
        inputs = data.get("input-messages")
        for message in inputs if isinstance(inputs, list) else []:
            if isinstance(message, str):
                found.messages.append({"role": "user", "content": message})
        last = data.get("last-assistant-message")
        if isinstance(last, str) and last:
            found.messages.append({"role": "assistant", "content": last})
        return found
    found.event = _text(data.get("hook_event_name"))
    found.prompt = _text(data.get("prompt"))
    found.session_id = _text(data.get("session_id"))
    found.transcript_path = _text(data.get("transcript_path"))
    found.continuing = data.get("stop_hook_active") is True
    messages = data.get("messages")
    if host == "generic" and isinstance(messages, list):
        found.messages = [m for m in messages if isinstance(m, dict)]
    return found


# --- recall ---------------------------------------------------------------------------------------


def index_missing(workspace: Path, config: MemoryConfig) -> str | None:
    """Why the builtin index cannot answer yet (None: it exists, or another backend keeps it)."""
    if config.backend != "builtin":
        return None
    from mdrecall.store import default_store_path

    path = Path(config.store.path).expanduser() if config.store.path else default_store_path(workspace)
    return None if path.exists() else f"no index at {path} yet: run `mdrecall index -w {workspace}`"


def _model_missing(config: MemoryConfig, warnings: Sequence[str]) -> str | None:
    """Why the search ran without the embedding model the config asks for (None: it did not).

    ``provider: none`` is keyword-only by choice, and ``auto`` with no model installed by design;
    a named provider that cannot load, or a query the model failed to embed, is a broken model."""
    for warning in warnings:
        if warning.startswith("query embedding failed"):
            return warning
        if warning.startswith("keyword-only") and config.provider not in ("none", "auto"):
            return warning
    return None


def session_start_context(config: MemoryConfig) -> str:
    from mdrecall.agent.prompts import render_memory_prompt_section

    return render_memory_prompt_section(citations_mode=config.citations, sessions_indexed="sessions" in config.sources).strip()


def recall(workspace: Path, config: MemoryConfig, hook: HookInput, opener: Opener, *,
           session_key: str | None, max_results: int = DEFAULT_RESULTS) -> str:  # fmt: skip
    """The text to print: the ``<relevant-memories>`` block in the host's format, or ""."""
    from mdrecall.agent.prompts import InjectedMemory, format_relevant_memories

    if hook.host == "claude-code" and hook.event == "SessionStart":
        return _claude_context("SessionStart", session_start_context(config))
    if hook.host == "claude-code" and hook.event not in ("UserPromptSubmit", ""):
        raise Skip(f"recall does nothing on {hook.event}")
    prompt = hook.prompt.strip()
    if len(prompt) < MIN_PROMPT_CHARS or prompt.startswith("/"):
        return ""  # a greeting, an acknowledgement, a slash command
    missing = index_missing(workspace, config)
    if missing:
        raise Skip(missing)
    with opener(workspace, config) as manager:
        response = manager.search(prompt[:MAX_QUERY_CHARS], max_results=max_results, session_key=session_key)
    model = _model_missing(config, response.warnings)
    if model:
        raise Skip(f"the embedding model is unavailable ({model}): nothing injected")
    if not response.results and response.reason and response.reason.startswith("nothing is indexed"):
        raise Skip(response.reason)
    own = _real(hook.transcript_path)
    hits = [h for h in response.results if not own or _real(h.path) != own]  # not the conversation itself
    memories = [InjectedMemory(_HTML_COMMENT.sub("", h.snippet), "session" if h.source == "sessions" else None, h.citation)
                for h in hits]  # fmt: skip
    block = format_relevant_memories(memories, max_chars=config.query.maxInjectedChars)
    if not block:
        return ""
    return _claude_context("UserPromptSubmit", block) if hook.host == "claude-code" else block


def _claude_context(event: str, text: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}, ensure_ascii=False)


def _real(path: str) -> str:
    if not path or not os.path.isabs(path):
        return ""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return ""


# --- capture and flush ----------------------------------------------------------------------------


def _cursor_file(host: str, session_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", session_id)[:120] or "session"
    return mdrecall_home() / "hooks" / "cursors" / f"{host}-{safe}.json"


def read_turns(host: str, hook: HookInput, max_bytes: int) -> tuple[list[dict[str, Any]], Callable[[], None]]:
    """The messages not captured yet from the host's transcript, and how to mark them captured."""
    from mdrecall.sources.hostlogs import read_host_record

    path = Path(hook.transcript_path)
    if not hook.transcript_path or path.suffix != ".jsonl" or not path.is_absolute():
        raise Skip(f"no usable transcript_path in the input ({hook.transcript_path!r})")
    cursor = _cursor_file(host, hook.session_id or path.stem)
    try:
        state = json.loads(cursor.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    offset = state.get("offset", 0) if state.get("path") == str(path) else 0
    try:
        size = path.stat().st_size
        if not isinstance(offset, int) or offset > size:
            offset = 0  # rewritten or replaced: read it again (captures already written are not repeated)
        with path.open("rb") as handle:
            handle.seek(offset)
            raw = handle.read(max_bytes)
    except OSError as exc:
        raise Skip(f"cannot read the transcript {path}: {exc.strerror or exc}") from None
    complete = raw[: raw.rfind(b"\n") + 1]  # a line still being written waits for the next hook
    messages: list[dict[str, Any]] = []
    for line in complete.decode("utf-8", errors="replace").split("\n"):
        try:
            record = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        found = read_host_record(record) if isinstance(record, dict) else None
        if found is not None and found.message is not None:
            role, text, _ts = found.message
            messages.append({"role": role, "content": text})
    end = offset + len(complete)

    def done() -> None:
        cursor.parent.mkdir(parents=True, exist_ok=True)
        tmp = cursor.with_name(cursor.name + ".tmp")
        tmp.write_text(json.dumps({"path": str(path), "offset": end}), encoding="utf-8")
        os.replace(tmp, cursor)

    return messages, done


@dataclass(slots=True)
class Captured:
    written: list[str] = field(default_factory=list)  # citations
    repeated: int = 0
    skipped: int = 0
    target: str = ""


def _known(workspace: Path, target: str) -> set[str]:
    from mdrecall.backends.lancedb.capture import normalized_key

    try:
        text = (workspace / target).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    keys = set()
    for line in text.split("\n"):
        body = re.sub(r"<!--.*?-->", "", line).strip().removeprefix("- ").strip()
        if body:
            keys.add(normalized_key(body))
    return keys


def write_captures(workspace: Path, config: MemoryConfig, messages: Sequence[Mapping[str, Any]], *,
                   host: str, target: str | None = None, now: datetime | None = None) -> Captured:  # fmt: skip
    """Append what the turn stated (the LanceDB auto-capture rules) to ``target`` (today's note)."""
    from mdrecall.backends.lancedb.capture import normalized_key, plan_capture
    from mdrecall.sources.remember import daily_note_path, remember

    rules = config.lancedb
    plan = plan_capture(list(messages), roles=rules.captureRoles, min_chars=rules.captureMinChars,
                        max_chars=rules.captureMaxChars, max_captures=rules.maxCapturesPerTurn,
                        custom_triggers=rules.customTriggers)  # fmt: skip
    now = now or datetime.now(UTC)
    note = target or daily_note_path(now, config.flush.timezone)
    out = Captured(skipped=len(plan.skipped), target=note)
    known = _known(workspace, note)
    for candidate in plan.candidates:
        key = normalized_key(candidate.text)
        if key in known:
            out.repeated += 1
            continue
        written = remember(workspace, candidate.text, config=config, target=note, now=now, via=f"hook:{host}")
        known.add(key)
        out.written.append(written.citation)
    return out


def capture(workspace: Path, config: MemoryConfig, hook: HookInput, opener: Opener, *, session_key: str | None,
            flush: bool = False) -> str:  # fmt: skip
    """Capture the finished turn (``flush``: everything not captured yet, into the flush plan's note);
    returns what to print (Claude Code: a ``systemMessage`` when a flush saved something, else "")."""
    if not config.lancedb.autoCapture and not flush:
        raise Skip("lancedb.autoCapture is false: capture is off")
    target = None
    if flush:
        from mdrecall.agent.flush import FlushSettings, build_flush_plan

        plan = build_flush_plan(FlushSettings.from_config(config.flush))
        if plan is None:
            raise Skip("flush.enabled is false: nothing flushed")
        target = plan.relative_path
    if hook.host == "claude-code":
        if hook.continuing:
            raise Skip("stop_hook_active: the turn goes on; captured when it ends")
        messages, done = read_turns(hook.host, hook, config.limits.maxFileBytes)
    elif hook.host == "codex" and hook.event != "agent-turn-complete":
        raise Skip(f"notify type {hook.event!r} is not a finished turn")
    else:
        messages, done = hook.messages, (lambda: None)
    report = _backend_capture(workspace, config, messages, opener, session_key) if config.backend != "builtin" else None
    if report is None:
        result = write_captures(workspace, config, messages, host=hook.host, target=target)
        saved, where = len(result.written), result.target
    else:
        saved, where = len(report.get("captured") or []), config.backend
    done()
    if flush:
        _index_host_log(workspace, config, opener, hook.host)
    if flush and saved and hook.host == "claude-code":
        return json.dumps({"systemMessage": f"mdrecall: saved {saved} memor{'y' if saved == 1 else 'ies'} to {where} before compacting"})
    return ""


def _backend_capture(workspace: Path, config: MemoryConfig, messages: Sequence[Mapping[str, Any]], opener: Opener,
                     session_key: str | None) -> dict[str, Any] | None:  # fmt: skip
    """A backend's own capture (LanceDB's entries); None when no plugin captures for it."""
    from mdrecall import plugins

    with opener(workspace, config) as manager:
        for _name, report in plugins.call_each("auto_capture", manager=manager, messages=list(messages),
                                              session_key=session_key, success=True):  # fmt: skip
            if isinstance(report, Mapping):
                return dict(report)
    return None


def _index_host_log(workspace: Path, config: MemoryConfig, opener: Opener, host: str) -> None:
    from mdrecall.sources.hostlogs import enabled_hosts

    if host in enabled_hosts(config) and index_missing(workspace, config) is None:
        with opener(workspace, config) as manager:
            manager.sync()


# --- running one hook -----------------------------------------------------------------------------


def run(kind: str, host: str, text: str, workspace: Path, load: Callable[[], MemoryConfig], opener: Opener, *,
        session_key: str | None, timeout: float, write: Callable[[str], object],
        exit: Callable[[int], object] = os._exit) -> int:  # fmt: skip
    """Run hook ``kind`` for ``host`` on ``text`` (what the host sent); always 0 (see the module doc)."""
    started = time.monotonic()
    watchdog = Watchdog(timeout, kind, host, exit).start()
    try:
        hook = parse_input(host, text)
        config = load()
        key = session_key if session_key is not None else {"claude-code": "claude-code", "codex": "codex"}.get(host)
        if kind == "recall":
            out = recall(workspace, config, hook, opener, session_key=key)
        else:
            out = capture(workspace, config, hook, opener, session_key=key, flush=kind == "flush")
        with watchdog.lock:
            watchdog.cancel()
            if out:
                write(out)
    except Skip as why:
        log_line(kind, host, str(why))
    except Exception as exc:  # fail open: a broken memory never breaks the agent
        log_line(kind, host, f"failed after {time.monotonic() - started:.1f}s: {type(exc).__name__}: {exc}")
    finally:
        watchdog.cancel()
    return 0
