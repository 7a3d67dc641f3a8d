"""Which stored chunks one search may see: sources, and whose transcripts.

Applied inside retrieval (SQL for FTS5 and sqlite-vec, a row mask for the in-memory vectors), not
after it: a session restricted to its own transcripts must not lose them because other sessions'
transcripts filled the candidate list first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from mdrecall.config import MemoryConfig
from mdrecall.sources.sessions import transcripts_prefix

SESSIONS = "sessions"


@dataclass(frozen=True, slots=True)
class Scope:
    #: Sources to search; None: all of them.
    sources: tuple[str, ...] | None = None
    #: When set, transcript chunks are visible only under this path prefix (one session's
    #: ``<sessionsDir>/<key>/transcripts/``); the empty string hides every transcript.
    transcripts_prefix: str | None = None

    @property
    def restricted(self) -> bool:
        return self.sources is not None or self.transcripts_prefix is not None

    def sql(self, alias: str = "c") -> tuple[str, tuple[object, ...]]:
        """`` AND …`` conditions on ``<alias>.source`` / ``<alias>.path``, and their arguments."""
        clause, args = "", ()  # type: tuple[str, tuple[object, ...]]
        if self.sources is not None:
            marks = ",".join("?" * len(self.sources)) or "NULL"
            clause += f" AND {alias}.source IN ({marks})"
            args += tuple(self.sources)
        prefix = self.transcripts_prefix
        if prefix == "":
            clause += f" AND {alias}.source != ?"
            args += (SESSIONS,)
        elif prefix is not None:
            # substr, not LIKE/GLOB: a session key may hold characters those treat as wildcards.
            clause += f" AND ({alias}.source != ? OR substr({alias}.path, 1, ?) = ?)"
            args += (SESSIONS, len(prefix), prefix)
        return clause, args

    def allows(self, source: str, path: str) -> bool:
        if self.sources is not None and source not in self.sources:
            return False
        prefix = self.transcripts_prefix
        if prefix is None or source != SESSIONS:
            return True
        return prefix != "" and path.startswith(prefix)

    def mask(self, sources: np.ndarray, paths: Sequence[str]) -> np.ndarray | None:
        """Boolean row mask over parallel arrays of sources and paths; None when nothing is filtered."""
        if not self.restricted:
            return None
        import numpy as np  # only the in-memory vectors need it: keyword searches never load numpy

        allowed = np.ones(len(sources), dtype=bool)
        if self.sources is not None:
            allowed &= np.isin(sources, list(self.sources))
        if self.transcripts_prefix is not None:
            is_session = sources == SESSIONS
            if self.transcripts_prefix == "":
                allowed &= ~is_session
            else:
                own = np.zeros(len(sources), dtype=bool)
                for i in np.flatnonzero(is_session):
                    own[i] = paths[int(i)].startswith(self.transcripts_prefix)
                allowed &= ~is_session | own
        return allowed


ScopeLike = Scope | Sequence[str] | None


def as_scope(value: ScopeLike) -> Scope:
    """A Scope from a Scope, a list of sources (the older call style), or None (everything)."""
    if isinstance(value, Scope):
        return value
    if not value:
        return Scope()
    return Scope(sources=tuple(value))


__all__ = ["Scope", "ScopeLike", "as_scope"]


def scope_for(config: MemoryConfig, sources: Sequence[str] | None, session_key: str | None) -> Scope:
    """What one search may see. Memory files are always visible to every session.

    A session always sees its own transcripts. With ``sessions.visibility: all`` a direct (private)
    session also sees the others; a group or channel session key (one containing a
    ``sessions.sharedKeyMarkers`` marker) never sees any transcript but its own, whatever the
    visibility, so a private conversation cannot leak into a group.
    """
    wanted = tuple(sources) if sources else None
    if SESSIONS not in config.sources:
        return Scope(wanted)
    policy = config.sessions
    shared = session_key is not None and any(marker in session_key for marker in policy.sharedKeyMarkers)
    if policy.visibility == "all" and not shared:
        return Scope(wanted)
    return Scope(wanted, transcripts_prefix(session_key or "", config))
