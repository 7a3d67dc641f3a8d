"""Who may see a file: its agent only ("private"), or the agent's whole team ("team").

A memory file is team-visible when it sits in a configured shared folder (``memory/shared/`` by
default) or its YAML front matter says ``visibility: team``. Everything else is private, and session
transcripts are private whatever they contain (the schema refuses anything else). Front matter that
says ``visibility: private`` keeps a file in a shared folder private: the narrower setting wins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

Visibility = Literal["private", "team"]

#: Front matter: a first line of ``---``, then lines up to a closing ``---`` (or ``...``).
_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*$", re.S | re.M)
_VISIBILITY_LINE = re.compile(r"^visibility[ \t]*:[ \t]*['\"]?([A-Za-z]+)['\"]?[ \t]*(?:#.*)?$", re.M)
#: Front matter is read from the start of the file only.
_FRONT_MATTER_MAX = 8192


def declared_visibility(text: str) -> Visibility | None:
    """The ``visibility`` the file's front matter declares, or None."""
    match = _FRONT_MATTER.match(text[:_FRONT_MATTER_MAX])
    if not match:
        return None
    found = _VISIBILITY_LINE.search(match.group(1))
    if not found:
        return None
    value = found.group(1).lower()
    if value in ("team", "shared"):
        return "team"
    if value == "private":
        return "private"
    return None  # an unknown value never widens access


def classify(path: str, source: str, text: str | None, shared_folders: Sequence[str]) -> Visibility:
    if source != "memory" or text is None:
        return "private"
    declared = declared_visibility(text)
    if declared is not None:
        return declared
    for folder in shared_folders:
        if path.startswith(folder):
            return "team"
    return "private"


__all__ = ["Visibility", "classify", "declared_visibility"]
