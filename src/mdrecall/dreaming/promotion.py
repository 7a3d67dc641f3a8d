"""Promotion: ranked candidates, staging them for review, and writing approved ones into MEMORY.md.

``stage``   ranks entries, re-reads each candidate's live note and adds the ones still there to the
            review queue (queue.py), keeping every decision and edit already in it.
``apply``   writes approved queue items (and, with ``autoApply``/``mode="passing"``, every passing
            candidate) to MEMORY.md under ``## Promoted from short-term memory (YYYY-MM-DD)``, one line each::

                - Infra: Postgres 16 runs on db-2, port 5433. <!-- mdrecall:promoted id=3f2a9c01b7de source=memory/2026-03-02.md:14-15 score=0.61 recalls=4 -->

Guarantees:
- the live note is re-read first; text that was deleted or rewritten since it was recalled is never
  written (an edit that keeps the fact recognisable is written as it reads now);
- idempotent: a fact whose id already has a marker in MEMORY.md, or whose text is already there, is
  reconciled instead of appended, so re-running changes nothing;
- atomic and safe for other writers: MEMORY.md and the queue go through
  :func:`mdrecall.markdown_write.write_markdown` (compare-and-swap; an edit made meanwhile is merged,
  never overwritten; a symlinked MEMORY.md stays a link and its target is written), the store is
  replaced whole, all under the store's lock;
- bounded: MEMORY.md never grows past ``memoryMaxChars``; what does not fit is refused with a message
  and stays approved in the queue.

Why this module is long: stage and apply share the live-note checks, the queue reconciliation and the
budget; split apart they would pass a dozen values back and forth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from mdrecall.dreaming.blocks import Located, display_text, is_generic_heading, locate, normalize, text_hash
from mdrecall.dreaming.clock import day_bucket, ensure_aware, to_iso
from mdrecall.dreaming.config import DreamingConfig, dreaming_config, sessions_dir
from mdrecall.dreaming.contamination import PROMOTED_MARKER, is_contaminated
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.paths import memory_file_path, queue_path
from mdrecall.dreaming.queue import Queue, QueueItem, parse_queue
from mdrecall.dreaming.recording import read_source_blocks
from mdrecall.dreaming.scoring import Evaluation, evaluate, rank
from mdrecall.dreaming.store import RecallStore, StoreState
from mdrecall.markdown_write import read_markdown, write_markdown
from mdrecall.sources.redact import redact_secrets

Mode = Literal["approved", "passing"]

NEW_MEMORY_HEADER = "# Long-term memory\n"
SECTION_TITLE = "Promoted from short-term memory"
_MARKER_ID = re.compile(r"<!--\s*" + re.escape(PROMOTED_MARKER) + r"\s+id=([0-9a-f]{6,40})")
_OPENCLAW_MARKER = re.compile(r"<!--\s*openclaw-memory-promotion:(\S+)\s*-->")
_MARKER_COMMENT = re.compile(r"\s*<!--.*?-->")


# --- candidate text ------------------------------------------------------------------------------------


def candidate_text(entry: RecallEntry, located: Located | None = None) -> str:
    """The line a person reads in MEMORY.md: the fact as it stands now, with its heading for context."""
    blocks = located.blocks if located else None
    parts = [display_text(b.text) for b in blocks] if blocks else [display_text(t) for t in entry.snippet.split("\n")]
    body = "; ".join(p for p in parts if p)
    heading = (located.heading if located else entry.heading) or ""
    heading = normalize(heading)
    if heading and not is_generic_heading(heading) and heading.lower() not in body.lower():
        body = f"{heading}: {body}"
    return body


def rehydrate(workspace: Path, entry: RecallEntry, sessions_dir: str | None = None) -> Located | None:
    blocks = read_source_blocks(workspace, entry.source, entry.path, sessions_dir)
    if blocks is None:
        return None
    return locate(entry.snippet, blocks, entry.start_line)


# --- MEMORY.md -----------------------------------------------------------------------------------------


def promoted_ids(memory_text: str) -> set[str]:
    return set(_MARKER_ID.findall(memory_text))


def _plain_lines(memory_text: str) -> set[str]:
    """MEMORY.md's lines without list markers and marker comments, for "already written" checks."""
    out = set()
    for line in memory_text.split("\n"):
        body = _MARKER_COMMENT.sub("", line).strip()
        body = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", body)
        if body:
            out.add(normalize(body).lower())
    return out


