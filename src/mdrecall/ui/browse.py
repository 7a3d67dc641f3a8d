"""The Browse page: memory files and transcripts as the agent sees them, with the index's view of each.

Notes are read exactly as ``memory_get`` reads them (:func:`mdrecall.sources.reading.read_memory_lines`:
the same path checks, so nothing outside the memory roots can be opened from here) but without the
manager's read listeners, so looking at a note is not a grounding signal for promotion. Transcripts
are rendered by :func:`mdrecall.sources.transcripts.render_transcript` with redaction on, the text the
index stores and searches: what the agent can see, not the raw log.

Every list is paged; a note or transcript is shown a page of lines at a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from mdrecall.errors import PathError
from mdrecall.search.decay import decay_multiplier
from mdrecall.sources.reading import read_memory_lines
from mdrecall.sources.transcripts import is_transcript_file_name, render_transcript, sessions_root
from mdrecall.sources.workspace import note_date, rel_path_for
from mdrecall.ui.highlight import Matcher
from mdrecall.ui.index_view import KINDS, ChunkSpan, Kind, index_view, kind_of
from mdrecall.ui.state import int_param, render, ui_state

PER_PAGE = 50
#: Lines of a transcript per page; notes page by read.maxLines, as memory_get does.
PAGE_LINES = 200


@dataclass
class ViewLine:
    number: int  # the file's line (for transcripts: the JSONL line it came from)
    html: Markup
    highlighted: bool
    chunks: list[int]  # numbers (1-based, in file order) of the chunks covering this line
    chunk_starts: list[int]
    anchor: bool


def parse_range(text: str) -> tuple[int, int] | None:
    try:
        lo, _, hi = text.partition("-")
        start, end = int(lo), int(hi or lo)
    except ValueError:
        return None
    return (start, end) if 0 < start <= end else None


def _chunk_marks(chunks: list[ChunkSpan] | None, number: int) -> tuple[list[int], list[int]]:
    if not chunks:
        return [], []
    covering = [i for i, c in enumerate(chunks, 1) if c.start_line <= number <= c.end_line]
    starts = [i for i, c in enumerate(chunks, 1) if c.start_line == number]
    return covering, starts


async def browse_page(request: Request) -> Response:
    ui = ui_state(request)
    text = request.query_params.get("q", "")
    kind_param = request.query_params.get("kind", "all")
    kind: Kind = next((k for k in KINDS if k == kind_param), "all")
    page = int_param(request, "page", 1)
    view = index_view(ui.manager)
    files = await run_in_threadpool(view.files, text, kind, page, PER_PAGE)
    skipped = await run_in_threadpool(view.skipped, 1, 1)

    def link(**changes: Any) -> str:
        params = {"q": text, "kind": kind, "page": page, **changes}
        return "/browse?" + urlencode({k: v for k, v in params.items() if v not in ("", None)})

    return render(
        request, "browse.html", files=files, text=text, kind=kind, kinds=KINDS, origin=view.origin,
        skipped_total=skipped.total, link=link, sessions_enabled="sessions" in ui.config.sources,
        extra_paths=list(ui.config.extraPaths), sessions_dir=ui.config.sessions.dir,
    )


async def skipped_page(request: Request) -> Response:
    ui = ui_state(request)
    page = int_param(request, "page", 1)
    view = index_view(ui.manager)
    skipped = await run_in_threadpool(view.skipped, page, PER_PAGE)
    return render(request, "skipped.html", skipped=skipped, max_bytes=ui.config.limits.maxFileBytes)


def _decay_note(ui: Any, path: str) -> str | None:
    day = note_date(path)
    cfg = ui.config.query.temporalDecay
    if day is None:
        return None
    if not cfg.enabled:
        return f"dated {day.isoformat()}; temporal decay is off"
    factor = decay_multiplier(path, "memory", datetime.now(UTC), cfg.halfLifeDays)
    return f"dated {day.isoformat()}: a search now multiplies its scores by {factor:.3f} (half-life {cfg.halfLifeDays:g} days)"


async def file_page(request: Request) -> Response:
    ui = ui_state(request)
    path = request.query_params.get("path", "")
    hl = parse_range(request.query_params.get("hl", ""))
    query = request.query_params.get("q", "")
    default_from = max(1, hl[0] - 20) if hl else 1
    start = int_param(request, "from", default_from)
    page_lines = ui.config.read.maxLines
    try:
        result = await run_in_threadpool(read_memory_lines, ui.workspace, ui.config, path, start, page_lines)
    except PathError as exc:
        return render(request, "error.html", status_code=404, title="Cannot open this note", message=f"{exc} [{exc.code}]")
    view = index_view(ui.manager)
    last = result.from_line + max(0, result.lines - 1)
    chunks = await run_in_threadpool(view.chunks, result.path, result.from_line, last)
    info = await run_in_threadpool(view.file, result.path)
    matcher = Matcher.for_query(query)
    lines = []
    for i, raw in enumerate(result.text.split("\n") if result.lines else []):
        number = result.from_line + i
        covering, starts = _chunk_marks(chunks, number)
        lines.append(ViewLine(number, matcher.mark(raw) if matcher else Markup(escape(raw)),
                              bool(hl and hl[0] <= number <= hl[1]), covering, starts, True))
    prev_from = max(1, result.from_line - page_lines) if result.from_line > 1 else None

    def link(start_line: int) -> str:
        params = {"path": result.path, "from": start_line}
        if hl:
            params["hl"] = f"{hl[0]}-{hl[1]}"
        if query:
            params["q"] = query
        return "/browse/file?" + urlencode(params)

    return render(
        request, "note.html", result=result, lines=lines, chunks=chunks or [], info=info, hl=hl,
        kind=kind_of(result.path, "memory"), decay_note=_decay_note(ui, result.path), query=query,
        prev_link=link(prev_from) if prev_from else None,
        next_link=link(result.next_from) if result.next_from else None,
        transcript=None,
    )


def resolve_transcript(workspace: Path, sessions_dir: str, rel_path: str) -> tuple[Path, str]:
    """The transcript at ``rel_path`` (real path, stored path), only if it is a transcript file under the
    sessions directory."""
    if not rel_path or "\x00" in rel_path or "\\" in rel_path:
        raise PathError("invalid_path", "a transcript path is required")
    root = sessions_root(workspace, sessions_dir)
    candidate = Path(os.path.normpath(workspace / rel_path))
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(candidate))
    if not real.is_relative_to(real_root) or real.parent.name != "transcripts" or not is_transcript_file_name(real.name):
        raise PathError("not_memory_path", f"{rel_path!r} is not a session transcript under {sessions_dir}")
    if not real.is_file():
        raise PathError("not_found", f"{rel_path!r} does not exist")
    return real, rel_path_for(workspace, candidate)


async def transcript_page(request: Request) -> Response:
    ui = ui_state(request)
    path = request.query_params.get("path", "")
    hl = parse_range(request.query_params.get("hl", ""))
    query = request.query_params.get("q", "")
    if "sessions" not in ui.config.sources:
        return render(request, "error.html", status_code=404, title="Transcripts are not a memory source here",
                      message="This workspace's config does not list 'sessions' in sources, so no transcript is indexed or searched.")
    try:
        real, rel = resolve_transcript(ui.workspace, ui.config.sessions.dir, path)
        raw = await run_in_threadpool(real.read_bytes)
    except (PathError, OSError) as exc:
        message = f"{exc} [{exc.code}]" if isinstance(exc, PathError) else f"cannot read it: {exc}"
        return render(request, "error.html", status_code=404, title="Cannot open this transcript", message=message)
    if len(raw) > ui.config.limits.maxFileBytes:
        return render(request, "error.html", status_code=413, title="Transcript too large",
                      message=f"It is larger than limits.maxFileBytes ({ui.config.limits.maxFileBytes} bytes): the index skips it too.")
    rendered = await run_in_threadpool(render_transcript, raw, redact=True)
    all_lines = rendered.lines
    line_map = rendered.line_map
    default_from = 1
    if hl:
        first = next((i for i, n in enumerate(line_map, 1) if n >= hl[0]), 1)
        default_from = max(1, first - 5)
    start = int_param(request, "from", default_from)
    page_lines = all_lines[start - 1 : start - 1 + PAGE_LINES]
    numbers = line_map[start - 1 : start - 1 + PAGE_LINES]
    view = index_view(ui.manager)
    chunks = await run_in_threadpool(view.chunks, rel, numbers[0], numbers[-1]) if numbers else []
    info = await run_in_threadpool(view.file, rel)
    matcher = Matcher.for_query(query)
    lines = []
    previous = None
    for raw_line, number in zip(page_lines, numbers):
        covering, starts = _chunk_marks(chunks, number)
        lines.append(ViewLine(number, matcher.mark(raw_line) if matcher else Markup(escape(raw_line)),
                              bool(hl and hl[0] <= number <= hl[1]), covering, starts if number != previous else [],
                              number != previous))
        previous = number
    end = start - 1 + len(page_lines)

    def link(start_line: int) -> str:
        params = {"path": rel, "from": start_line}
        if hl:
            params["hl"] = f"{hl[0]}-{hl[1]}"
        if query:
            params["q"] = query
        return "/browse/transcript?" + urlencode(params)

    return render(
        request, "note.html", result=None, lines=lines, chunks=chunks or [], info=info, hl=hl, kind="transcript",
        decay_note=None, query=query,
        prev_link=link(max(1, start - PAGE_LINES)) if start > 1 else None,
        next_link=link(end + 1) if end < len(all_lines) else None,
        transcript={"path": rel, "messages": rendered.message_count, "rendered": len(all_lines),
                    "skipped": rendered.skipped_lines, "first": start, "last": end},
    )
