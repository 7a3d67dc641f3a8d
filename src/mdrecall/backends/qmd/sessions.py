"""Session transcripts for QMD, which indexes Markdown only: a redacted Markdown mirror.

Each ``<sessions.dir>/<key>/transcripts/<name>.jsonl`` is rendered exactly as the builtin engine
renders it (``transcripts.TranscriptRenderer``, from where it grew: user and assistant text, secrets
redacted, one line per rendered line) and written to ``<indexDir>/sessions/<key>/transcripts/<name>.md``, with no
header, so line *i* of the mirror is rendered line *i*. Results map back through the render's line
map to JSONL line numbers and to the transcript's real workspace path, like the builtin's citations.

The mirror lives under the index home, never in the workspace: user files are not touched, and
what QMD stores has already been redacted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.sources.transcripts import TranscriptRenderer, list_transcripts
from mdrecall.sources.workspace import rel_path_for


@dataclass(frozen=True, slots=True)
class MirroredTranscript:
    rel_path: str  # the transcript's workspace-relative path (what results cite)
    line_map: tuple[int, ...]  # rendered (mirror) line -> JSONL line, 1-based
    stamp: tuple[int, int]  # (mtime_ns, size) of the transcript when it was rendered

    def jsonl_lines(self, start: int, end: int) -> tuple[int, int]:
        if not self.line_map:
            return start, end
        lo = min(max(start, 1), len(self.line_map))
        hi = min(max(end, lo), len(self.line_map))
        return self.line_map[lo - 1], self.line_map[hi - 1]


class TranscriptMirror:
    def __init__(self, workspace: Path, config: MemoryConfig, root: Path) -> None:
        self.workspace = workspace
        self.config = config
        self.root = root
        #: mirror path relative to ``root`` ("<key>/transcripts/<name>.md") -> transcript
        self.entries: dict[str, MirroredTranscript] = {}
        #: A transcript grows by appends: each export renders only what was appended since the last.
        self.renderer = TranscriptRenderer(redact=True)

    def export(self) -> tuple[int, int]:
        """Bring the mirror up to date; (files written, files removed)."""
        written = removed = 0
        wanted: set[str] = set()
        for key, path in list_transcripts(self.workspace, self.config.sessions.dir):
            mirror_rel = f"{key}/transcripts/{path.stem}.md"
            wanted.add(mirror_rel)
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            known = self.entries.get(mirror_rel)
            target = self.root / mirror_rel
            if known is not None and known.stamp == stamp and target.is_file():
                continue
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            rendered = self.renderer.render(mirror_rel, raw.decode("utf-8", errors="replace"))
            text = rendered.text + "\n" if rendered.text else ""
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(target.name + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, target)
                written += 1
            self.entries[mirror_rel] = MirroredTranscript(rel_path_for(self.workspace, path), tuple(rendered.line_map), stamp)
        for mirror_rel in sorted(set(self.entries) - wanted):
            self.entries.pop(mirror_rel, None)
        for stale in self.root.glob("*/transcripts/*.md"):
            rel = stale.relative_to(self.root).as_posix()
            if rel not in wanted:
                stale.unlink(missing_ok=True)
                removed += 1
        return written, removed

    def lookup(self, mirror_rel: str) -> MirroredTranscript | None:
        return self.entries.get(mirror_rel)
