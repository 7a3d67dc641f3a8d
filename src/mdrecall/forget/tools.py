"""The agent tool ``memory_forget_lines``: forget chosen lines (or a text) in two calls.

``memory_forget_lines {target, text?, confirm?}``:

1. without ``confirm``: ``{action: "confirm", token, lines: [{citation, text}], message}`` — exactly
   what would be deleted, nothing changed; ``{action: "none"}`` when a text is found nowhere;
2. with ``confirm`` set to that token: ``{action: "forgotten", lineCount, citations, stores,
   verification, message}``; ``{action: "changed", token, lines}`` when the lines shown are no
   longer all there as shown (the memory changed, or the token is wrong): nothing deleted.

The conversation asking to forget states the text itself: the host logs the first call and its
answer in the session's transcript before the second call comes. So this process remembers the
plans it showed (for an hour): the second call deletes the lines shown, and also the transcript
records that mention the text since (that conversation), instead of refusing because the plan grew.
Its answer repeats no forgotten text (the host logs it too): citations and counts only. A plan this
process did not show (another process, a restart) must match the token exactly.

Transcripts are those the calling session may see (``sessions.visibility``, as search decides). A
target that names nothing valid raises ValueError (answered as ``invalid_arguments``). Imports
nothing heavy until it runs.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager
    from mdrecall.forget.plan import ForgetPlan

MEMORY_FORGET_LINES = "memory_forget_lines"
#: How long a shown plan can be confirmed by its token in this process, and how many are kept.
PENDING_TTL_S = 3600.0
PENDING_MAX = 64

DESCRIPTION = (
    "Forget for good: delete lines from memory files and session transcripts, and every copy of them in the "
    "index, vectors, caches and other stores. target: a citation from memory_search ('memory/2026-03-02.md#L6-L7'), "
    "a memory file ('memory/old-project.md'), a long-term entry ('ltm:<id>'), or a text (every line containing it; "
    "set text=true to force that reading). The first call only lists the exact lines and returns a token; call "
    "again with confirm=<token> to delete them. Only when the user asked to forget something."
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {"type": "string", "minLength": 1,
                   "description": "Lines (path#L3-L5), a memory file, an entry (ltm:<id>), or a text to find."},
        "text": {"type": "boolean", "description": "Read target as a text to find even if it looks like a path (default false)."},
        "confirm": {"type": "string", "description": "The token the first call returned: deletes exactly the lines it listed."},
    },
    "required": ["target"],
    "additionalProperties": False,
}  # fmt: skip

_pending: OrderedDict[tuple[str, str], tuple[float, ForgetPlan]] = OrderedDict()
_pending_lock = threading.Lock()


def _remember(workspace: str, plan: ForgetPlan) -> None:
    with _pending_lock:
        _pending[(workspace, plan.token)] = (time.monotonic(), plan)
        _pending.move_to_end((workspace, plan.token))
        while len(_pending) > PENDING_MAX:
            _pending.popitem(last=False)


def _shown(workspace: str, token: str) -> ForgetPlan | None:
    with _pending_lock:
        found = _pending.pop((workspace, token), None)
    if found is None or time.monotonic() - found[0] > PENDING_TTL_S:
        return None
    return found[1]


def _lines(plan: ForgetPlan) -> list[dict[str, Any]]:
    return [{"citation": s.citation(ln), "text": ln.shown} for s in plan.selections for ln in s.lines]


def _keys(plan: ForgetPlan) -> set[tuple[str, int, str]]:
    return {(s.path, ln.line, ln.raw) for s in plan.selections for ln in s.lines}


def _confirmed(shown: ForgetPlan, now: ForgetPlan) -> ForgetPlan | None:
    """What to delete now: the lines shown, if every one is still there as shown (else None), plus the
    transcript records that mention the text since (the conversation about forgetting it)."""
    from dataclasses import replace

    from mdrecall.forget.plan import ForgetPlan

    wanted = _keys(shown)
    if not wanted <= _keys(now):
        return None
    selections = []
    for selection in now.selections:
        lines = [ln for ln in selection.lines if (selection.path, ln.line, ln.raw) in wanted or selection.kind == "sessions"]
        if lines:
            selections.append(replace(selection, lines=lines))
    return ForgetPlan(now.target, now.kind, selections, needles=list(now.needles), warnings=list(now.warnings),
                      stale_paths=list(now.stale_paths), leftovers=list(now.leftovers))


def memory_forget_lines(manager: MemorySearchManager, args: dict[str, Any], session_key: str | None) -> dict[str, Any]:
    from mdrecall.forget.plan import ForgetTargetError, plan_forget
    from mdrecall.forget.run import apply_plan

    workspace = str(manager.workspace)
    try:
        plan = plan_forget(manager, args["target"], text=bool(args.get("text")), session_key=session_key, all_sessions=False)
    except ForgetTargetError as exc:
        raise ValueError(str(exc)) from None
    if plan.empty:
        return {"action": "none", "message": "Nothing in memory matches that target."}
    count = f"{plan.line_count} line(s) in {len(plan.selections)} file(s)"
    confirm = args.get("confirm")
    if not confirm:
        _remember(workspace, plan)
        return {"action": "confirm", "token": plan.token, "lines": _lines(plan), "leftovers": list(plan.leftovers),
                "warnings": list(plan.warnings),
                "message": f"This deletes {count} for good. Show them to the user; if they agree, call "
                           f"{MEMORY_FORGET_LINES} again with the same target and confirm={plan.token!r}."}  # fmt: skip
    shown = _shown(workspace, str(confirm))
    chosen = _confirmed(shown, plan) if shown is not None else (plan if confirm == plan.token else None)
    if chosen is None:
        _remember(workspace, plan)
        return {"action": "changed", "token": plan.token, "lines": _lines(plan),
                "message": f"The lines shown with that token are not all there as shown any more (memory changed, or the "
                           f"token is wrong); nothing was deleted. Now: {count}; confirm={plan.token!r} deletes them."}  # fmt: skip
    report = apply_plan(manager, chosen)
    done = f"{chosen.line_count} line(s) in {len(chosen.selections)} file(s)"
    return {
        "action": "forgotten",
        "lineCount": chosen.line_count,
        "citations": [s.citation(ln) for s in chosen.selections for ln in s.lines],
        "stores": [s.to_dict() for s in report.stores],
        "verification": {"verified": report.verified, "checkedFiles": report.checked_files,
                         "remaining": sorted({r.file for r in report.remaining})},  # fmt: skip
        "failures": list(report.failures),
        "message": f"Forgotten: {done}." if report.verified else
                   f"Deleted {done}, but not everywhere: {'; '.join(report.failures) or 'copies remain in the files listed'}.",
    }  # fmt: skip
