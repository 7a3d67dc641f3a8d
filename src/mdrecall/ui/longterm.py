"""The Long-term page: memories a backend stores as entries rather than files (the LanceDB backend's
captured facts): list, search, forget — all through the manager.

Shown only when the open backend is ``lancedb`` and its manager offers :class:`LongTermEntries`
(``list_entries``, ``count``, ``forget``); hidden, and its routes answer 404, otherwise. The LanceDB
backend is being built on its own branch: this page is written against that manager's methods and
renders each entry generically from ``to_dict()``, so it needs no change when the backend lands, but it
has only been exercised against a test backend offering the same methods.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from mdrecall.contract import MemorySearchManager
from mdrecall.ui.highlight import Matcher
from mdrecall.ui.index_view import Page
from mdrecall.ui.state import form, int_param, redirect, render, ui_state

BACKENDS = frozenset({"lancedb"})
PER_PAGE = 25
#: Entry fields shown in their own columns; any others are listed under the text.
SHOWN = {"id", "text", "category", "createdAt", "created_at"}


@runtime_checkable
class LongTermEntries(Protocol):
    def list_entries(self, *, category: str | None = None, limit: int | None = None, offset: int = 0) -> list[Any]: ...

    def count(self) -> int: ...

    def forget(self, memory_id: str | None = None, query: str | None = None) -> dict[str, Any]: ...


def longterm_entries(manager: MemorySearchManager) -> LongTermEntries | None:
    if manager.backend in BACKENDS and isinstance(manager, LongTermEntries):
        return manager
    return None


def entry_dict(entry: Any) -> dict[str, Any]:
    if hasattr(entry, "to_dict"):
        return dict(entry.to_dict())
    if isinstance(entry, dict):
        return dict(entry)
    return {"text": str(entry)}


def _extra(data: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for key in sorted(data):
        if key in SHOWN or key in ("vector", "embedding"):
            continue
        value = data[key]
        out.append((key, json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, (dict, list)) else str(value)))
    return out


async def longterm_page(request: Request) -> Response:
    ui = ui_state(request)
    store = longterm_entries(ui.manager)
    if store is None:
        return render(request, "error.html", status_code=404, title="No long-term entries here",
                      message=f"The {ui.manager.backend!r} backend keeps memory in files only; "
                              "long-term entries exist with backend: lancedb.")
    query = request.query_params.get("q", "").strip()
    page = int_param(request, "page", 1)
    hits = None
    rows: Page[dict[str, Any]] | None = None
    if query:
        response = await run_in_threadpool(ui.manager.search, query)
        hits = response.results
    else:
        total = await run_in_threadpool(store.count)
        listed = await run_in_threadpool(lambda: store.list_entries(limit=PER_PAGE, offset=(page - 1) * PER_PAGE))
        rows = Page([entry_dict(e) for e in listed], total, page, PER_PAGE)
    return render(request, "longterm.html", query=query, hits=hits, rows=rows, extra=_extra,
                  matcher=Matcher.for_query(query))


async def forget_entry(request: Request) -> Response:
    ui = ui_state(request)
    store = longterm_entries(ui.manager)
    if store is None:
        return render(request, "error.html", status_code=404, title="No long-term entries here", message="")
    memory_id = form(request).get("id", "").strip()
    if not memory_id:
        ui.flash(request, "error", "Which entry? No id was given.")
        return redirect("/longterm")
    try:
        result = await run_in_threadpool(lambda: store.forget(memory_id=memory_id))
    except Exception as exc:
        ui.flash(request, "error", f"Not forgotten: {type(exc).__name__}: {exc}")
    else:
        ui.flash(request, "ok", f"Forgotten: {json.dumps(result, ensure_ascii=False, default=str)}")
    return redirect("/longterm")
