"""Claude Code and Codex CLI session logs indexed in place, through the real sync and search.

The fixtures under ``tests/fixtures/hosts`` are invented conversations written in each host's log
format (docs/hosts/claude-code.md, docs/hosts/codex.md): the planted facts must be found and cited
at the host's own file and line; tool output, thinking, injected context, wrappers, compaction
summaries and side conversations (each holding a decoy word) must not be indexed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.errors import ConfigError
from mdrecall.sources.hostlogs import claude_project_folder, list_host_logs
from mdrecall.sources.transcripts import render_transcript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
KESTREL = "-home-ana-src-kestrel/5c1e0c9a-7b1d-4a51-9e0e-2f3c4d5e6f70.jsonl"
ROLLOUT = "2025/09/10/rollout-2025-09-10T08-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
OLD_ROLLOUT = "2025/05/02/rollout-2025-05-02T14-10-00-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9.jsonl"
DECOYS = ["quokka", "wombat", "pangolin", "narwhal", "capybara", "axolotl", "tapir", "environment_context"]


@pytest.fixture
def host_dirs(tmp_path: Path) -> tuple[Path, Path]:
    claude = tmp_path / "user" / ".claude" / "projects"
    codex = tmp_path / "user" / ".codex" / "sessions"
    shutil.copytree(FIXTURES / "claude-code" / "projects", claude)
    shutil.copytree(FIXTURES / "codex" / "sessions", codex)
    return claude, codex


def _config(cfg: Callable[..., dict[str, Any]], claude: Path, codex: Path, **extra: Any) -> dict[str, Any]:
    return cfg(sources=["memory", "sessions"], dreaming={"enabled": False},
               sessions={"claudeCode": {"enabled": True, "dir": str(claude), **extra},
                         "codex": {"enabled": True, "dir": str(codex)}})  # fmt: skip


def _hits(manager: Any, query: str, key: str | None) -> list[Any]:
    return list(manager.search(query, min_score=0, session_key=key).results)


def test_planted_facts_are_found_and_cited_at_the_hosts_own_lines(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path]
) -> None:
    claude, codex = host_dirs
    ws = make_ws({"MEMORY.md": "# Memory\n- The workspace itself says nothing about clusters.\n"})
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        report = m.sync()
        assert report.files_indexed == 5  # MEMORY.md, two Claude Code sessions, two Codex rollouts

        osprey = [h for h in _hits(m, "osprey cluster staging", "claude-code") if h.source == "sessions"]
        path = (claude / KESTREL).as_posix()
        assert osprey and osprey[0].path == path
        # JSONL line 5 holds the assistant's answer; the citation names that line of the real file.
        assert osprey[0].start_line <= 5 <= osprey[0].end_line
        assert osprey[0].citation.startswith(path + "#L")
        assert json.loads((claude / KESTREL).read_text().split("\n")[4])["message"]["content"][1]["text"].startswith("Since the March")

        port = [h for h in _hits(m, "billing worker port", "codex") if h.source == "sessions"]
        assert port and port[0].path == (codex / ROLLOUT).as_posix()
        assert port[0].start_line <= 9 <= port[0].end_line
        pelican = [h for h in _hits(m, "pelican latency dashboard", "codex") if h.source == "sessions"]
        assert pelican and pelican[0].path == (codex / OLD_ROLLOUT).as_posix()
        assert pelican[0].start_line <= 6 <= pelican[0].end_line

        for decoy in DECOYS:
            assert not _hits(m, decoy, "claude-code") and not _hits(m, decoy, "codex"), decoy
        every = " ".join(h.snippet for h in _hits(m, "staging API deploy key dashboard", "claude-code"))
        assert "sk-ant-api03" not in every and "[REDACTED:" in every


def test_each_host_key_sees_its_own_logs_and_no_key_sees_none(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path]
) -> None:
    claude, codex = host_dirs
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        m.sync()
        assert not [h for h in _hits(m, "billing worker port", "claude-code") if h.source == "sessions"]
        assert not [h for h in _hits(m, "osprey cluster", "codex") if h.source == "sessions"]
        assert not [h for h in _hits(m, "osprey cluster", None) if h.source == "sessions"]  # visibility: own
        assert not [h for h in _hits(m, "osprey cluster", "main") if h.source == "sessions"]
    with open_manager(ws, {**_config(cfg, claude, codex), "sessions": {**_config(cfg, claude, codex)["sessions"], "visibility": "all"}}) as m:
        assert [h for h in _hits(m, "osprey cluster", None) if h.source == "sessions"]


def test_a_new_process_checks_the_hosts_logs_where_they_are(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The index keeps a host's log under its absolute path. The snapshot a new process reads from
    the index names that file itself (not the workspace joined to it, a file that does not exist), so
    with nothing changed its first search neither syncs nor lists the files."""
    import os
    import time

    from indexcheck import counting_walks

    claude, codex = host_dirs
    ws = make_ws({"MEMORY.md": "# Memory\n- The kestrel cluster runs in Frankfurt.\n"})
    past = time.time() - 60
    for root in (ws, claude.parent.parent):
        for path in [root, *root.rglob("*")]:
            os.utime(path, (past, past))  # nothing racy: the sync stores its snapshot
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        m.sync()
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        snapshot = m.stored_snapshot()
        assert snapshot is not None and str(claude / KESTREL) in {entry[0] for entry in snapshot.files}
        walks = counting_walks(monkeypatch)
        assert [r.path for r in m.search("kestrel cluster", min_score=0).results] == ["MEMORY.md"]
        assert m.last_report is None and walks == []


