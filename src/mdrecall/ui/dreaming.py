"""The Dreaming page: recall statistics, the promotion queue with approve/reject/edit, the history.

Nothing here knows a file format: the recall store is read by :class:`~mdrecall.dreaming.store.RecallStore`,
candidates ranked by :func:`~mdrecall.dreaming.promotion.list_candidates`, decisions written by
:func:`mdrecall.dreaming.review.decide` into the same Markdown queue ``mdrecall promote`` reads, staging
and writing to MEMORY.md done by :func:`~mdrecall.dreaming.promotion.stage` / ``apply``, and the
history read from MEMORY.md's promoted markers by :func:`~mdrecall.dreaming.review.promotion_history`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from mdrecall.dreaming.blocks import text_hash
from mdrecall.dreaming.clock import day_bucket, ensure_aware
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.paths import QUEUE_FILE, memory_file_path
from mdrecall.dreaming.promotion import apply, list_candidates, read_queue, stage
from mdrecall.dreaming.review import ReviewConflict, decide, promotion_history
from mdrecall.dreaming.scoring import Evaluation
from mdrecall.dreaming.store import RecallStore
from mdrecall.errors import MdrecallError
from mdrecall.ui.chart import bar_chart
from mdrecall.ui.index_view import page_of
from mdrecall.ui.state import form, int_param, redirect, render, ui_state

CHART_DAYS = 30
PER_PAGE = 20
_DECISIONS = {"approve": "approved", "reject": "rejected", "undecide": "pending"}


@dataclass
class Stats:
    entries: int
    signals: int
    recalls: int
    grounded: int
    promoted: int
    staged: int
    rejected: int
    passing: int
    last_recall: str | None
    per_day: list[tuple[str, int]]


def recall_stats(entries: list[RecallEntry], evaluations: list[Evaluation], today: str) -> Stats:
    """Totals, and per day the number of distinct facts recalled that day (``recallDays``)."""
    end = datetime.fromisoformat(today).date()
    days = [(end - timedelta(days=i)).isoformat() for i in range(CHART_DAYS - 1, -1, -1)]
    counts = dict.fromkeys(days, 0)
    for entry in entries:
        for day in entry.recall_days:
            if day in counts:
                counts[day] += 1
    last = max((e.last_recalled_at for e in entries if e.last_recalled_at), default=None)
    return Stats(
        entries=len(entries),
        signals=sum(e.signal_count for e in entries),
        recalls=sum(e.recall_count for e in entries),
        grounded=sum(e.grounded_count for e in entries),
        promoted=sum(1 for e in entries if e.promoted_at),
        staged=sum(1 for e in entries if e.staged_at),
        rejected=sum(1 for e in entries if e.rejected_at),
        passing=sum(1 for ev in evaluations if ev.passed),
        last_recall=last,
        per_day=[(d, counts[d]) for d in days],
    )


def _load(ui: Any) -> dict[str, Any]:
    cfg = ui.config.dreaming
    now = ensure_aware(None)
    state = RecallStore(ui.workspace, cfg).load()
    entries = list(state.entries.values())
    evaluations = list_candidates(ui.workspace, ui.config, now, include_failing=True)
    queue = read_queue(ui.workspace)
    try:
        memory_text = memory_file_path(ui.workspace).read_text(encoding="utf-8")
    except FileNotFoundError:
        memory_text = ""
    except OSError as exc:
        memory_text = ""
        ui.errors.records.append((now.isoformat(timespec="seconds"), "WARNING", "mdrecall.ui", f"cannot read MEMORY.md: {exc}"))
    return {
        "stats": recall_stats(entries, evaluations, day_bucket(now, cfg.tz())),
        "evaluations": evaluations,
        "queue": queue,
        "history": list(reversed(promotion_history(memory_text))),
        "memory_chars": len(memory_text),
    }


async def dreaming_page(request: Request) -> Response:
    ui = ui_state(request)
    data = await run_in_threadpool(_load, ui)
    queue = data["queue"]
    queue_page = page_of(queue.items, int_param(request, "qpage", 1), PER_PAGE)
    top_page = page_of(data["evaluations"], int_param(request, "tpage", 1), PER_PAGE)
    history_page = page_of(data["history"], int_param(request, "hpage", 1), PER_PAGE)
    params = dict(request.query_params)

    def link(**changes: Any) -> str:
        return "/dreaming?" + urlencode({**params, **changes})

    stats: Stats = data["stats"]
    return render(
        request, "dreaming.html", cfg=ui.config.dreaming, stats=stats, queue=queue, queue_page=queue_page,
        top_page=top_page, history_page=history_page, link=link, text_hash=text_hash,
        chart=bar_chart(stats.per_day, label=f"Facts recalled per day, last {CHART_DAYS} days", unit=" fact(s)"),
        memory_chars=data["memory_chars"], queue_file=QUEUE_FILE,
        pending=sum(1 for i in queue.items if i.status == "pending"),
        approved=sum(1 for i in queue.items if i.status == "approved"),
        rejected=sum(1 for i in queue.items if i.status == "rejected"),
    )


def _back(data: Any) -> str:
    page = str(data.get("qpage", "")).strip()
    return f"/dreaming?qpage={int(page)}#queue" if page.isdigit() else "/dreaming#queue"


async def queue_action(request: Request) -> Response:
    """Approve, reject, set back to undecided, or edit one queue item."""
    ui = ui_state(request)
    data = form(request)
    key = data.get("key", "")
    action = data.get("action", "")
    seen = data.get("seen") or None
    try:
        if action == "edit":
            item = await run_in_threadpool(lambda: decide(ui.workspace, key, text=data.get("text", ""), seen=seen, config=ui.config))
            ui.flash(request, "ok", f"Edited: {item.text}")
        elif action in _DECISIONS:
            status = _DECISIONS[action]
            item = await run_in_threadpool(lambda: decide(ui.workspace, key, status=status, seen=seen, config=ui.config))  # type: ignore[arg-type]
            ui.flash(request, "ok", f"{status.capitalize()}: {item.text}" if status != "pending" else f"Undecided again: {item.text}")
        else:
            ui.flash(request, "error", f"Unknown action {action!r}.")
    except ReviewConflict as exc:
        ui.flash(request, "error", str(exc))
    except (ValueError, MdrecallError) as exc:
        ui.flash(request, "error", f"Not saved: {exc}")
    return redirect(_back(data))


async def apply_approved(request: Request) -> Response:
    """Write the approved items into MEMORY.md, as ``mdrecall promote --apply`` does."""
    ui = ui_state(request)
    try:
        result = await run_in_threadpool(lambda: apply(ui.workspace, ui.config, None, mode="approved"))
    except MdrecallError as exc:
        ui.flash(request, "error", f"Nothing written: {exc}")
        return redirect("/dreaming#queue")
    if result.applied:
        ui.flash(request, "ok", f"Wrote {len(result.applied)} fact(s) to MEMORY.md "
                                f"({result.memory_chars_before} → {result.memory_chars_after} characters).")
    elif not (result.rejected or result.dropped or result.reconciled or result.refused):
        ui.flash(request, "info", "Nothing approved yet: approve items first.")
    for label, group in (("already there", result.reconciled), ("dropped", result.dropped),
                         ("refused", result.refused), ("rejected", result.rejected)):
        for skipped in group:
            ui.flash(request, "info" if label in ("rejected", "already there") else "error",
                     f"{label}: {skipped.text or skipped.key} — {skipped.reason}")
    for message in result.messages:
        ui.flash(request, "error", message)
    return redirect("/dreaming#queue")


async def stage_candidates(request: Request) -> Response:
    """Add passing candidates to the queue, as ``mdrecall promote --stage`` does."""
    ui = ui_state(request)
    try:
        result = await run_in_threadpool(lambda: stage(ui.workspace, ui.config, None))
    except MdrecallError as exc:
        ui.flash(request, "error", f"Nothing staged: {exc}")
        return redirect("/dreaming#queue")
    ui.flash(request, "ok", f"Staged {len(result.added)} new candidate(s); {result.kept} already waiting.")
    for skipped in result.dropped:
        ui.flash(request, "info", f"not staged: {skipped.text} — {skipped.reason}")
    return redirect("/dreaming#queue")
