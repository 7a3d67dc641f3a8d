"""Session transcripts as an index source (``"sessions"``, opt-in via ``sources``).

Transcripts are stored under their real workspace-relative path
(``.openclaw/sessions/<sessionKey>/transcripts/<file>.jsonl``) so citations point at the file, and
chunk line numbers are JSONL line numbers. Secrets are redacted while rendering, before anything is
chunked, stored or embedded.
"""

from __future__ import annotations

from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.sync import SourceAdapter
from mdrecall.transcripts import list_transcripts, render_transcript, sessions_root
from mdrecall.workspace import MemoryFile, rel_path_for


class SessionSource(SourceAdapter):
    source = "sessions"
    #: Transcripts may hold stray invalid bytes; they are replaced rather than skipping the file.
    lenient_decode = True

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        self.workspace = workspace
        self.config = config

    def discover(self) -> list[MemoryFile]:
        return [
            MemoryFile(path, rel_path_for(self.workspace, path), self.source)
            for _key, path in list_transcripts(self.workspace, self.config.sessions.dir)
        ]

    def render(self, file: MemoryFile, text: str) -> tuple[list[str], list[int]]:
        rendered = render_transcript(text, redact=True)
        return rendered.lines, list(rendered.line_map)


def session_key_of(rel_path: str, config: MemoryConfig) -> str | None:
    """The session key of a stored transcript path, or None for anything else."""
    prefix = Path(config.sessions.dir).as_posix().strip("/") + "/"
    if not rel_path.startswith(prefix):
        return None
    rest = rel_path[len(prefix):].split("/")
    return rest[0] if len(rest) >= 3 and rest[1] == "transcripts" else None


__all__ = ["SessionSource", "session_key_of", "sessions_root"]
