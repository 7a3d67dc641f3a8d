"""The agent tool ``memory_forget_lines``: forget chosen lines (or a text) in two calls.

``memory_forget_lines {target, text?, confirm?}``:

1. without ``confirm``: ``{action: "confirm", token, lines: [...], message}`` — exactly what would be
   deleted, nothing changed; ``{action: "none"}`` when a text is found nowhere;
2. with ``confirm`` set to that token: ``{action: "forgotten", stores, verification, ...}`` (the
   forget's report); ``{action: "changed", token, lines}`` when the lines the target selects are no
   longer the ones the token names (the memory changed, or the token is wrong): nothing deleted.

Transcripts are those the calling session may see (``sessions.visibility``, as search decides). A
target that names nothing valid raises ValueError (answered as ``invalid_arguments``). Imports
nothing heavy until it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager
    from mdrecall.forget.plan import ForgetPlan

MEMORY_FORGET_LINES = "memory_forget_lines"

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


def _lines(plan: ForgetPlan) -> list[dict[str, Any]]:
    return [{"citation": s.citation(ln), "text": ln.shown} for s in plan.selections for ln in s.lines]


def memory_forget_lines(manager: MemorySearchManager, args: dict[str, Any], session_key: str | None) -> dict[str, Any]:
    from mdrecall.forget.plan import ForgetTargetError, plan_forget
    from mdrecall.forget.run import apply_plan

    try:
        plan = plan_forget(manager, args["target"], text=bool(args.get("text")), session_key=session_key, all_sessions=False)
    except ForgetTargetError as exc:
        raise ValueError(str(exc)) from None
    if not plan.selections:
        return {"action": "none", "target": plan.target, "message": f"Nothing in memory matches {plan.target!r}."}
    confirm = args.get("confirm")
    count = f"{plan.line_count} line(s) in {len(plan.selections)} file(s)"
    if not confirm:
        return {"action": "confirm", "token": plan.token, "lines": _lines(plan), "warnings": list(plan.warnings),
                "message": f"This deletes {count} for good. Show them to the user; if they agree, call "
                           f"{MEMORY_FORGET_LINES} again with the same target and confirm={plan.token!r}."}  # fmt: skip
    if confirm != plan.token:
        return {"action": "changed", "token": plan.token, "lines": _lines(plan),
                "message": f"The lines this target selects are not the ones that token names (memory changed since, or "
                           f"the token is wrong); nothing was deleted. Now: {count}; confirm={plan.token!r} deletes them."}  # fmt: skip
    report = apply_plan(manager, plan)
    out = {"action": "forgotten", **report.to_dict()}
    out["message"] = (f"Forgotten: {count}." if report.verified else
                      f"Deleted {count}, but not everywhere: {'; '.join(report.failures) or 'copies remain'} (see verification).")  # fmt: skip
    return out