def test_projects_limit_which_claude_code_folders_are_read(cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path]) -> None:
    from mdrecall.config import parse_config

    claude, codex = host_dirs
    everything = parse_config(_config(cfg, claude, codex))
    names = sorted(p.name for kind, p in list_host_logs(everything) if kind == "claude-code")
    assert names == ["5c1e0c9a-7b1d-4a51-9e0e-2f3c4d5e6f70.jsonl", "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d.jsonl"]  # no agent-*.jsonl
    by_path = parse_config(_config(cfg, claude, codex, projects=["/home/ana/src/kestrel"]))
    assert [p.parent.name for kind, p in list_host_logs(by_path) if kind == "claude-code"] == ["-home-ana-src-kestrel"]
    by_name = parse_config(_config(cfg, claude, codex, projects=["-home-ana-src-other"]))
    assert [p.parent.name for kind, p in list_host_logs(by_name) if kind == "claude-code"] == ["-home-ana-src-other"]
    assert claude_project_folder("/home/ana/my.project_x") == "-home-ana-my-project-x"


def test_unknown_records_and_malformed_lines_are_counted_in_status(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path]
) -> None:
    claude, codex = host_dirs
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        m.sync()
        logs = m.status().details["hostLogs"]
    assert logs["claudeCode"] == {"dir": str(claude), "files": 2, "unknownRecords": {"claude-code:hologram-sync": 1}, "malformedLines": 1}
    assert logs["codex"]["files"] == 2
    assert logs["codex"]["unknownRecords"] == {"codex:response_item/holo_call": 1, "codex:telepathy_frame": 1}
    # A new process (the CLI's next `status`) reads the same counts back.
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        assert m.status().details["hostLogs"]["claudeCode"]["unknownRecords"] == {"claude-code:hologram-sync": 1}


def test_a_growing_log_and_hostile_lines_never_crash(
    make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]], host_dirs: tuple[Path, Path]
) -> None:
    claude, codex = host_dirs
    log = claude / KESTREL
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    with open_manager(ws, _config(cfg, claude, codex)) as m:
        m.sync()
        garbage = [b"\xff\xfe\x00 not json\n", b"[]\n", b'{"type": 7}\n', b'{"type": "user", "uuid": "x", "message": "not a dict"}\n',
                   b'{"type": "assistant", "sessionId": "s", "message": {"role": "assistant", "content": [{"type": "text", "text": null}]}}\n',
                   (json.dumps({"type": "user", "sessionId": "s", "uuid": "z", "timestamp": "2025-07-01T11:00:00Z",
                                "message": {"role": "user", "content": "The heron cluster was retired in April."}}) + "\n").encode()]  # fmt: skip
        with log.open("ab") as handle:
            handle.write(b"".join(garbage))
        m.sync()
        retired = [h for h in _hits(m, "heron cluster retired April", "claude-code") if h.path == log.as_posix()]
        total = len(log.read_bytes().split(b"\n")) - 1
        assert retired and retired[0].end_line == total
    rendered = render_transcript(log.read_bytes())
    assert rendered.skipped_lines >= 3


def test_enabling_a_host_without_the_sessions_source_is_a_config_error(make_ws: Callable[..., Path], cfg: Callable[..., dict[str, Any]]) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    with pytest.raises(ConfigError, match=r"sessions.claudeCode.enabled needs 'sessions' in sources"):
        open_manager(ws, cfg(sessions={"claudeCode": {"enabled": True}}))
    with pytest.raises(ConfigError, match=r"sessions.codex.dir.*absolute"):
        open_manager(ws, cfg(sources=["memory", "sessions"], sessions={"codex": {"enabled": True, "dir": "relative/dir"}}))


def test_default_locations_follow_the_hosts_environment_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mdrecall.sources.hostlogs import default_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    assert default_dir("claude-code") == tmp_path / ".claude" / "projects"
    assert default_dir("codex") == tmp_path / ".codex" / "sessions"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    assert default_dir("claude-code") == tmp_path / "cc" / "projects"
    assert default_dir("codex") == tmp_path / "cx" / "sessions"


def test_forget_scrubs_a_fact_from_a_host_log_like_any_transcript(
    make_ws: Callable[..., Path], host_dirs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdrecall.cli import main

    claude, codex = host_dirs
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    (ws / ".mdrecall.yaml").write_text(
        f"provider: none\nstore: {{path: {tmp_path / 'forget.sqlite'}}}\nsources: [memory, sessions]\n"
        f"sessions:\n  claudeCode: {{enabled: true, dir: {claude}}}\n", encoding="utf-8")  # fmt: skip
    log = claude / KESTREL
    size = log.stat().st_size
    assert main(["index", "-w", str(ws)]) == 0
    assert main(["forget", "-w", str(ws), "osprey cluster in eu-west-3", "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"transcript    {log.as_posix()}: records redacted in place: 1" in out and "verified: no copy left" in out
    assert "osprey cluster" not in log.read_text() and log.stat().st_size == size  # same length: later lines keep their offsets
    with open_manager(ws) as m:
        assert not [h for h in m.search("osprey cluster", min_score=0, session_key="claude-code").results if h.source == "sessions"
                    and "osprey cluster" in h.snippet]  # fmt: skip
