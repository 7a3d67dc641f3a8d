"""``mdrecall import-chats``: an export in, transcripts written and indexed, found by the next search."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .conftest import run_process

Run = Callable[..., tuple[int, str, str]]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def test_import_then_search_in_separate_processes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mdrecall.yaml").write_text("provider: none\nsources: [memory, sessions]\n", encoding="utf-8")
    home = tmp_path / "home"
    done = run_process(home, "import-chats", "-w", str(ws), str(FIXTURES / "chatgpt" / "conversations.json"))
    assert done.returncode == 0, done.stderr
    assert "chatgpt export: 3 conversations, 6 messages" in done.stdout and "wrote 2 new, 0 updated" in done.stdout
    assert "--session-key chatgpt" in done.stdout and "secret(s) redacted" in done.stderr
    assert "hologram_frame x1" in done.stderr
    found = run_process(home, "search", "-w", str(ws), "--session-key", "chatgpt", "kiwi offsite venue", "--json")
    hit = json.loads(found.stdout)["results"][0]
    assert hit["citation"].startswith(".openclaw/sessions/chatgpt/transcripts/6868a1b2-0c3d-8004-9e5f-1a2b3c4d5e6f.jsonl#L")
    again = run_process(home, "import-chats", "-w", str(ws), str(FIXTURES / "chatgpt" / "conversations.json"), "--json")
    report = json.loads(again.stdout)
    assert (report["written"], report["updated"], report["unchanged"]) == (0, 0, 2)


def test_mistakes_get_one_clear_line(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    code, _, err = mdrecall("import-chats", "-w", ws, tmp_path / "missing.zip")
    assert code == 1 and err.strip() == f"mdrecall: {tmp_path / 'missing.zip'}: no such file"
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": 1}')
    code, _, err = mdrecall("import-chats", "-w", ws, notes)
    assert code == 1 and "expected a list of conversations" in err and len(err.strip().splitlines()) == 1
    code, out, err = mdrecall("import-chats", "-w", ws, "-c", "provider=none", FIXTURES / "claude-ai" / "conversations.json")
    assert code == 0 and "claude-ai export: 2 conversations" in out
    assert "not indexed: add sessions to sources" in err  # written, and the user is told how to search it
    assert (ws / ".openclaw/sessions/claude-ai/transcripts/2f0e9d8c-7b6a-4c5d-9e8f-1a2b3c4d5e6f.jsonl").is_file()
    code, out, _ = mdrecall("import-chats", "-w", ws, "--from", "chatgpt", "--dry-run", FIXTURES / "chatgpt" / "conversations.json")
    assert code == 0 and "would write 2 new" in out and not (ws / ".openclaw/sessions/chatgpt").exists()
