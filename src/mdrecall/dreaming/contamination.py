"""Recognising dreaming's own output, so it is never recorded back as a fresh recall.

Everything mdrecall writes that quotes a fact (MEMORY.md promotions, the review queue, dream reports)
carries an ``<!-- mdrecall:… -->`` marker on the same block. Text copied elsewhere with its marker
(an agent pasting a MEMORY.md line into today's note, a transcript echoing a tool result) is caught by
the marker; text copied without it is caught by the recording step, which also refuses any fact
whose text equals one already promoted (the store keeps those hashes). OpenClaw's own markers and its
staged-candidate layout are recognised too, for workspaces migrated from it.
"""

from __future__ import annotations

import re

MARKER_PREFIX = "<!-- mdrecall:"
PROMOTED_MARKER = "mdrecall:promoted"
CANDIDATE_MARKER = "mdrecall:candidate"
REPORT_MARKER = "mdrecall:report"
QUEUE_MARKER = "mdrecall:queue"
# Whole files written by dreaming (reports, the queue) carry one of these near the top.
_FILE_MARKERS = (f"<!-- {REPORT_MARKER}", f"<!-- {QUEUE_MARKER}")

_MARKERS = (
    MARKER_PREFIX,
    "<!-- openclaw-memory-promotion:",
    "<!-- openclaw:dreaming:",
    "Write a dream diary entry from these memory fragments",
)
# OpenClaw's light-phase staging block: "- Candidate: … confidence: 0.62 … evidence: memory/… recalls: 3 … status: staged".
_LEAD = re.compile(r"^(?:@@ -\d+(?:,\d+)? - |[\[(]|- |\* |\+ |> )+")
_STAGED_START = re.compile(r"^(?:Candidate|Reflections?):", re.IGNORECASE)
_STAGED_PARTS = (
    re.compile(r"confidence:\s*\d"),
    re.compile(r"evidence:\s*memory/"),
    re.compile(r"status:\s*staged"),
    re.compile(r"recalls:\s*\d"),
)


def is_contaminated(text: str) -> bool:
    if not text:
        return False
    if any(marker in text for marker in _MARKERS):
        return True
    body = _LEAD.sub("", text.strip())
    return bool(_STAGED_START.match(body)) and all(p.search(text) for p in _STAGED_PARTS)


def is_dreaming_output_file(text: str) -> bool:
    """A dream report or review queue (marker in its first lines): none of it is short-term material."""
    head = "\n".join(text.split("\n", 5)[:5])
    return any(marker in head for marker in _FILE_MARKERS)
