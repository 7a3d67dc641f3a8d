"""Helpers of the forgetting tests: a workspace stating one distinctive fact in a daily note and in a
transcript, and a byte scan of whole folders (what "no byte of it is left" is checked with)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

#: The fact's distinctive word: unique in every store, and left whole by the keyword index's stemmer.
TOKEN = "Kq7Zorbleflux"
NOTE_PATH = "memory/2026-03-02.md"
NOTE = f"""# 2026-03-02

- We moved the database to Fly Postgres.
- The vault code is {TOKEN}, keep it secret.
- Lunch with Dana at noon.
"""
TRANSCRIPT_PATH = ".openclaw/sessions/main/transcripts/2026-03-02.jsonl"
TRANSCRIPT = [
    {"type": "session", "id": "main", "cwd": "/home/agent"},
    {"type": "message", "message": {"role": "user", "content": f"Remember that the vault code is {TOKEN}.",
                                    "timestamp": "2026-03-02T10:00:00Z"}},
    {"type": "message", "message": {"role": "assistant", "content": "Noted, I will keep the vault code to myself.",
                                    "timestamp": "2026-03-02T10:00:05Z"}},
    {"type": "message", "message": {"role": "user", "content": "Book the Lisbon offsite for May.",
                                    "timestamp": "2026-03-02T10:01:00Z"}},
]  # fmt: skip


def jsonl(records: Iterable[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def files_under(*roots: Path) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if root.is_file():
            out.append(root)
        elif root.is_dir():
            out.extend(p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())
    return out


def holding(texts: Iterable[str], blobs: Iterable[bytes], *roots: Path) -> dict[str, list[str]]:
    """Every file under ``roots`` holding one of ``texts`` (UTF-8, ASCII letters in any case) or one
    of ``blobs`` (exact bytes: vectors): {what (repr, cut): [file, ...]}."""
    wanted = [(repr(t[:24]), t.encode("utf-8").lower(), True) for t in texts]
    wanted += [(f"vector {b[:6].hex()}...", b, False) for b in blobs]
    found: dict[str, list[str]] = {}
    for path in files_under(*roots):
        data = path.read_bytes()
        lowered = data.lower()
        for label, needle, fold in wanted:
            if needle in (lowered if fold else data):
                found.setdefault(label, []).append(str(path))
    return found


def make_fact_ws(root: Path) -> Path:
    ws = root / "agent"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The team prefers short standups.\n", encoding="utf-8")
    (ws / NOTE_PATH).write_text(NOTE, encoding="utf-8")
    transcript = ws / TRANSCRIPT_PATH
    transcript.parent.mkdir(parents=True)
    transcript.write_text(jsonl(TRANSCRIPT), encoding="utf-8")
    return ws