def section_heading(day: str) -> str:
    return f"## {SECTION_TITLE} ({day})"


def promoted_line(item: Prepared) -> str:
    entry = item.entry
    marker = (
        f"<!-- {PROMOTED_MARKER} id={entry.claim_hash} source={entry.path}:{item.start_line}-{item.end_line} "
        f"score={item.score:.2f} recalls={entry.signal_count} -->"
    )
    return f"- {item.text} {marker}"


def insert_lines(memory_text: str, lines: list[str], day: str) -> str:
    """MEMORY.md with ``lines`` appended to today's promotion section (created at the end if absent)."""
    text = memory_text if memory_text.strip() else NEW_MEMORY_HEADER
    if not text.endswith("\n"):
        text += "\n"
    heading = section_heading(day)
    rows = text.split("\n")[:-1]  # text ends with "\n"
    try:
        at = rows.index(heading)
    except ValueError:
        return text + f"\n{heading}\n\n" + "".join(line + "\n" for line in lines)
    end = at + 1
    while end < len(rows) and not rows[end].startswith("#"):
        end += 1
    while end > at + 1 and not rows[end - 1].strip():
        end -= 1
    new_rows = rows[:end] + lines + rows[end:]
    return "\n".join(new_rows) + "\n"


# --- results -------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    entry: RecallEntry
    text: str
    located: Located
    score: float
    origin: str  # "approved" | "passing"
    edited: bool = False

    @property
    def start_line(self) -> int:
        return self.located.start_line

    @property
    def end_line(self) -> int:
        return self.located.end_line

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.entry.key,
            "id": self.entry.claim_hash,
            "text": self.text,
            "source": f"{self.entry.path}:{self.start_line}-{self.end_line}",
            "score": round(self.score, 4),
            "recalls": self.entry.signal_count,
            "origin": self.origin,
            "editedInReview": self.edited,
            "sourceChanged": self.located.status != "exact",
        }


@dataclass
class Skipped:
    key: str
    reason: str
    text: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "reason": self.reason, "text": self.text}


@dataclass
class ApplyResult:
    memory_path: Path
    mode: str
    dry_run: bool
    applied: list[Prepared] = field(default_factory=list)
    reconciled: list[Skipped] = field(default_factory=list)
    dropped: list[Skipped] = field(default_factory=list)
    refused: list[Skipped] = field(default_factory=list)
    rejected: list[Skipped] = field(default_factory=list)
    memory_chars_before: int = 0
    memory_chars_after: int = 0
    messages: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.applied)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memoryPath": str(self.memory_path),
            "mode": self.mode,
            "dryRun": self.dry_run,
            "applied": [p.to_dict() for p in self.applied],
            "reconciled": [s.to_dict() for s in self.reconciled],
            "dropped": [s.to_dict() for s in self.dropped],
            "refused": [s.to_dict() for s in self.refused],
            "rejected": [s.to_dict() for s in self.rejected],
            "memoryCharsBefore": self.memory_chars_before,
            "memoryCharsAfter": self.memory_chars_after,
            "messages": list(self.messages),
        }


@dataclass
class StageResult:
    queue_path: Path
    dry_run: bool
    added: list[QueueItem] = field(default_factory=list)
    kept: int = 0
    removed: list[Skipped] = field(default_factory=list)
    dropped: list[Skipped] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queuePath": str(self.queue_path),
            "dryRun": self.dry_run,
            "added": [
                {"key": i.key, "id": i.id, "text": i.text, "source": i.source, "score": i.score} for i in self.added
            ],
            "kept": self.kept,
            "removed": [s.to_dict() for s in self.removed],
            "dropped": [s.to_dict() for s in self.dropped],
        }


