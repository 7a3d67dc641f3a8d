""""As known then": keep only what was written by a given time (``asOf``).

* a dated note counts when its day is on or before the as-of day (in the as-of time's zone);
* a transcript message counts when its timestamp is at or before the as-of time (a message without
  one takes the previous message's; with none before it, the transcript's modification time must be
  before the as-of time); a hit spanning later messages is cut to the ones before;
* an undated file (``MEMORY.md``, ``memory/topics.md``) counts only when it was last modified at or
  before the as-of time: its present text may hold what was learnt later, and no earlier version
  of it is kept. Left out otherwise, and the response says which files were.

The shared ranking (search/pipeline.py ``rank_candidates``) applies it, so every engine that ranks
through it (builtin, Postgres) answers as-of searches the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time

from mdrecall.search.budget import Hit, message_map
from mdrecall.search.dating import FileTimes, plain_path
from mdrecall.sources.workspace import note_date


def search_times(now: datetime | None, as_of: datetime | date | None) -> tuple[datetime, datetime | None]:
    """A search's ``now`` and ``as_of``, zone-aware (a naive time is UTC). ``now`` defaults to
    ``as_of``, so decay and relative dates ("last week") count from then; a bare date as ``as_of``
    means the end of that day."""
    if isinstance(as_of, date) and not isinstance(as_of, datetime):
        as_of = datetime.combine(as_of, time.max, tzinfo=UTC)
    if as_of is not None and as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    now = now or as_of or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now, as_of


def parse_as_of(text: str, *, local: bool = False) -> datetime:
    """``2026-03-31`` (the end of that day) or an ISO time (``2026-03-31T14:00``, ``...Z``,
    ``...+02:00``); a time without a zone is local time with ``local``, else UTC. ValueError when
    it is neither."""
    raw = text.strip()
    try:
        if len(raw) == 10:
            parsed = datetime.combine(date.fromisoformat(raw), time.max)
        else:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO date or time, e.g. 2026-03-31 or 2026-03-31T14:00") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone() if local else parsed.replace(tzinfo=UTC)
    return parsed


@dataclass
class Filtered:
    kept: list[Hit]
    #: Hits dated after the as-of time (notes, messages), left out.
    later: int = 0
    #: Undated files left out: changed after the as-of time, or their time is unknown.
    undated: list[str] = field(default_factory=list)

    def warnings(self, as_of: datetime) -> list[str]:
        when = as_of.isoformat(timespec="minutes")
        out = []
        if self.later:
            out.append(f"as of {when}: {self.later} later memor{'y' if self.later == 1 else 'ies'} left out")
        if self.undated:
            names = ", ".join(sorted(self.undated)[:5]) + (" …" if len(self.undated) > 5 else "")
            out.append(
                f"as of {when}: undated file(s) changed since then left out ({names}): their present text may hold "
                "later facts and no earlier version is kept; search without asOf to see them"
            )
        return out


def _message_known(times: dict[int, int | None] | None, line: int, limit_ms: int, file_ok: bool) -> bool:
    if times is None:
        return file_ok  # the transcript cannot be read: only its modification time can tell
    if line not in times:
        return True  # not a message (a tool record between two): nothing was said there
    stamp = times[line]
    return file_ok if stamp is None else stamp <= limit_ms


def _cut_session(hit: Hit, keep: set[int]) -> Hit | None:
    """``hit`` cut to the messages in ``keep`` (a run from its first message); None if none is left."""
    run = []
    for message in range(hit.start_line, hit.end_line + 1):
        if message not in keep:
            break
        run.append(message)
    if not run:
        return None
    mapping = hit.line_map or message_map(hit.text, hit.start_line, hit.end_line)
    if mapping is None:
        return None  # which rendered line is which message is unknown: nothing can be kept for sure
    lines = hit.text.split("\n")
    idx = [i for i, m in enumerate(mapping) if m <= run[-1]]
    weights = [hit.line_weights[i] for i in idx] if len(hit.line_weights) == len(lines) else []
    return replace(hit, end_line=run[-1], text="\n".join(lines[i] for i in idx), line_weights=weights,
                   line_map=[mapping[i] for i in idx], cost=0)  # fmt: skip


def known_then(hits: list[Hit], as_of: datetime, times: FileTimes | None) -> Filtered:
    """The hits (cut where needed) of what was written by ``as_of``, in their order."""
    out = Filtered([])
    day = as_of.date()
    limit_ms = int(as_of.timestamp() * 1000)
    undated: set[str] = set()
    for hit in hits:
        if hit.source == "sessions":
            messages = times.messages(hit.path) if times is not None else None
            modified = times.mtime(hit.path) if times is not None else None
            file_ok = modified is not None and modified <= as_of
            keep = {m for m in range(hit.start_line, hit.end_line + 1) if _message_known(messages, m, limit_ms, file_ok)}
            if len(keep) == hit.end_line - hit.start_line + 1:
                out.kept.append(hit)
                continue
            cut = _cut_session(hit, keep) if keep else None
            if cut is not None:
                out.kept.append(cut)
            else:
                out.later += 1
            continue
        dated = note_date(plain_path(hit.path))
        if dated is not None:
            if dated <= day:
                out.kept.append(hit)
            else:
                out.later += 1
            continue
        modified = times.mtime(hit.path) if times is not None else None
        if modified is not None and modified <= as_of:
            out.kept.append(hit)
        else:
            undated.add(hit.path)
    out.undated = sorted(undated)
    return out


__all__ = ["Filtered", "known_then", "parse_as_of", "search_times"]
