"""``mdrecall mcp --print-config``: the same entry ``connect`` writes, environment included."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., tuple[int, str, str]]


def test_snippets_keep_mdrecall_home(tmp_path: Path, mdrecall: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MDRECALL_HOME", str(home))
    code, out, _ = mdrecall("mcp", "--print-config", "claude-desktop", "-w", tmp_path, "--read-only")
    entry = json.loads(out)["mcpServers"]["mdrecall"]
    assert code == 0 and entry["command"] == sys.executable
    assert entry["args"] == ["-m", "mdrecall", "mcp", "-w", str(tmp_path.resolve()), "--read-only"]
    assert entry["env"] == {"MDRECALL_HOME": str(home.resolve())}
    code, out, _ = mdrecall("mcp", "--print-config", "vscode", "-w", tmp_path)
    assert json.loads(out)["servers"]["mdrecall"]["type"] == "stdio"
    code, out, _ = mdrecall("mcp", "--print-config", "claude-code", "-w", tmp_path)
    words = shlex.split(out)
    assert words[:3] == ["claude", "mcp", "add"] and f"--env=MDRECALL_HOME={home.resolve()}" in words
    assert words[words.index("--") + 1 :] == [sys.executable, "-m", "mdrecall", "mcp", "-w", str(tmp_path.resolve()),
                                              "--session-key", "claude-code"]  # fmt: skip
