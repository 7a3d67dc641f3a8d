"""Session transcripts as an index source (``"sessions"``, opt-in via ``sources``).

Transcripts are stored under their real workspace-relative path
(``.openclaw/sessions/<sessionKey>/transcripts/<file>.jsonl``) so citations point at the file, and
chunk line numbers are JSONL line numbers. Secrets are redacted while rendering, before anything is
chunked, stored or embedded.

A transcript grows one line per message. Automatic syncs (on search, on the interval) re-index it
only once the appended tail reaches ``sync.sessions.deltaBytes`` or ``deltaMessages`` lines
(:meth:`SessionSource.defer_growth`); explicit syncs, session starts and rebuilds always index it.

Claude Code and Codex CLI logs (``sessions.claudeCode`` / ``sessions.codex``) are transcripts of this
source too, read where the host writes them and stored under their absolute path
(:mod:`mdrecall.sources.hostlogs`); the session key ``claude-code`` / ``codex`` sees them.
"""

from __future__ import annotations

from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.sources import hostlogs
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.transcripts import TranscriptRenderer, list_transcripts, sessions_root
from mdrecall.sources.workspace import MemoryFile, rel_path_for


class SessionSource(SourceAdapter):
    source = "sessions"
    #: Transcripts may hold stray invalid bytes; they are replaced rather than skipping the file.
    lenient_decode = True

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        self.workspace = workspace
        self.config = config
        self.census = hostlogs.Census(hostlogs.census_path(workspace))
        #: A transcript grows by appends: each sync renders only what was appended since the last.
        self.renderer = TranscriptRenderer(redact=True)

    def discover(self) -> list[MemoryFile]:
        files = [
            MemoryFile(str(path), rel_path_for(self.workspace, path), self.source)
            for _key, path in list_transcripts(self.workspace, self.config.sessions.dir)
        ]
        files += [MemoryFile(str(path), path.as_posix(), self.source) for _kind, path in hostlogs.list_host_logs(self.config)]
        return files

    def render(self, file: MemoryFile, text: str) -> tuple[list[str], list[int]]:
        rendered = self.renderer.render(file.rel_path, text)
        kind = hostlogs.host_of(file.rel_path, self.config)
        if kind is not None:
            self.census.record(file.rel_path, kind, rendered.unknown_records, rendered.skipped_lines)
        return rendered.lines, list(rendered.line_map)

    def forget(self, rel_path: str) -> None:
        self.renderer.forget(rel_path)

    def below_thresholds(self, appended_bytes: int, appended_lines: int) -> bool:
        """True while an append is too small to re-index."""
        deltas = self.config.sync.sessions
        return appended_bytes > 0 and not delta_reached(deltas.deltaBytes, deltas.deltaMessages, appended_bytes, appended_lines)

    def defer_growth(self, raw: bytes, indexed_size: int) -> bool:
        """Whether a sync may leave this transcript's appended tail (``raw[indexed_size:]``) for later."""
        tail = raw[indexed_size:]
        return self.below_thresholds(len(tail), tail.count(b"\n"))

    def deferrable(self, path: Path, indexed_size: int, size: int) -> bool:
        """The same decision from the file on disk, reading only the appended tail (for status)."""
        if size <= indexed_size or not self.below_thresholds(size - indexed_size, 0):
            return False
        try:
            with path.open("rb") as fh:
                fh.seek(indexed_size)
                tail = fh.read(size - indexed_size)
        except OSError:
            return False
        return self.below_thresholds(len(tail), tail.count(b"\n"))


def delta_reached(delta_bytes: int, delta_messages: int, appended_bytes: int, appended_lines: int) -> bool:
    """Whether a transcript's append is large enough to re-index now (``sync.sessions.deltaBytes`` /
    ``deltaMessages``; a threshold of 0 means any growth counts)."""
    if appended_bytes <= 0:
        return False
    if delta_bytes <= 0 or appended_bytes >= delta_bytes:
        return True
    return delta_messages <= 0 or appended_lines >= delta_messages


def session_key_of(rel_path: str, config: MemoryConfig) -> str | None:
    """The session key of a stored transcript path, or None for anything else."""
    host = hostlogs.host_of(rel_path, config)
    if host is not None:
        return host
    prefix = Path(config.sessions.dir).as_posix().strip("/") + "/"
    if not rel_path.startswith(prefix):
        return None
    rest = rel_path[len(prefix):].split("/")
    return rest[0] if len(rest) >= 3 and rest[1] == "transcripts" else None


def transcripts_prefix(session_key: str, config: MemoryConfig) -> str:
    """The stored-path prefix of one session's transcripts (what ``session_key_of`` maps back to the
    key); "" for a key no stored path can have. ``claude-code`` / ``codex``: that host's logs, while indexed."""
    host = hostlogs.host_prefix(session_key, config)
    if host is not None:
        return host
    if not session_key or "/" in session_key or session_key in (".", ".."):
        return ""
    return Path(config.sessions.dir).as_posix().strip("/") + f"/{session_key}/transcripts/"


__all__ = ["SessionSource", "delta_reached", "session_key_of", "sessions_root", "transcripts_prefix"]
