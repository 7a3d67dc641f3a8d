"""``mdrecall index | search | get | status``, run as a real subprocess (``python -m mdrecall``) with an
isolated home, and in process (same entry point, ``main(argv)``) where start-up time would dominate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTES = {
    "MEMORY.md": "# Memory\n\n- Decision: we picked Postgres as the database for recipes.\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- The importer crashed on malformed CSV rows.\n",
    "memory/团队笔记.md": "# 团队笔记\n\n- 王磊喜欢绿茶，不喝咖啡。\n",
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "ws"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "memory" / "long.md").write_text("\n".join(f"row {i}" for i in range(1, 201)) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-home")


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(MDRECALL_HOME=str(home), PYTHONIOENCODING="utf-8")
    env.pop("MDRECALL_WORKSPACE", None)
    return subprocess.run([sys.executable, "-m", "mdrecall", *args], capture_output=True, text=True, env=env, timeout=120)


def test_index_search_get_status(ws: Path, home: Path) -> None:
    common = ["-w", str(ws), "-c", "provider=none"]
    index = run(home, "index", *common, "--json")
    assert index.returncode == 0, index.stderr
    data = json.loads(index.stdout)
    assert data["report"]["files_indexed"] == 4 and data["status"]["searchMode"] == "keyword-only"
    assert Path(data["status"]["dbPath"]).is_relative_to(home)


    hit = run(home, "search", "what database did we pick?", *common, "--json")
    assert hit.returncode == 0, hit.stderr
    results = json.loads(hit.stdout)["results"]
    assert results[0]["path"] == "MEMORY.md" and results[0]["citation"].startswith("MEMORY.md#L")
    assert {"path", "startLine", "endLine", "score", "snippet", "source", "citation"} <= set(results[0])

    human = run(home, "search", "咖啡", *common, "-n", "1")
    assert human.returncode == 0 and "memory/团队笔记.md#L" in human.stdout and "王磊" in human.stdout

    miss = run(home, "search", "xylophone", *common)
    assert miss.returncode == 1 and "no matching memories" in miss.stderr

    got = run(home, "get", "memory/long.md", *common, "--from", "5", "--lines", "3")
    assert got.returncode == 0 and got.stdout.strip().split("\n") == ["row 5", "row 6", "row 7"]
    assert "--from 8" in got.stderr
    got_json = run(home, "get", "memory/long.md", *common, "--json")
    assert json.loads(got_json.stdout)["nextFrom"] == 121

    status = run(home, "status", *common, "--json", "--deep")
    assert status.returncode == 0
    st = json.loads(status.stdout)
    assert st["files"] == 4 and st["searchMode"] == "keyword-only" and st["skipped"] == []
    assert st["probes"]["embedding"]["ok"] is False and st["probes"]["vector"] is False


def test_error_exit_codes(ws: Path, home: Path) -> None:
    common = ["-w", str(ws), "-c", "provider=none"]
    not_found = run(home, "get", "memory/nope.md", *common)
    assert not_found.returncode == 1 and "[not_found]" in not_found.stderr
    bad_key = run(home, "search", "x", "-w", str(ws), "-c", "query.maxResult=3")
    assert bad_key.returncode == 2 and "query.maxResult" in bad_key.stderr
    for line in (not_found.stderr + bad_key.stderr).splitlines():
        assert "Traceback" not in line


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["get", "../../etc/passwd"], 1, "[outside_workspace]"),
        (["get", ".mdrecall.yaml"], 1, "[not_memory_path]"),
        (["search", "x", "-c", "query.minScore=7"], 2, "query.minScore"),
        (["status", "-c", "provider"], 2, "KEY=VALUE"),
        (["index", "-w", "{ws}/missing"], 2, "not a directory"),
        (["search", "x", "-n", "-1"], 2, "-n must be from 1 to 50"),
        (["search", "x", "-n", "0"], 2, "-n must be from 1 to 50"),
        (["search", "x", "--min-score", "2"], 2, "--min-score must be from 0.0 to 1.0"),
        (["search", "   "], 2, "query is required"),
        (["search", "x", "--now", "yesterday"], 2, "not an ISO date"),
        (["get", "MEMORY.md", "--lines", "-5"], 2, "--lines must be from 1 to 2000"),
        (["get", "MEMORY.md", "--from", "0"], 2, "--from must be from 1"),
        (["get", "MEMORY.md#L2-L3", "--lines", "1"], 2, "already names its lines"),
        (["search", "x", "--corpus", "sessions"], 1, "not indexed in this workspace"),
    ],
)
def test_more_exit_codes_in_process(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str) -> None:
    # Same entry point as the subprocess tests, without paying interpreter start-up for each case.
    from mdrecall.cli import main

    monkeypatch.setenv("MDRECALL_HOME", str(home))
    argv = [a.replace("{ws}", str(ws)) for a in args]
    if "-w" not in argv:
        argv += ["-w", str(ws)]
    if not any(a.startswith("provider") for a in argv):
        argv += ["-c", "provider=none"]
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from mdrecall.cli import main

    assert main([]) == 2
    assert main(["search"]) == 2  # missing QUERY
    assert "Missing argument 'QUERY'" in capsys.readouterr().err


def cli(home: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    from mdrecall.cli import main

    monkeypatch.setenv("MDRECALL_HOME", str(home))
    return main(list(argv))


def test_get_accepts_the_citations_search_prints(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["-w", str(ws), "-c", "provider=none"]
    assert cli(home, monkeypatch, "search", "which database did we pick?", *common, "--json") == 0
    citation = json.loads(capsys.readouterr().out)["results"][0]["citation"]
    assert citation.startswith("MEMORY.md#L")
    assert cli(home, monkeypatch, "get", citation, *common) == 0
    printed = capsys.readouterr().out
    assert "Postgres" in printed
    assert cli(home, monkeypatch, "get", "memory/long.md#L5-L7", *common) == 0
    assert capsys.readouterr().out.split() == ["row", "5", "row", "6", "row", "7"]
    assert cli(home, monkeypatch, "get", "memory/long.md#L9", *common, "--json") == 0
    assert json.loads(capsys.readouterr().out)["text"] == "row 9"


def test_get_of_a_binary_file_is_a_clear_error(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "memory" / "blob.md").write_bytes(b"PK\x03\x04\x00\x00\xff\xfe binary")
    try:
        assert cli(home, monkeypatch, "get", "memory/blob.md", "-w", str(ws), "-c", "provider=none") == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "not UTF-8 text" in captured.err
    finally:
        (ws / "memory" / "blob.md").unlink()


def test_get_of_a_cut_long_line_offers_no_continuation(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A line longer than read.maxChars is cut; a '--from 3' hint would skip the rest of it."""
    (ws / "memory" / "wide.md").write_text("# Wide\n" + "word " * 3000 + "\nafter\n", encoding="utf-8")
    try:
        assert cli(home, monkeypatch, "get", "memory/wide.md#L2", "-w", str(ws), "-c", "provider=none") == 0
        captured = capsys.readouterr()
        assert len(captured.out.rstrip("\n")) == 12_000
        assert "--from" not in captured.err and "line 2 is longer than read.maxChars" in captured.err
        assert cli(home, monkeypatch, "get", "memory/wide.md", "--from", "2", "-w", str(ws), "-c", "provider=none", "--json") == 0
        got = json.loads(capsys.readouterr().out)
        assert got["lineCut"] is True and got["truncated"] is True and "nextFrom" not in got
    finally:
        (ws / "memory" / "wide.md").unlink()


