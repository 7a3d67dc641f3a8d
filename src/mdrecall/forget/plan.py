"""What a forget removes: the target (lines, a file, an entry or a text) turned into exact lines.

A target is one of:

* a citation ``path#Lx-Ly`` (``#Lx`` for one line), as search prints it: those lines of a memory file,
  or of a session transcript (JSONL lines, which is what transcript citations count);
* a memory file (``memory/2026-03-02.md``) or a transcript (``.openclaw/sessions/<key>/transcripts/a.jsonl``):
  all of it;
* a long-term entry ``ltm:<id>`` (LanceDB);
* anything else (or any target with ``text=True``): a text, matched case-insensitively against every
  line of every memory file and transcript, and every long-term entry.

The plan is computed from the files as they are and keeps the text each file was read as, so the
removal is a compare-and-swap against it (a concurrent edit is merged, never lost). Its ``token``
names exactly the lines chosen (path, number and content of each): the second step of a two-step
confirmation (MCP, ``mdrecall forget --confirm``) applies only a plan with the same token.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdrecall.errors import MdrecallError, PathError
from mdrecall.forget.selection import FileSelection, SelectedLine, shown_text
from mdrecall.sources.hostlogs import list_host_logs
from mdrecall.sources.transcripts import list_transcripts, render_transcript
from mdrecall.sources.workspace import discover_memory_files, read_memory_bytes, rel_path_for, resolve_memory_path

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager

TargetKind = Literal["lines", "file", "entry", "text"]

#: A text target shorter than this would select half of memory.
MIN_TEXT_CHARS = 3
#: A text target matching more lines than this is refused: narrow it down (or forget files).
MAX_TEXT_MATCHES = 500
#: A removed line shorter than this is not looked for byte by byte afterwards (too common to mean anything).
MIN_NEEDLE_CHARS = 12
MAX_NEEDLES = 200

#: Which transcripts (by stored path) the caller may touch.
VisibleFn = Callable[[str], bool]

_CITATION = re.compile(r"^(?P<path>.+?)#L(?P<start>\d{1,9})(?:-L?(?P<end>\d{1,9}))?$", re.IGNORECASE)
_ENTRY_PREFIX = "ltm:"
_WHITESPACE = re.compile(r"\s+")


class ForgetTargetError(MdrecallError):
    """The target names nothing that can be forgotten (a missing file, lines past its end, a path
    outside memory, an empty or too broad text); the message says which."""


@dataclass(slots=True)
class ForgetPlan:
    target: str
    kind: TargetKind
    selections: list[FileSelection]
    #: Texts that must be found nowhere afterwards (the verification's byte scan).
    needles: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Stored paths whose index rows hold a text target though the file no longer does (a forget that
    #: stopped half-way): their rows are removed and re-indexed from the file.
    stale_paths: list[str] = field(default_factory=list)
    #: Copies no file line accounts for, in words (shown; the forget cleans them up).
    leftovers: list[str] = field(default_factory=list)

    @property
    def line_count(self) -> int:
        return sum(len(s.lines) for s in self.selections)

    @property
    def empty(self) -> bool:
        """Nothing to remove anywhere: no line, and no copy left in a store."""
        return not self.selections and not self.stale_paths and not self.leftovers

    @property
    def token(self) -> str:
        """Names exactly the chosen lines: equal tokens, equal removals."""
        shape = [
            [s.path, s.whole, [[ln.line, hashlib.sha256(ln.raw.encode("utf-8", "surrogateescape")).hexdigest()] for ln in s.lines]]
            for s in self.selections
        ]
        payload = json.dumps([self.kind, shape, sorted(self.stale_paths)], ensure_ascii=True)
        return hashlib.sha256(payload.encode("ascii")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "token": self.token,
            "lineCount": self.line_count,
            "files": [s.to_dict() for s in self.selections],
            "leftovers": list(self.leftovers),
            "warnings": list(self.warnings),
        }


# --- shown text -------------------------------------------------------------------------------------


def _record_text(raw: str) -> str:
    """What a transcript line says: its message as search shows it, else the record's strings."""
    rendered = render_transcript(raw).text
    if rendered:
        return rendered.replace("\n", " ")
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    return " ".join(_strings(record)) or raw


