"""Knowledge updates: when a newer dated note restates what an older one says, rank the newer first.

Two hits restate one fact here when both are dated notes, both match most of the query's term
weight, and they match nearly the same terms; if the older ranks above the newer by less than
``margin`` in logit, they trade scores (the set of scores, and so the calibration, is unchanged).
A clearly better older hit keeps its place: detection never hides a fact, it only orders near-ties.
"""

from __future__ import annotations

from mdrecall.search.budget import Hit
from mdrecall.search.relevance import SCALE
from mdrecall.sources.workspace import note_date
from mdrecall.types import format_citation

#: Hits considered (the head of the ranking): pairs below it cannot reach the results anyway.
HEAD = 30


def _same_fact(a: Hit, b: Hit) -> bool:
    ea, eb = a.evidence, b.evidence
    if ea is None or eb is None or not ea.matched or not eb.matched:
        return False
    if min(ea.coverage, eb.coverage) < 0.5 or abs(ea.coverage - eb.coverage) > 0.2:
        return False
    sa, sb = set(ea.matched), set(eb.matched)
    return len(sa & sb) / len(sa | sb) >= 0.6


def _cite(hit: Hit) -> str:
    return format_citation(hit.path, hit.start_line, hit.end_line)


def supersede(hits: list[Hit], margin: float) -> None:
    """Reorder ``hits`` (sorted by score) in place so restatements come newest first."""
    head = hits[:HEAD]
    # ``@agent/<path>``: another agent's team note (Postgres backend), dated by its path.
    dated = [(h, note_date(h.path.partition("/")[2] if h.path.startswith("@") else h.path)) for h in head
             if h.source == "memory"]
    days = {h.rowid: d for h, d in dated if d is not None}
    if len(days) < 2:
        return
    changed = False
    for i, older in enumerate(head):
        d_old = days.get(older.rowid)
        if d_old is None:
            continue
        for newer in head[i + 1 :]:
            d_new = days.get(newer.rowid)
            if d_new is None or d_new <= d_old or older.logit - newer.logit > margin:
                continue
            if newer.path == older.path or not _same_fact(older, newer):
                continue
            older.logit, newer.logit = newer.logit, older.logit
            older.score, newer.score = SCALE.score(older.logit), SCALE.score(newer.logit)
            older.superseded = f"moved below the newer restatement {_cite(newer)} (scores swapped)"
            newer.superseded = f"moved above the older statement {_cite(older)} (scores swapped)"
            changed = True
            break
    if changed:
        hits.sort(key=lambda h: h.score, reverse=True)
