"""QMD's answers as mdrecall's records: workspace paths, the cited lines, ``SearchHit`` and
``SearchResponse``, within ``query.maxInjectedChars``.

QMD gives one hit per document with a snippet around its best line for one sub-query. Each hit
that may be returned is read from disk once (that also checks that QMD indexed the current text:
its docid is the sha256 prefix of the file) and cited at the lines holding the most keyword weight
(:func:`mdrecall.backends.qmd.query.best_window`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mdrecall.backends.qmd.layout import Collection
from mdrecall.backends.qmd.query import Ranked, best_window
from mdrecall.backends.qmd.sessions import TranscriptMirror
from mdrecall.config import MemoryConfig
from mdrecall.errors import PathError
from mdrecall.search.scope import Scope
from mdrecall.sources.workspace import rel_path_for, resolve_memory_path
from mdrecall.types import Freshness, SearchHit, SearchMode, SearchResponse, format_citation

QmdMode = Literal["search", "vsearch", "query"]

#: QMD mode -> mdrecall's search mode names.
SEARCH_MODES: dict[str, SearchMode] = {"search": "keyword-only", "vsearch": "vector-only", "query": "hybrid"}


def make_hit(path: str, start: int, end: int, score: float, text: str, source: str, mode: str,
             ranked: Ranked | None = None) -> SearchHit:  # fmt: skip
    score = round(min(1.0, max(0.0, score)), 6)
    explanation: dict[str, object] | None = None
    if mode == "search" and ranked is not None and ranked.weights:
        # The keyword score is the builtin's calibrated one (query.py): said the same way (search/explain.py).
        matched = set(ranked.matched)
        explanation = {"score": round(score, 4), "mode": "keyword-only",
                       "keyword": {"score": round(score, 4), "matched": list(ranked.matched),
                                   "missing": [t for t in ranked.weights if t not in matched],
                                   "coverage": round(ranked.coverage, 3)}}  # fmt: skip
    return SearchHit(
        path, start, end, score, text, source, format_citation(path, start, end),
        vector_score=score if mode == "vsearch" else None,
        text_score=score if mode == "search" else None,
        explanation=explanation,
    )  # fmt: skip


def current_lines(path: Path, docid: str) -> list[str] | None:
    """The lines of ``path`` if it still holds the text QMD indexed (the docid is a sha256 prefix of
    it), else None."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if docid and not hashlib.sha256(raw).hexdigest().startswith(docid.lower()):
        return None
    lines = raw.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(slots=True)
class Mapped:
    hits: list[SearchHit] = field(default_factory=list)
    #: Paths whose file no longer holds what QMD indexed (its index is behind).
    behind: set[str] = field(default_factory=set)


def map_hits(
    ranked: Sequence[Ranked],
    *,
    workspace: Path,
    config: MemoryConfig,
    collections: Mapping[str, Collection],
    mirror: TranscriptMirror | None,
    scope: Scope,
    limit: int,
    mode: str,
) -> Mapped:
    """The first ``limit`` QMD hits that map to mdrecall hits: workspace paths, JSONL lines for
    transcripts, the scope; each read from disk to place its lines (only these are read)."""
    out = Mapped()
    seen: set[str] = set()
    for item in ranked:
        if len(out.hits) >= limit:
            break
        hit = item.hit
        collection = collections.get(hit.collection)
        if collection is None:
            continue
        mirrored = None
        if collection.source == "sessions":
            mirrored = mirror.lookup(hit.rel) if mirror is not None else None
            if mirror is None or mirrored is None:
                continue  # a transcript the mirror no longer has
            path = mirrored.rel_path
            start, end = mirrored.jsonl_lines(hit.start_line, hit.end_line)
            disk = mirror.root / hit.rel
        else:
            try:
                disk, path = resolve_memory_path(workspace, config, rel_path_for(workspace, collection.root / hit.rel))
            except PathError:
                continue  # not something read_file may open: never cite it
            start, end = hit.start_line, hit.end_line
        if path in seen or not scope.allows(collection.source, path):
            continue
        seen.add(path)
        text = hit.text
        lines = current_lines(disk, hit.docid)
        if lines is None:
            out.behind.add(path)  # QMD indexed other text: keep its lines, say the index is behind
        else:
            window = best_window(lines, item.weights)
            if window is not None:
                first, last, _ = window
                text = "\n".join(lines[first - 1 : last])
                start, end = mirrored.jsonl_lines(first, last) if mirrored is not None else (first, last)
        out.hits.append(make_hit(path, start, end, item.score, text, collection.source, mode, item))
    return out


def fit_budget(hits: Sequence[SearchHit], max_results: int, budget: int, mode: str) -> list[SearchHit]:
    """At most ``max_results``, snippets within ``budget`` characters in total (the last one cut to
    the whole lines that fit, its end line and citation with it), as the builtin does."""
    out: list[SearchHit] = []
    used = 0
    for hit in hits[:max_results]:
        remaining = budget - used
        if remaining <= 0:
            break
        if len(hit.snippet) <= remaining:
            out.append(hit)
            used += len(hit.snippet)
            continue
        kept: list[str] = []
        size = 0
        for line in hit.snippet.split("\n"):
            extra = len(line) + (1 if kept else 0)
            if size + extra > remaining:
                break
            kept.append(line)
            size += extra
        if not kept:
            break
        end = hit.start_line + len(kept) - 1 if hit.source == "memory" else hit.end_line
        out.append(make_hit(hit.path, hit.start_line, end, hit.score, "\n".join(kept), hit.source, mode))
        break
    return out


def qmd_response(
    hits: list[SearchHit], mode: str, model: str, *, warnings: list[str], degraded: bool, stale: bool, freshness: Freshness
) -> SearchResponse:
    return SearchResponse(hits, SEARCH_MODES[mode], "qmd", model, degraded, list(warnings), stale, freshness)


def fallback_response(response: SearchResponse, reason: str) -> SearchResponse:
    """A builtin answer given in QMD's place: says so first in ``warnings`` and is ``degraded``."""
    response.warnings.insert(0, reason)
    response.degraded = True
    return response