# --- queue io ------------------------------------------------------------------------------------------


def read_queue(workspace: Path) -> Queue:
    return read_queue_text(workspace)[0]


def read_queue_text(workspace: Path) -> tuple[Queue, str | None]:
    """The queue and the text it was parsed from (None: no queue file), the base for writing it back."""
    raw = read_markdown(queue_path(workspace))
    return (parse_queue(raw) if raw is not None else Queue([])), raw


def write_queue(workspace: Path, queue: Queue, base: str | None) -> None:
    """Save the queue; a reviewer's edit made since ``base`` was read is merged, not overwritten."""
    text = queue.render()
    if text == base or (base is None and not queue.items):
        return  # unchanged, or no queue and nothing to put in one
    write_markdown(queue_path(workspace), text, base=base)


# --- stage ---------------------------------------------------------------------------------------------


def _queue_item(ev: Evaluation, text: str, located: Located, max_chars: int) -> QueueItem:
    e = ev.entry
    notes: list[str] = []
    if len(text) > max_chars:
        notes.append(f"long ({len(text)} characters, limit {max_chars}): shorten it before approving")
    if e.passage:
        notes.append("several facts that searches matched by meaning only: keep the one that matters")
    if located.status != "exact":
        notes.append("the note was edited since this was recalled; this is its current text")
    return QueueItem(
        key=e.key,
        status="pending",
        text=text,
        source=f"{e.path}:{located.start_line}-{located.end_line}",
        score=ev.score,
        recalls=e.signal_count,
        queries=e.unique_queries,
        days=len(e.recall_days),
        staged_hash=text_hash(text),
        notes=tuple(notes),
    )


def stage(
    workspace: Path | str,
    config: Any = None,
    now: datetime | None = None,
    *,
    dry_run: bool = False,
) -> StageResult:
    """Add passing candidates (up to ``limit`` new ones) to the review queue."""
    workspace = Path(workspace)
    cfg = dreaming_config(config)
    now = ensure_aware(now)
    result = StageResult(queue_path(workspace), dry_run)
    _update_store_and_queue(workspace, cfg, now, dry_run, lambda state, queue: _stage_into(
        workspace, cfg, now, state, queue, result, sessions_dir(config)))
    return result


def _update_store_and_queue(
    workspace: Path, cfg: DreamingConfig, now: datetime, dry_run: bool, work: Callable[[StoreState, Queue], None]
) -> None:
    """Run ``work`` on the recall store (locked) and the review queue; save both unless a dry run."""
    with RecallStore(workspace, cfg).update(now, dry_run=dry_run) as state:
        queue, base = read_queue_text(workspace)
        work(state, queue)
        if not dry_run:
            write_queue(workspace, queue, base)


def _stage_into(
    workspace: Path, cfg: DreamingConfig, now: datetime, state: StoreState, queue: Queue,
    result: StageResult, sessions_dir: str | None,
) -> None:
    kept: list[QueueItem] = []
    for item in queue.items:
        entry = state.entries.get(item.key)
        if entry is not None and entry.promoted_at:
            result.removed.append(Skipped(item.key, "already promoted", item.text))
            continue
        kept.append(item)
    queue.items = kept
    result.kept = len(kept)
    queued = {item.key for item in queue.items}
    budget = cfg.limit
    for ev in rank(state.entries.values(), now, cfg):
        if budget <= 0:
            break
        entry = ev.entry
        if entry.key in queued:
            continue
        located = rehydrate(workspace, entry, sessions_dir)
        if located is None:
            result.dropped.append(Skipped(entry.key, "text no longer in its note", entry.snippet))
            continue
        text = candidate_text(entry, located)
        if is_contaminated(text):
            result.dropped.append(Skipped(entry.key, "contaminated (dreaming output)", text))
            continue
        item = _queue_item(ev, text, located, cfg.maxCandidateChars)
        queue.items.append(item)
        result.added.append(item)
        entry.staged_at = to_iso(now)
        budget -= 1