def _matches(raw: str, said: str, needle: str) -> bool:
    """Whether a transcript line holds ``needle`` (casefolded): raw, as its message reads, or in any
    string of the record (escapes decoded)."""
    if needle in raw.casefold() or needle in said.casefold():
        return True
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return any(needle in s.casefold() for s in _strings(record))


def _strings(value: Any) -> Iterable[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _lines(text: str) -> list[str]:
    """Lines as editors, the chunker and citations count them (split at "\\n" only)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


# --- reading ----------------------------------------------------------------------------------------


def _decode(raw: bytes) -> str:
    # As markdown_write reads it: undecodable bytes survive the rewrite, line endings normalised.
    return raw.decode("utf-8", errors="surrogateescape").replace("\r\n", "\n").replace("\r", "\n")


def _read_memory(workspace: Path, config: MemoryConfig, real: Path) -> str:
    return _decode(read_memory_bytes(workspace, config, real, config.limits.maxFileBytes))


def _transcripts(workspace: Path, config: MemoryConfig, visible: VisibleFn) -> dict[str, Path]:
    if "sessions" not in config.sources:
        return {}
    found: dict[str, Path] = {}
    for _key, path in list_transcripts(workspace, config.sessions.dir):
        rel = rel_path_for(workspace, path)
        if visible(rel):
            found[rel] = path
    for _host, path in list_host_logs(config):  # Claude Code / Codex logs, stored by absolute path
        if visible(path.as_posix()):
            found[path.as_posix()] = path
    return found


def _read_transcript(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def _transcript_lines(text: str) -> list[str]:
    # JSONL lines end at "\n" only (render_transcript counts them so); a "\r" before it stays in the line.
    return _lines(text)


def _is_header(raw: str) -> bool:
    """A transcript's session header (ids, cwd) or a record forget already wrote: kept when a range
    or a whole transcript is forgotten (a host needs the header to load the session)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") in ("session", TOMBSTONE_TYPE)


TOMBSTONE_TYPE = "mdrecall.forgotten"


# --- targets ----------------------------------------------------------------------------------------


def _is_transcript_path(path: str) -> bool:
    return path.endswith(".jsonl")


def _looks_like_path(target: str) -> bool:
    return target.endswith((".md", ".jsonl")) and "\n" not in target


def plan_forget(
    manager: MemorySearchManager,
    target: str,
    *,
    text: bool = False,
    session_key: str | None = None,
    all_sessions: bool = True,
) -> ForgetPlan:
    """The lines ``target`` selects (nothing is changed). ``all_sessions=False`` limits transcripts to
    those ``session_key`` may see (``sessions.visibility``, as search decides): what an agent's tool
    call may touch. Raises :class:`ForgetTargetError` for a target that names nothing valid."""
    if not isinstance(target, str) or not target.strip():
        raise ForgetTargetError("nothing to forget: give lines (path#L3-L5), a memory file, an entry (ltm:<id>) or a text")
    target = target.strip()
    visible = _visibility(manager.config, session_key, all_sessions)
    if text:
        return _plan_text(manager, target, visible)
    match = _CITATION.match(target)
    if match is not None and not _WHITESPACE.search(match.group("path")):
        start = int(match.group("start"))
        end = int(match.group("end") or start)
        if start < 1 or end < start:
            raise ForgetTargetError(f"{target!r}: lines are L<first>-L<last> with 1 ≤ first ≤ last")
        return _plan_lines(manager, target, match.group("path"), start, end, visible)
    if target.startswith(_ENTRY_PREFIX) and not _WHITESPACE.search(target):
        return _plan_entry(manager, target)
    if _looks_like_path(target):
        return _plan_file(manager, target, visible)
    return _plan_text(manager, target, visible)


def _visibility(config: MemoryConfig, session_key: str | None, all_sessions: bool) -> VisibleFn:
    if all_sessions:
        return lambda rel: True
    from mdrecall.search.scope import scope_for

    scope = scope_for(config, None, session_key)
    return lambda rel: scope.allows("sessions", rel)


def _resolve_transcript(manager: MemorySearchManager, path: str, visible: VisibleFn) -> tuple[str, Path]:
    rel = path.strip()
    while rel.startswith("./"):
        rel = rel[2:]
    found = _transcripts(manager.workspace, manager.config, visible)
    if rel not in found:
        if "sessions" not in manager.config.sources:
            raise ForgetTargetError(f"{path!r}: session transcripts are not a memory source here (sources: {manager.config.sources})")
        raise ForgetTargetError(f"{path!r} is not a session transcript of this workspace (or not one this session may see)")
    return rel, found[rel]


def _resolve_memory(manager: MemorySearchManager, path: str) -> tuple[str, Path]:
    try:
        real, rel = resolve_memory_path(manager.workspace, manager.config, path)
    except PathError as exc:
        hint = " (to forget the lines that mention it, pass it as a text: --text)" if exc.code == "not_found" else ""
        raise ForgetTargetError(f"{exc} [{exc.code}]{hint}") from None
    return rel, real


def _plan_lines(manager: MemorySearchManager, target: str, path: str, start: int, end: int, visible: VisibleFn) -> ForgetPlan:
    if path.startswith(_ENTRY_PREFIX):
        return _plan_entry(manager, target)
    if _is_transcript_path(path):
        rel, real = _resolve_transcript(manager, path, visible)
        lines = _transcript_lines(_read_transcript(real))
        _check_range(target, rel, start, end, len(lines))
        chosen = [SelectedLine(n, shown_text(_record_text(lines[n - 1])), lines[n - 1])
                  for n in range(start, end + 1) if lines[n - 1].strip() and not _is_header(lines[n - 1])]  # fmt: skip
        if not chosen:
            raise ForgetTargetError(f"{target!r}: no message in those lines (blank lines or the session header only)")
        selection = FileSelection(rel, "sessions", chosen, abspath=real)
    else:
        rel, real = _resolve_memory(manager, path)
        base = _read_memory_checked(manager, real, target)
        lines = _lines(base)
        _check_range(target, rel, start, end, len(lines))
        chosen = [SelectedLine(n, shown_text(lines[n - 1]), lines[n - 1]) for n in range(start, end + 1)]
        selection = FileSelection(rel, "memory", chosen, abspath=real, base=base)
    plan = ForgetPlan(target, "lines", [selection])
    plan.needles = _needles(plan)
    return plan


def _read_memory_checked(manager: MemorySearchManager, real: Path, target: str) -> str:
    try:
        return _read_memory(manager.workspace, manager.config, real)
    except PathError as exc:
        raise ForgetTargetError(f"{target!r}: {exc} [{exc.code}]") from None


def _check_range(target: str, rel: str, start: int, end: int, count: int) -> None:
    if end > count:
        raise ForgetTargetError(f"{target!r}: {rel} has {count} line(s); L{start}-L{end} goes past its end")


def _plan_file(manager: MemorySearchManager, target: str, visible: VisibleFn) -> ForgetPlan:
    if _is_transcript_path(target):
        rel, real = _resolve_transcript(manager, target, visible)
        lines = _transcript_lines(_read_transcript(real))
        chosen = [SelectedLine(n, shown_text(_record_text(raw)), raw)
                  for n, raw in enumerate(lines, 1) if raw.strip() and not _is_header(raw)]  # fmt: skip
        selection = FileSelection(rel, "sessions", chosen, whole=True, abspath=real)
    else:
        rel, real = _resolve_memory(manager, target)
        base = _read_memory_checked(manager, real, target)
        chosen = [SelectedLine(n, shown_text(raw), raw) for n, raw in enumerate(_lines(base), 1)]
        selection = FileSelection(rel, "memory", chosen, whole=True, abspath=real, base=base)
    plan = ForgetPlan(target, "file", [selection])
    plan.needles = _needles(plan)
    return plan


def _plan_entry(manager: MemorySearchManager, target: str) -> ForgetPlan:
    from mdrecall.forget.lance import find_entry

    memory_id = target[len(_ENTRY_PREFIX) :].split("#", 1)[0]
    found = find_entry(manager, memory_id)
    if found is None:
        raise ForgetTargetError(f"{target!r}: no long-term memory with that id (forgotten already, another agent's, or no LanceDB store)")
    plan = ForgetPlan(target, "entry", [found])
    plan.needles = _needles(plan)
    return plan


def _plan_text(manager: MemorySearchManager, target: str, visible: VisibleFn) -> ForgetPlan:
    if len(target) < MIN_TEXT_CHARS:
        raise ForgetTargetError(f"{target!r} is too short to forget by: give at least {MIN_TEXT_CHARS} characters")
    needle = target.casefold()
    workspace, config = manager.workspace, manager.config
    plan = ForgetPlan(target, "text", [], needles=[target])
    for file in discover_memory_files(workspace, config):
        try:
            base = _read_memory(workspace, config, Path(file.abspath).resolve())
        except (PathError, OSError) as exc:
            plan.warnings.append(f"{file.rel_path} not searched: {exc}")
            continue
        if needle not in base.casefold():
            continue
        chosen = [SelectedLine(n, shown_text(raw), raw) for n, raw in enumerate(_lines(base), 1) if needle in raw.casefold()]
        if chosen:
            plan.selections.append(FileSelection(file.rel_path, "memory", chosen, abspath=Path(file.abspath).resolve(), base=base))
    for rel, path in sorted(_transcripts(workspace, config, visible).items()):
        try:
            content = _read_transcript(path)
        except OSError as exc:
            plan.warnings.append(f"{rel} not searched: {exc}")
            continue
        chosen = []
        for n, raw in enumerate(_transcript_lines(content), 1):
            said = _record_text(raw)
            if _matches(raw, said, needle):
                chosen.append(SelectedLine(n, shown_text(said), raw))
        if chosen:
            plan.selections.append(FileSelection(rel, "sessions", chosen, abspath=path))
    from mdrecall.forget.dreams import recalls_holding
    from mdrecall.forget.index import paths_holding
    from mdrecall.forget.lance import find_entries_with

    plan.selections.extend(find_entries_with(manager, needle, plan.warnings))
    chosen_paths = {s.path for s in plan.selections}
    plan.stale_paths = sorted(p for p in paths_holding(manager, target)
                              if p not in chosen_paths and (not _is_transcript_path(p) or visible(p)))  # fmt: skip
    plan.leftovers = [f"index rows of {p} (the file no longer says it)" for p in plan.stale_paths]
    if not plan.selections:
        recalls = recalls_holding(workspace, config, needle)
        if recalls:
            plan.leftovers.append(f"{recalls} recall entr(ies) or review candidate(s) (memory/.dreams)")
    if plan.line_count > MAX_TEXT_MATCHES:
        raise ForgetTargetError(
            f"{target!r} matches {plan.line_count} lines (more than {MAX_TEXT_MATCHES}): narrow it down, or forget whole files"
        )
    return plan


def _needles(plan: ForgetPlan) -> list[str]:
    """The chosen lines' texts worth looking for byte by byte afterwards (long enough to be specific)."""
    out: list[str] = []
    for selection in plan.selections:
        for line in selection.lines:
            said = _record_text(line.raw) if selection.kind == "sessions" else line.raw
            text = said.strip()[:200]
            if len(text) >= MIN_NEEDLE_CHARS and text not in out:
                out.append(text)
    return out[:MAX_NEEDLES]
