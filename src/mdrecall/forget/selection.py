"""One file's (or long-term entry's) chosen lines: what a forget plan is made of."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mdrecall.sources.redact import redact_secrets
from mdrecall.text import collapse_whitespace

FileKind = Literal["memory", "sessions", "ltm"]
#: Lines shown in a plan are cut here (the whole line is still removed).
SHOWN_CHARS = 300


@dataclass(frozen=True, slots=True)
class SelectedLine:
    line: int
    #: What is shown for it: the line (a transcript record: its message), secrets redacted, cut.
    shown: str
    #: The line exactly as read (without its newline): what is removed, and what the token names.
    raw: str = field(repr=False)


@dataclass(slots=True)
class FileSelection:
    """The chosen lines of one file (or one long-term entry)."""

    path: str
    kind: FileKind
    lines: list[SelectedLine]
    #: The whole file: a Markdown file is deleted, every record of a transcript redacted.
    whole: bool = False
    #: The file on disk (None for a long-term entry).
    abspath: Path | None = None
    #: The text the plan was computed from (Markdown: the base of the compare-and-swap).
    base: str | None = field(default=None, repr=False)
    #: Where a long-term entry lives: "primary" (the configured backend) or the LanceDB URI.
    store: str | None = None

    def citation(self, line: SelectedLine) -> str:
        return f"{self.path}#L{line.line}" if self.kind != "ltm" else f"{self.path}#L1"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "whole": self.whole,
            "lines": [{"line": ln.line, "citation": self.citation(ln), "text": ln.shown} for ln in self.lines],
        }


def shown_text(text: str) -> str:
    one = collapse_whitespace(redact_secrets(text))
    return one if len(one) <= SHOWN_CHARS else one[: SHOWN_CHARS - 1] + "…"