def test_search_marks_matching_lines_and_formats(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["-w", str(ws), "-c", "provider=none"]
    assert cli(home, monkeypatch, "search", "database", *common) == 0
    text = capsys.readouterr().out
    marked = [line for line in text.splitlines() if ">" in line[:8]]
    assert marked and all("database" in line for line in marked)
    assert any(line.strip().startswith("1") and "# Memory" in line for line in text.splitlines())  # unmarked context

    assert cli(home, monkeypatch, "search", "database", *common, "--format", "files") == 0
    assert capsys.readouterr().out.splitlines() == ["MEMORY.md"]

    assert cli(home, monkeypatch, "search", "database", *common, "--format", "md") == 0
    md = capsys.readouterr().out
    assert "- **MEMORY.md#L" in md and "**- Decision: we picked Postgres as the database for recipes.**" in md

    assert cli(home, monkeypatch, "search", "database", *common, "--json", "--explain") == 0
    hit = json.loads(capsys.readouterr().out)["results"][0]
    assert hit["explain"]["matchedTerms"] == ["database"]
    assert 0 < hit["explain"]["keyword"]["score"] <= 1 and "meaning" not in hit["explain"]
    assert hit["explain"]["stale"] is False and hit["explain"]["mode"] == "keyword-only"

    assert cli(home, monkeypatch, "search", "database", *common, "--explain") == 0
    assert "why: score " in capsys.readouterr().out


def test_search_corpus_and_now(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["-w", str(ws), "-c", "provider=none", "-c", "query.temporalDecay.enabled=true"]
    # As of a date long after the daily note, decay lowers its score; --now moves "today".
    assert cli(home, monkeypatch, "search", "importer malformed CSV", *common, "--json", "--now", "2026-01-06") == 0
    fresh = json.loads(capsys.readouterr().out)["results"][0]
    assert cli(home, monkeypatch, "search", "importer malformed CSV", *common, "--json", "--now", "2026-12-01T12:00:00Z",
               "--min-score", "0") == 0  # fmt: skip
    later = json.loads(capsys.readouterr().out)["results"][0]
    assert fresh["path"] == later["path"] == "memory/2026-01-05.md" and later["score"] < fresh["score"]
    assert cli(home, monkeypatch, "search", "importer", *common, "--corpus", "memory", "--format", "files") == 0
    assert capsys.readouterr().out.split() == ["memory/2026-01-05.md"]


def test_no_match_says_why(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli(home, monkeypatch, "search", "anything", "-w", str(empty), "-c", "provider=none") == 1
    assert "holds no memory files" in capsys.readouterr().err

    sessions = tmp_path / "sessions-only"
    transcript = '{"type":"message","message":{"role":"user","content":"the quarterly kumquat audit is on Friday"}}\n'
    (sessions / ".openclaw/sessions/agent:main:main/transcripts").mkdir(parents=True)
    (sessions / ".openclaw/sessions/agent:main:main/transcripts/t1.jsonl").write_text(transcript, encoding="utf-8")
    (sessions / "MEMORY.md").write_text("# Memory\n\n- Nothing about fruit.\n", encoding="utf-8")
    common = ["-w", str(sessions), "-c", "provider=none", "-c", "sources=[memory,sessions]"]
    assert cli(home, monkeypatch, "search", "kumquat audit", *common) == 1
    assert "hidden by scope" in capsys.readouterr().err
    assert cli(home, monkeypatch, "search", "kumquat audit", *common, "--session-key", "agent:main:main", "--format", "files") == 0
    assert capsys.readouterr().out.strip().endswith("t1.jsonl")

    assert cli(home, monkeypatch, "search", "zebra crossing", "-w", str(sessions), "-c", "provider=none") == 1
    assert "nothing relevant: no hit scored 0.35" in capsys.readouterr().err
