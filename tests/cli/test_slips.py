"""Ordinary slips, made with the real command: each is one or two lines and an exit code docs/cli.md
names (2 bad usage or config, 1 failed), never a traceback, and nothing is lost or left behind."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import subprocess_env

# (arguments, exit code, a part of the message); WS is the workspace, TMP a scratch folder, BUSY a port in use.
SLIPS: list[tuple[list[str], int, str]] = [
    # -c values that are not valid YAML, or not keys
    (["search", "-w", "WS", "-c", "query={", "x"], 2, "-c query: '{' is not a valid YAML value"),
    (["search", "-w", "WS", "-c", "extraPaths=[notes", "x"], 2, "-c extraPaths: '[notes' is not a valid YAML value"),
    (["search", "-w", "WS", "-c", "remote.headers=a: b: c", "x"], 2, "mapping values are not allowed here"),
    (["index", "-w", "WS", "-c", "provider=[local"], 2, "is not a valid YAML value"),
    (["status", "-w", "WS", "-c", "sync={watch: true", "--json"], 2, "is not a valid YAML value"),
    (["search", "-w", "WS", "-c", "foo", "x"], 2, "must look like KEY=VALUE"),
    (["search", "-w", "WS", "-c", "=5", "x"], 2, "is not a key"),
    (["search", "-w", "WS", "-c", "query..maxResults=5", "x"], 2, "is not a key"),
    (["search", "-w", "WS", "-c", "query.maxResults=abc", "x"], 2, "'query.maxResults': Input should be a valid integer"),
    (["search", "-w", "WS", "-c", "querry.maxResults=3", "x"], 2, "unknown key 'querry'"),
    (["search", "-w", "WS", "-c", "query.minScore=5", "x"], 2, "'query.minScore'"),
    (["search", "-w", "WS", "-c", "provider=lcoal", "x"], 2, "did you mean 'local'?"),
    (["search", "-w", "WS", "-c", "fallback=olama", "x"], 2, "did you mean 'ollama'?"),
    (["index", "-w", "WS", "-c", "sources=memory,sessions"], 2, "write a list in brackets: -c 'sources=[memory, sessions]'"),
    # files and folders that are not there, or not what was meant
    (["import", "-w", "WS", "TMP/missing.jsonl"], 2, "does not exist"),
    (["import", "-w", "WS", "TMP"], 2, "is a directory"),
    (["import", "-w", "WS", "TMP/notes.txt"], 1, "line 1: not JSON"),
    (["import", "-w", "WS", "TMP/binary.jsonl"], 1, "not UTF-8 text"),
    (["export", "-w", "WS", "-o", "TMP/no/such/folder/out.jsonl"], 2, "does not exist (create it first)"),
    (["export", "-w", "WS", "-o", "TMP"], 2, "is a directory"),
    (["config", "validate", "TMP/missing.yaml"], 2, "No such file or directory"),
    (["config", "validate", "TMP/broken.yaml"], 2, "not valid YAML"),
    (["search", "-w", "TMP/no-workspace", "x"], 2, "create it with `mdrecall init"),
    (["search", "-w", "TMP/notes.txt", "x"], 2, "is not a directory"),
    (["init", "TMP/notes.txt"], 2, "exists and is not a directory"),
    (["status", "-w", "WS", "-c", "store.path=/proc/no-such-dir/index.sqlite"], 1, "cannot create"),
    (["search", "-w", "WS", "-c", "store.path=TMP/notes.txt", "x"], 1, "is not an mdrecall index"),  # left alone
    (["status", "-w", "WS", "-c", "store.path=TMP/broken-ws"], 1, "is a folder"),
    (["search", "-w", "TMP/broken-ws", "x"], 2, "config error"),
    # lines that are not there, paths that are not memory
    (["get", "-w", "WS", "MEMORY.md#L500-L510"], 2, "MEMORY.md has 4 line(s); line 500 is past its end"),
    (["get", "-w", "WS", "MEMORY.md", "--from", "99"], 2, "past its end"),
    (["get", "-w", "WS", "MEMORY.md#L3", "--from", "2"], 2, "already names its lines"),
    (["get", "-w", "WS", "MEMORY.md", "--lines", "-5"], 2, "--lines must be from 1 to 2000"),
    (["get", "-w", "WS", "memory/nope.md"], 1, "[not_found]"),
    (["get", "-w", "WS", "../outside.md"], 1, "[outside_workspace]"),
    (["forget", "-w", "WS", "MEMORY.md#L900"], 2, "goes past its end"),
    # arguments out of range
    (["search", "-w", "WS", ""], 2, "query is required"),
    (["search", "-w", "WS", "-n", "0", "x"], 2, "-n must be from 1 to 50"),
    (["search", "-w", "WS", "--min-score", "2", "x"], 2, "--min-score must be from 0.0 to 1.0"),
    (["search", "-w", "WS", "--now", "yesterday-ish", "x"], 2, "is not an ISO date or time"),
    (["history", "-w", "WS", "x", "--as-of", "soon"], 2, "is not an ISO date or time"),
    (["remember", "-w", "WS", "  "], 2, "text is required"),
    (["remember", "-w", "WS", "--target", "../x.md", "hello"], 1, "[invalid_path]"),
    (["remember", "-w", "WS", "--target", "notes.txt", "hello"], 1, "[not_memory_path]"),
    (["ui", "-w", "WS", "--port", "99999"], 2, "99999 is not in the range 1<=x<=65535"),
    (["ui", "-w", "WS", "--port", "BUSY"], 1, "is already in use"),
    (["mcp", "-w", "WS", "--http", "--port", "BUSY"], 1, "is already in use"),
    (["mcp", "-w", "WS", "--print-config", "emacs"], 2, "'emacs' is not one of"),
    (["completion", "tcsh"], 2, "'tcsh' is not one of"),
    (["serach", "x"], 2, "Did you mean 'search'?"),
    (["search", "-w", "WS", "--corpus", "sessions", "x"], 1, "session transcripts are not indexed"),
]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.slow
def test_each_slip_is_a_short_message_and_a_documented_exit_code(tmp_path: Path, busy_port: int) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    memory = "# Memory\n\n- We deploy with a green canary.\n- Redis is the cache.\n"
    (ws / "MEMORY.md").write_text(memory, encoding="utf-8")
    (ws / ".mdrecall.yaml").write_text("provider: none\n", encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "notes.txt").write_text("just some notes\n", encoding="utf-8")
    (scratch / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\x80\n")
    (scratch / "broken.yaml").write_text("query: {maxResults: 3\n", encoding="utf-8")
    (scratch / "broken-ws").mkdir()
    (scratch / "broken-ws" / ".mdrecall.yaml").write_text("query: [\n", encoding="utf-8")
    home = tmp_path / "home"
    env = subprocess_env(home)

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        real = [a.replace("WS", str(ws)).replace("TMP", str(scratch)).replace("BUSY", str(busy_port)) for a in args]
        return subprocess.run([sys.executable, "-m", "mdrecall", *real], capture_output=True, text=True, env=env,
                              timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(run, [args for args, _, _ in SLIPS]))
    problems = []
    for (args, code, part), proc in zip(SLIPS, done, strict=True):
        said = proc.stderr.strip()
        if proc.returncode != code or part not in said or len(said.splitlines()) > 2 or "Traceback" in proc.stderr + proc.stdout:
            problems.append(f"{' '.join(args)!r}: exit {proc.returncode} (want {code}), said: {said[-600:]!r}")
    assert not problems, "\n".join(problems)
    # Nothing lost or left behind: the notes as they were, no export half-written, no index of a typo.
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == memory
    assert sorted(p.name for p in scratch.iterdir()) == ["binary.jsonl", "broken-ws", "broken.yaml", "notes.txt"]
    assert (scratch / "notes.txt").read_text(encoding="utf-8") == "just some notes\n"
    assert [p.name for p in (scratch / "broken-ws").iterdir()] == [".mdrecall.yaml"]
    assert not list(home.glob("index/*override*"))