# --- apply ---------------------------------------------------------------------------------------------


def apply(
    workspace: Path | str,
    config: Any = None,
    now: datetime | None = None,
    *,
    mode: Mode | None = None,
    dry_run: bool = False,
) -> ApplyResult:
    """Write approved (and, in "passing" mode, all passing) candidates into MEMORY.md."""
    workspace = Path(workspace)
    cfg = dreaming_config(config)
    now = ensure_aware(now)
    chosen_mode: Mode = mode or ("passing" if cfg.autoApply else "approved")
    result = ApplyResult(memory_file_path(workspace), chosen_mode, dry_run)
    _update_store_and_queue(workspace, cfg, now, dry_run, lambda state, queue: _apply_into(
        workspace, cfg, now, state, queue, result, sessions_dir(config)))
    return result


def _select(
    workspace: Path, cfg: DreamingConfig, now: datetime, state: StoreState, queue: Queue, result: ApplyResult,
    sessions_dir: str | None,
) -> tuple[list[Prepared], set[str]]:
    """Candidates to write, in order (approved first, in queue order), and queue keys to drop."""
    prepared: list[Prepared] = []
    done_keys: set[str] = set()
    stamp = to_iso(now)

    def prepare(entry: RecallEntry, origin: str, item: QueueItem | None) -> None:
        located = rehydrate(workspace, entry, sessions_dir)
        if located is None:
            result.dropped.append(Skipped(entry.key, "text deleted or rewritten in its note since it was recalled", entry.snippet))
            done_keys.add(entry.key)
            return
        edited = item is not None and item.edited
        # A reviewer's edit is text typed by a person: redacted like everything that reaches MEMORY.md.
        text = redact_secrets(item.text) if edited and item is not None else candidate_text(entry, located)
        if is_contaminated(text) or not text:
            result.dropped.append(Skipped(entry.key, "contaminated or empty text", text))
            done_keys.add(entry.key)
            return
        if origin == "passing" and entry.passage and not edited:
            result.refused.append(
                Skipped(entry.key, "a passage of several facts (it matched no word of the queries); "
                        "stage it and keep the fact that matters", text)
            )
            return
        if origin == "passing" and len(text) > cfg.maxCandidateChars:
            result.refused.append(
                Skipped(entry.key, f"{len(text)} characters > maxCandidateChars {cfg.maxCandidateChars}; "
                        "stage it and shorten it in the review queue", text)
            )
            return
        score = evaluate(entry, now, cfg).score
        prepared.append(Prepared(entry, text, located, score, origin, edited))

    for item in queue.items:
        entry = state.entries.get(item.key)
        if item.status == "rejected":
            if entry is not None:
                entry.rejected_at = stamp
                entry.staged_at = None
            result.rejected.append(Skipped(item.key, "rejected in review", item.text))
            done_keys.add(item.key)
            continue
        if item.status != "approved":
            continue
        if entry is None:
            result.dropped.append(Skipped(item.key, "not in the recall store any more", item.text))
            done_keys.add(item.key)
            continue
        if entry.promoted_at:
            result.reconciled.append(Skipped(item.key, "already promoted", item.text))
            done_keys.add(item.key)
            continue
        prepare(entry, "approved", item)

    if result.mode == "passing":
        taken = {p.entry.key for p in prepared} | done_keys
        queued = {i.key: i for i in queue.items}
        budget = cfg.limit
        for ev in rank(state.entries.values(), now, cfg):
            if budget <= 0:
                break
            if ev.entry.key in taken:
                continue
            before = len(prepared)
            prepare(ev.entry, "passing", queued.get(ev.entry.key))
            budget -= len(prepared) - before
    return prepared, done_keys


