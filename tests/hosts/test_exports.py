"""ChatGPT and Claude.ai data exports imported as transcripts, then indexed and searched for real.

The fixtures are invented conversations in each export's documented shape (docs/hosts/chatgpt.md,
docs/hosts/claude-ai.md): a ChatGPT tree with an abandoned branch, hidden context, tool traffic and
an unknown content type; a Claude.ai export with thinking and tool blocks, an unknown block and an
unknown sender. Decoy words sit in everything that must not be indexed."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.hosts.exports import ExportError, import_export, load_export

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
CHATGPT = FIXTURES / "chatgpt" / "conversations.json"
CLAUDE = FIXTURES / "claude-ai" / "conversations.json"
KIWI = "6868a1b2-0c3d-8004-9e5f-1a2b3c4d5e6f"
ONCALL = "2f0e9d8c-7b6a-4c5d-9e8f-1a2b3c4d5e6f"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_chatgpt_export_becomes_one_transcript_per_conversation_on_the_branch_last_shown(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    report = import_export(CHATGPT, root)
    assert (report.service, report.conversations, report.empty, report.malformed) == ("chatgpt", 3, 1, 2)
    assert len(report.written) == 2 and report.messages == 6
    kiwi = _lines(root / "chatgpt" / "transcripts" / f"{KIWI}.jsonl")
    assert kiwi[0]["type"] == "conversation" and kiwi[0]["title"] == "Kiwi offsite venue"
    assert [(m["role"], m["content"][:20]) for m in kiwi[1:]] == [
        ("user", "Which venue did we b"), ("assistant", "You booked the Quint"),
        ("user", "Here is the floor pl"), ("assistant", "Got it. The deposit "),
    ]  # fmt: skip
    assert kiwi[2]["timestamp"] == "2025-07-06T09:00:09Z"
    text = json.dumps(kiwi)
    for decoy in ("marmoset", "gecko", "lynx", "4111 1111"):
        assert decoy not in text, decoy
    assert "[REDACTED:" in kiwi[3]["content"]
    assert report.unknown == {"content:hologram_frame": 1}
    assert report.skipped == {"role:system": 1, "hidden": 1, "to-tool": 1, "role:tool": 1}


def test_claude_export_reads_text_blocks_and_counts_what_it_does_not_know(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    report = import_export(CLAUDE, root)
    assert (report.service, report.conversations, report.empty, report.malformed) == ("claude-ai", 2, 1, 1)
    oncall = _lines(root / "claude-ai" / "transcripts" / f"{ONCALL}.jsonl")
    assert [m["role"] for m in oncall[1:]] == ["user", "assistant", "user"]
    assert oncall[2]["content"] == "The on-call rotation hands over every Tuesday at 09:00 CET, in the #ops-handover channel."
    assert oncall[3]["content"] == "Thanks!"  # an older message with only "text"
    assert "ghp_" not in json.dumps(oncall) and "okapi" not in json.dumps(oncall)
    assert report.unknown == {"content:holo_widget": 1, "sender:narrator": 1}
    assert report.redacted == 1


def test_importing_again_is_idempotent_and_a_newer_export_updates_only_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    import_export(CHATGPT, root)
    target = root / "chatgpt" / "transcripts" / f"{KIWI}.jsonl"
    before = target.stat().st_mtime_ns
    again = import_export(CHATGPT, root)
    assert (len(again.written), len(again.updated), again.unchanged) == (0, 0, 2)
    assert target.stat().st_mtime_ns == before
    data = json.loads(CHATGPT.read_text())
    data = [c for c in data if isinstance(c, dict) and c.get("id") != "6869f0e1-aaaa-8004-bbbb-cccccccccccc"]  # dropped upstream
    kiwi = data[0]
    kiwi["mapping"]["a-4"]["children"] = ["u-5"]
    kiwi["mapping"]["u-5"] = {"id": "u-5", "parent": "a-4", "children": [], "message": {
        "id": "u-5", "author": {"role": "user"}, "create_time": 1751800000.0, "recipient": "all", "metadata": {},
        "content": {"content_type": "text", "parts": ["Please also book the minibus."]}}}  # fmt: skip
    kiwi["current_node"] = "u-5"
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(data))
    update = import_export(newer, root)
    assert (len(update.written), len(update.updated), update.unchanged) == (0, 1, 0)
    assert _lines(target)[-1]["content"] == "Please also book the minibus."
    assert (root / "chatgpt" / "transcripts" / "6869f0e1-aaaa-8004-bbbb-cccccccccccc.jsonl").exists()  # never deleted
    dry = import_export(CHATGPT, root, dry_run=True)
    assert len(dry.updated) == 1 and _lines(target)[-1]["content"] == "Please also book the minibus."


def test_the_zip_and_the_folder_are_read_like_the_file(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(CLAUDE, "conversations.json")
        zf.writestr("users.json", "[]")
    assert load_export(archive) == json.loads(CLAUDE.read_text())
    folder = tmp_path / "unzipped"
    folder.mkdir()
    shutil.copy(CHATGPT, folder / "conversations.json")
    assert import_export(folder, tmp_path / "s").service == "chatgpt"


@pytest.mark.parametrize(("content", "message"), [
    (b"{not json", "not valid JSON"),
    (b'{"conversations": []}', "expected a list of conversations"),
    (b'[{"title": "x"}]', "no conversation in it has a 'mapping'"),
])  # fmt: skip
def test_what_is_not_an_export_is_refused_with_a_reason(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "conversations.json"
    bad.write_bytes(content)
    with pytest.raises(ExportError, match=message):
        import_export(bad, tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_imported_facts_are_found_and_cited_at_their_message_line(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]
) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    root = ws / ".openclaw" / "sessions"
    import_export(CHATGPT, root)
    import_export(CLAUDE, root)
    with open_manager(ws, cfg(sources=["memory", "sessions"], dreaming={"enabled": False})) as m:
        m.sync()
        kiwi = [h for h in m.search("kiwi offsite lodge", min_score=0, session_key="chatgpt").results if h.source == "sessions"]
        assert kiwi and kiwi[0].path == f".openclaw/sessions/chatgpt/transcripts/{KIWI}.jsonl"
        assert kiwi[0].start_line <= 3 <= kiwi[0].end_line
        oncall = [h for h in m.search("on-call rotation handover Tuesday", min_score=0, session_key="claude-ai").results
                  if h.source == "sessions"]  # fmt: skip
        assert oncall and oncall[0].citation.startswith(f".openclaw/sessions/claude-ai/transcripts/{ONCALL}.jsonl#L")
        assert oncall[0].start_line <= 3 <= oncall[0].end_line
        for decoy in ("marmoset", "gecko", "lynx", "okapi"):
            assert not [h for h in m.search(decoy, min_score=0, session_key="chatgpt").results if h.source == "sessions"]
