"""The Search page: one query through ``manager.search``, each hit with why it came back.

A hit shows what :class:`~mdrecall.types.SearchHit` carries (score, keyword and vector scores),
what its path says (dated note or evergreen, hence the decay search applied), the query words it
contains, and any further field ``hit.to_dict()`` holds (per-signal explanations added to the hit
later show up by themselves).

Modes: the open manager's, and keyword-only over a hybrid builtin index, answered by a second manager
reading the same index read-only (:meth:`UiState.keyword_searcher`). Nothing else: another mode would
need an index of its own and the inspector never creates one. Each answer says the mode it was
actually produced in (a hybrid search degrades to keywords when the query embedding fails).

Searches from the inspector are not recalls: the manager is opened with recall tracking off, so
looking does not promote anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from mdrecall.contract import search_memory
from mdrecall.errors import MdrecallError
from mdrecall.search.decay import decay_multiplier
from mdrecall.sources.workspace import note_date
from mdrecall.types import SearchHit, SearchRequest, SearchResponse
from mdrecall.ui.highlight import Matcher
from mdrecall.ui.state import generic_fields, generic_value, render, ui_state

MODES = ("hybrid", "keyword-only", "vector-only")
HIT_FIELDS = {"path", "start_line", "end_line", "score", "snippet", "source", "citation", "vector_score", "text_score",
              "explanation", "superseded_by"}
RESPONSE_FIELDS = {"results", "mode", "provider", "model", "degraded", "warnings", "stale", "freshness"}
MAX_RESULTS = 50


@dataclass(frozen=True)
class ModeOption:
    mode: str
    available: bool
    why: str


def offered_modes(ui: Any, status: Any) -> list[ModeOption]:
    index_mode = status.search_mode if status is not None else None
    fts = bool(((status.details.get("fts") or {}) if status is not None else {}).get("available"))
    keyword_too = ui.manager.backend == "builtin" and index_mode == "hybrid" and fts
    out = []
    for mode in MODES:
        if mode == index_mode:
            out.append(ModeOption(mode, True, "the mode this index searches in"))
        elif mode == "keyword-only" and keyword_too:
            out.append(ModeOption(mode, True, "keyword search alone, over the same index (read-only)"))
        elif mode == "hybrid":
            out.append(ModeOption(mode, False, "needs an embedding provider and a keyword index"))
        else:
            out.append(ModeOption(mode, False, "would need an index of its own, which the inspector never creates"))
    return out


@dataclass
class Line:
    number: int | None
    html: Markup
    matched: bool


@dataclass
class HitView:
    rank: int
    hit: SearchHit
    lines: list[Line]
    link: str
    kind: str
    day: str | None
    age_days: float | None
    decay: float | None
    matched_terms: list[str]
    reasons: list[str]
    extra: list[tuple[str, str]] = field(default_factory=list)
    #: (signal, value) rows on the score's scale (search/explain.py), or the backend's raw ones.
    signals: list[tuple[str, str]] = field(default_factory=list)


def signal_rows(hit: SearchHit) -> list[tuple[str, str]]:
    """The signals table of one hit: each on the score's scale, ending with the score; a backend
    that explains nothing shows its raw keyword rank and similarity, said to be raw."""
    found = hit.explanation or {}
    rows: list[tuple[str, str]] = []
    for key, label in (("keyword", "keyword (score alone)"), ("meaning", "meaning (score alone)"), ("combined", "together"),
                       ("date", "date in the question"), ("speaker", "other speaker"), ("supersession", "knowledge update")):  # fmt: skip
        value = found.get(key)
        if isinstance(value, dict) and "score" in value:
            change = f" ({float(value['change']):+.2f})" if "change" in value else ""
            rows.append((label, f"{float(value['score']):.3f}{change}"))
    if not rows:
        if hit.text_score is not None:
            rows.append(("keyword rank (raw, this backend)", f"{hit.text_score:.4g}"))
        if hit.vector_score is not None:
            rows.append(("similarity (raw)", f"{hit.vector_score:.3f}"))
    rows.append(("score", f"{hit.score:.3f}"))
    return rows


def parse_now(text: str) -> datetime | None:
    """``2026-03-02`` or ``2026-03-02T14:30`` (a datetime-local field), read as UTC; None when empty."""
    text = text.strip()
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MdrecallError(f"'as of' must be a date or date and time (YYYY-MM-DD[THH:MM]), not {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def note_link(path: str, source: str, start: int, end: int, query: str = "") -> str:
    """The Browse view of a note opened at lines ``start``–``end`` (highlighted)."""
    route = "/browse/transcript" if source == "sessions" else "/browse/file"
    params = {"path": path, "hl": f"{start}-{end}"}
    if query:
        params["q"] = query
    return f"{route}?{urlencode(params)}#L{start}"


def explain_hit(rank: int, hit: SearchHit, matcher: Matcher, now: datetime, config: Any, query: str) -> HitView:
    decay_cfg = config.query.temporalDecay
    day = note_date(hit.path) if hit.source == "memory" else None
    age = max(0.0, (now - datetime(day.year, day.month, day.day, tzinfo=UTC)).total_seconds() / 86400) if day else None
    decay = decay_multiplier(hit.path, hit.source, now, decay_cfg.halfLifeDays) if decay_cfg.enabled else None
    raw = hit.snippet.split("\n")
    # Markdown hits cover their lines one to one; transcript hits are rendered lines of JSONL records.
    numbered = hit.source == "memory" and len(raw) == hit.end_line - hit.start_line + 1
    lines = []
    for i, text in enumerate(raw):
        spans = matcher.spans(text) if matcher else []
        lines.append(Line(hit.start_line + i if numbered else None, matcher.mark(text), bool(spans)))
    terms = matcher.matched_terms(hit.snippet) if matcher else []

    reasons = []
    scored = any(k in (hit.explanation or {}) for k in ("keyword", "meaning"))
    if scored:
        pass  # the explanation says each signal on the score's scale (below)
    elif hit.text_score is not None:
        words = ", ".join(terms) if terms else "stemmed or partial forms"
        reasons.append(f"keyword match on {words} (the backend's raw keyword rank {hit.text_score:.3g})")
    elif terms:
        reasons.append(f"contains {', '.join(terms)}, but was not found by keyword search")
    if hit.vector_score is not None and not scored:
        reasons.append(f"close in meaning to the query (similarity {hit.vector_score:.3f})")
    if day is not None:
        # Calendar days for people; decay itself uses the exact age.
        calendar_days = (now.astimezone(UTC).date() - day).days
        when = f"dated note of {day.isoformat()}, {calendar_days} days before the search date" if age is not None else "dated note"
        if decay is not None:
            reasons.append(f"{when}: score × {decay:.3f} (temporal decay, half-life {decay_cfg.halfLifeDays:g} days)")
        else:
            reasons.append(f"{when}; temporal decay is off")
    elif hit.source == "sessions":
        reasons.append("session transcript: no decay")
    else:
        reasons.append("evergreen note (MEMORY.md or an undated topic file): no decay")
    if hit.superseded_by:
        reasons.append(f"out of date: superseded by {hit.superseded_by}")
    reasons.extend(explained(hit.explanation))
    extra = [(key, generic_value(value)) for key, value in generic_fields(hit.to_dict(), HIT_FIELDS)]
    kind = "transcript" if hit.source == "sessions" else (f"dated {day.isoformat()}" if day else "evergreen")
    return HitView(rank, hit, lines, note_link(hit.path, hit.source, hit.start_line, hit.end_line, query), kind,
                   day.isoformat() if day else None, age, decay, terms, reasons, extra, signal_rows(hit))


def explained(explanation: dict[str, Any] | None) -> list[str]:
    """Sentences from a hit's explanation (search/explain.py): each signal on the score's scale, in
    the order the score is built; keys a backend adds that are not known here are shown as they are."""
    if not explanation:
        return []
    out = []
    rest = dict(explanation)
    score = rest.pop("score", None)
    keyword = rest.pop("keyword", None)
    if isinstance(keyword, dict):
        matched = ", ".join(keyword.get("matched") or []) or "none"
        missing = ", ".join(keyword.get("missing") or [])
        out.append(f"keyword evidence alone scores {float(keyword['score']):.2f}: matched {matched}"
                   + (f" (not: {missing})" if missing else "")
                   + f", {100 * float(keyword.get('coverage', 0)):.0f}% of the query's term weight")  # fmt: skip
    meaning = rest.pop("meaning", None)
    if isinstance(meaning, dict):
        out.append(f"meaning alone scores {float(meaning['score']):.2f} (similarity {float(meaning['similarity']):.2f})")
    combined = rest.pop("combined", None)
    if isinstance(combined, dict):
        out.append(f"together: {float(combined['score']):.2f}")
    date = rest.pop("date", None)
    if isinstance(date, dict):
        out.append(f"a date in the query points at this note: {float(date['change']):+.2f} → {float(date['score']):.2f}")
    speaker = rest.pop("speaker", None)
    if isinstance(speaker, dict) and "change" in speaker:
        out.append(f"the question asks about the {speaker['asked']}'s words; this is the {speaker['statedBy']}'s: "
                   f"{float(speaker['change']):+.2f} → {float(speaker['score']):.2f}")  # fmt: skip
    moved = rest.pop("supersession", None)
    if isinstance(moved, dict):
        out.extend(knowledge_update(moved))
        if "score" in moved:
            out.append(f"knowledge update: score → {float(moved['score']):.2f}")
    elif moved:
        out.append(f"knowledge update: {moved}")
    decay = rest.pop("decay", None)
    if isinstance(decay, dict):
        out.append(f"age: × {float(decay['multiplier']):.3f} → {float(decay['score']):.2f}")
    if score is not None:
        out.append(f"score {float(score):.3f} (0.35 is the edge of relevant: the default minScore)")
    rest.pop("mode", None)
    out.extend(f"{key}: {generic_value(value)}" for key, value in sorted(rest.items()))
    return out


def knowledge_update(details: dict[str, Any]) -> list[str]:
    """Sentences from a hit's ``supersession`` explanation (search/supersede.py)."""
    out = []
    newer = details.get("supersededBy")
    if newer:
        how = "its supersedes markup" if details.get("by") == "markup" else f"detection: {details.get('why', 'a changed value')}"
        out.append(f"knowledge update: superseded by {newer} ({how})")
    for key, text, note in (("supersedes", "supersedes", ""), ("possiblyRestates", "possibly restates", ""),
                            ("possiblyRestatedBy", "possibly restated by", " (not marked: no changed value seen)")):  # fmt: skip
        value = details.get(key)
        if value:
            out.append(f"knowledge update: {text} {', '.join(value) if isinstance(value, list) else value}{note}")
    if details.get("broughtIn"):
        out.append(f"knowledge update: brought in {details['broughtIn']}")
    if details.get("moved"):
        out.append(f"knowledge update: {details['moved']}")
    return out