def _promoted_text(
    original: str, prepared: list[Prepared], cfg: DreamingConfig, day: str
) -> tuple[str, list[Prepared], list[Prepared], list[Skipped]]:
    """MEMORY.md with the new facts in today's section: (text, written, already there, refused)."""
    existing_ids = promoted_ids(original) | set(_OPENCLAW_MARKER.findall(original))
    existing_lines = _plain_lines(original)
    to_write: list[Prepared] = []
    reconciled: list[Prepared] = []
    seen_text: set[str] = set()
    for item in prepared:
        norm = normalize(item.text).lower()
        if item.entry.claim_hash in existing_ids or item.entry.key in existing_ids or norm in existing_lines:
            reconciled.append(item)
        elif norm in seen_text:
            reconciled.append(item)  # the same fact from two notes: written once
        else:
            seen_text.add(norm)
            to_write.append(item)
    refused: list[Skipped] = []
    written: list[Prepared] = []
    if not to_write:
        return original, written, reconciled, refused
    if len(original) > cfg.memoryMaxChars:
        refused = [Skipped(item.entry.key, "MEMORY.md is already over its budget", item.text) for item in to_write]
        return original, written, reconciled, refused
    lines: list[str] = []
    for item in to_write:
        trial = insert_lines(original, lines + [promoted_line(item)], day)
        if len(trial) > cfg.memoryMaxChars:
            refused.append(Skipped(item.entry.key, f"would grow MEMORY.md to {len(trial)} characters", item.text))
            continue
        lines.append(promoted_line(item))
        written.append(item)
    return (insert_lines(original, lines, day) if lines else original), written, reconciled, refused


def _apply_into(
    workspace: Path, cfg: DreamingConfig, now: datetime, state: StoreState, queue: Queue, result: ApplyResult,
    sessions_dir: str | None,
) -> None:
    prepared, done_keys = _select(workspace, cfg, now, state, queue, result, sessions_dir)
    memory_path = result.memory_path
    day = day_bucket(now, cfg.tz())
    stamp = to_iso(now)

    original = read_markdown(memory_path)
    result.memory_chars_before = len(original or "")
    content, written, reconciled, refused = _promoted_text(original or "", prepared, cfg, day)
    if not result.dry_run and content != (original or ""):
        # Someone (an agent, an editor) may write MEMORY.md meanwhile: their edit is merged in.
        content = write_markdown(memory_path, content, base=original).text

    result.applied = written
    result.memory_chars_after = len(content)
    result.refused.extend(refused)
    for item in reconciled:
        result.reconciled.append(Skipped(item.entry.key, "already in MEMORY.md", item.text))
    for item in written + reconciled:
        entry = item.entry
        entry.promoted_at = stamp
        entry.staged_at = None
        entry.snippet = item.located.text
        entry.start_line, entry.end_line = item.start_line, item.end_line
        state.promoted_hashes.update({entry.claim_hash, text_hash(item.located.text), text_hash(item.text)})
        done_keys.add(entry.key)
    if result.refused:
        result.messages.append(
            f"{len(result.refused)} candidate(s) not written: MEMORY.md's budget is {cfg.memoryMaxChars} characters "
            f"(dreaming.memoryMaxChars) and it holds {len(content)}. Trim MEMORY.md or raise the budget; "
            "approved items stay in the queue."
            if any("MEMORY.md" in s.reason for s in result.refused)
            else f"{len(result.refused)} candidate(s) not written (see reasons)."
        )
    queue.items = [item for item in queue.items if item.key not in done_keys]


# --- listing -------------------------------------------------------------------------------------------


def list_candidates(
    workspace: Path | str, config: Any = None, now: datetime | None = None, *, include_failing: bool = False
) -> list[Evaluation]:
    cfg = dreaming_config(config)
    state = RecallStore(Path(workspace), cfg).load()
    return rank(state.entries.values(), ensure_aware(now), cfg, include_failing=include_failing)


def explain(workspace: Path | str, ref: str, config: Any = None, now: datetime | None = None) -> list[Evaluation]:
    cfg = dreaming_config(config)
    state = RecallStore(Path(workspace), cfg).load()
    return [evaluate(e, ensure_aware(now), cfg) for e in state.find(ref)]
