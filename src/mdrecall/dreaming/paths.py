"""Where dreaming keeps its state, and which indexed paths count as short-term memory.

Short-term material is what an agent jots down as it goes: dated daily notes
(``memory/**/YYYY-MM-DD[-slug].md``) and session transcripts (source ``"sessions"``). ``MEMORY.md`` and
evergreen topic files are already long-term; ``memory/dreaming/`` and ``memory/.dreams/`` hold this
feature's own output and are never short-term, so nothing it writes is recorded back.
"""

from __future__ import annotations

import re
from pathlib import Path

MEMORY_FILE = "MEMORY.md"
DREAMS_DIR = "memory/.dreams"
STORE_FILE = f"{DREAMS_DIR}/short-term-recall.json"
QUEUE_FILE = f"{DREAMS_DIR}/promotion-queue.md"

_DAILY = re.compile(r"^memory/(?:[^/]+/)*\d{4}-\d{2}-\d{2}(?:[-_ .][^/]*)?\.md$")
_OWN_OUTPUT = re.compile(r"(?:^|/)memory/(?:dreaming|\.dreams)(?:/|$)")


def normalize_path(path: str) -> str:
    text = path.replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text


def is_daily_note(path: str) -> bool:
    rel = normalize_path(path)
    return bool(_DAILY.match(rel)) and not _OWN_OUTPUT.search(rel)


def is_short_term(path: str, source: str, *, track_sessions: bool = True) -> bool:
    if source == "sessions":
        return track_sessions
    if source != "memory":
        return False
    from mdrecall.dreaming.sources import is_entry_path

    # Entries of a registered source (LanceDB "ltm:<id>") are short-term material too (sources.py).
    return is_daily_note(path) or is_entry_path(path)


def store_path(workspace: Path) -> Path:
    return workspace / STORE_FILE


def queue_path(workspace: Path) -> Path:
    return workspace / QUEUE_FILE


def memory_file_path(workspace: Path) -> Path:
    return workspace / MEMORY_FILE