async def search_page(request: Request) -> Response:
    ui = ui_state(request)
    params = request.query_params
    query = params.get("q", "").strip()
    sources_available = list(ui.config.sources)
    chosen = [s for s in params.getlist("source") if s in sources_available]
    session_key = params.get("session", "").strip() or None
    now_text = params.get("now", "")
    try:
        max_results = max(1, min(MAX_RESULTS, int(params.get("max") or ui.config.query.maxResults)))
    except ValueError:
        max_results = ui.config.query.maxResults
    min_text = params.get("min", "").strip()
    status = await ui.cached_status()
    modes = offered_modes(ui, status)
    index_mode = status.search_mode if status is not None else None
    mode = params.get("mode") or index_mode
    error = None
    response: SearchResponse | None = None
    hits: list[HitView] = []
    seconds = None
    now_used = None
    min_score = None
    try:
        if min_text:
            try:
                min_score = float(min_text)
            except ValueError:
                raise MdrecallError(f"minimum score must be a number between 0 and 1, not {min_text!r}") from None
            if not 0 <= min_score <= 1:
                raise MdrecallError("minimum score must be between 0 and 1")
        now = parse_now(now_text)
        option = next((m for m in modes if m.mode == mode), None)
        if mode and index_mode and (option is None or not option.available):
            raise MdrecallError(f"{mode} is not available here: {option.why if option else 'unknown mode'}")
        if query:
            now_used = now or datetime.now(UTC)
            started = datetime.now(UTC)
            searcher = ui.manager
            if mode == "keyword-only" and index_mode != "keyword-only":
                searcher = await run_in_threadpool(ui.keyword_searcher)
            asked = SearchRequest(query, max_results=max_results, min_score=min_score, session_key=session_key,
                                  sources=chosen or None, now=now_used)  # fmt: skip
            response = await run_in_threadpool(search_memory, searcher, asked)
            seconds = (datetime.now(UTC) - started).total_seconds()
            matcher = Matcher.for_query(query)
            hits = [explain_hit(i, hit, matcher, now_used, ui.config, query) for i, hit in enumerate(response.results, 1)]
    except MdrecallError as exc:
        error = str(exc)
    extra = [(k, generic_value(v)) for k, v in generic_fields(response.to_dict(), RESPONSE_FIELDS)] if response else []
    return render(
        request, "search.html",
        query=query, sources_available=sources_available, chosen=chosen, session_key=session_key or "",
        now_text=now_text, max_results=max_results, min_text=min_text, error=error, response=response, hits=hits,
        seconds=seconds, now_used=now_used.isoformat(timespec="seconds") if now_used else None, modes=modes,
        mode=mode, index_mode=index_mode, mode_reasons=status.mode_reasons if status is not None else [], extra=extra,
        transcripts_hidden="sessions" in sources_available and session_key is None
        and ui.config.sessions.visibility == "own",
        default_min=default_min_score(ui.config, response.mode if response is not None else mode),
    )


def default_min_score(config: Any, mode: str | None) -> float:
    """The cut-off a search in ``mode`` applies when none is given: keyword-only and file-scan
    answers use ``query.keywordOnlyMinScore`` (0.1), the others ``query.minScore`` (0.35)."""
    q = config.query
    return float(q.keywordOnlyMinScore if mode in ("keyword-only", "file-scan") else q.minScore)
