"""``mdrecall connect`` / ``disconnect`` against copies of realistic config files of every host.

Each host's file is tried missing, empty, with other servers (the fixtures under
``tests/fixtures/hosts/configs``, written like the files those hosts keep), with comments where the
format allows them, and unparsable. Every result must parse as the host reads it and equal the
original document with only mdrecall's entry added; disconnecting must give the original back."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall.cli import main
from mdrecall.hosts import jsonc
from mdrecall.hosts.connect import ConnectError, Options, plan
from mdrecall.hosts.targets import HOSTS, config_path, is_our_server

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "configs"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user home of its own: every host's default location is under it."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "APPDATA", "MDRECALL_WORKSPACE", "MDRECALL_THREADS"):
        monkeypatch.delenv(name, raising=False)
    return user


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "agent"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    return root


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def call(*argv: Any) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


def _parse(host: str, text: str) -> Any:
    """The file as the host reads it."""
    if HOSTS[host].format == "toml":
        return tomllib.loads(text)
    if HOSTS[host].format == "jsonc":
        return jsonc.loads(text, comments=True)
    return json.loads(text) if text.strip() else {}


def _comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith(("//", "/*", "#"))] + \
        [line.split("//", 1)[1].strip() for line in text.splitlines() if "//" in line and not line.strip().startswith("//")
         and "://" not in line]  # fmt: skip


# host, fixture (None: no file yet), where its servers live
CASES = [
    ("claude-code", "claude.json", ("mcpServers",)),
    ("claude-desktop", "claude_desktop_config.json", ("mcpServers",)),
    ("cursor", "cursor-mcp.json", ("mcpServers",)),
    ("vscode", "vscode-mcp.jsonc", ("servers",)),
    ("codex", "codex-config.toml", ("mcp_servers",)),
]


@pytest.mark.parametrize(("host", "fixture", "servers"), CASES)
def test_connect_merges_into_a_realistic_file_and_disconnect_gives_it_back(
    host: str, fixture: str, servers: tuple[str, ...], home: Path, ws: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDRECALL_HOME", str(home / "mdrecall-home"))
    path = config_path(HOSTS[host])
    assert str(path).startswith(str(home))
    path.parent.mkdir(parents=True, exist_ok=True)
    original = (CONFIGS / fixture).read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    os.chmod(path, 0o640)
    before = _parse(host, original)

    code, out, err = run("connect", host, "-w", ws, "--no-hooks")
    assert code == 0, err
    text = path.read_text(encoding="utf-8")
    after = _parse(host, text)
    entry = jsonc.get(after, [*servers, "mdrecall"])
    assert is_our_server(entry) and entry["args"][:5] == ["-m", "mdrecall", "mcp", "-w", str(ws)]
    assert entry["args"][5:] == (["--session-key", host] if host in ("claude-code", "codex") else [])
    assert entry["env"] == {"MDRECALL_HOME": str(home / "mdrecall-home")}
    expected = copy.deepcopy(before)
    node = expected
    for key in servers:
        node = node.setdefault(key, {})
    node["mdrecall"] = entry
    assert after == expected  # nothing else changed
    for comment in _comments(original):
        assert comment in text, comment  # comments kept
    assert (path.with_name(path.name + ".mdrecall.bak")).read_text(encoding="utf-8") == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert f"updated ~/{path.relative_to(home)}" in out

    code, out, _ = run("connect", host, "-w", ws, "--no-hooks")
    assert code == 0 and "already connected; nothing to change" in out and path.read_text(encoding="utf-8") == text

    code, _, err = run("disconnect", host, "--no-hooks")
    assert code == 0, err
    assert path.read_text(encoding="utf-8") == original  # byte for byte


@pytest.mark.parametrize("host", ["claude-code", "claude-desktop", "cursor", "vscode", "codex"])
def test_connect_creates_a_missing_file_and_fills_an_empty_one(host: str, home: Path, ws: Path, run: Run) -> None:
    path = config_path(HOSTS[host])
    assert not path.exists()
    code, out, err = run("connect", host, "-w", ws, "--no-hooks")
    assert code == 0, err and "created" in out
    assert is_our_server(jsonc.get(_parse(host, path.read_text(encoding="utf-8")), [*HOSTS[host].servers_key, "mdrecall"]))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # new files: owner only
    assert not path.with_name(path.name + ".mdrecall.bak").exists()
    path.write_text("", encoding="utf-8")
    assert run("connect", host, "-w", ws, "--no-hooks")[0] == 0
    assert jsonc.get(_parse(host, path.read_text(encoding="utf-8")), [*HOSTS[host].servers_key, "mdrecall"])


@pytest.mark.parametrize(("host", "broken"), [
    ("claude-code", '{\n  "numStartups": 3,\n  "mcpServers": {\n'),
    ("claude-desktop", '{"mcpServers": {"a": {"command": "x"}},}\n'),  # trailing comma: not JSON
    ("cursor", '{\n  // a comment Cursor would not read\n  "mcpServers": {}\n}\n'),
    ("vscode", '{\n  "servers": {\n    "a": {"command": "x" /* unclosed\n'),
    ("codex", 'model = "o3"\n[mcp_servers.a\ncommand = "x"\n'),
    ("codex", 'mcp_servers = { other = { command = "x" } }\n'),  # an inline table: cannot add a table to it
    ("claude-code", '[1, 2, 3]\n'),
])  # fmt: skip
def test_a_file_that_does_not_parse_is_refused_and_left_untouched(host: str, broken: str, home: Path, ws: Path, run: Run) -> None:
    path = config_path(HOSTS[host])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(broken, encoding="utf-8")
    code, out, err = run("connect", host, "-w", ws, "--no-hooks")
    assert code == 1 and "nothing was written" in err and len(err.strip().splitlines()) == 1, err
    assert path.read_text(encoding="utf-8") == broken
    assert not path.with_name(path.name + ".mdrecall.bak").exists()
    assert run("disconnect", host, "--no-hooks")[0] in (0, 1)
    assert path.read_text(encoding="utf-8") == broken


def test_another_server_under_our_name_is_not_replaced_without_force(home: Path, ws: Path, run: Run) -> None:
    path = config_path(HOSTS["claude-desktop"])
    path.parent.mkdir(parents=True)
    theirs = '{"mcpServers": {"mdrecall": {"command": "some-other-tool", "args": ["serve"]}}}\n'
    path.write_text(theirs, encoding="utf-8")
    code, _, err = run("connect", "claude-desktop", "-w", ws)
    assert code == 1 and "is another server, not mdrecall" in err and path.read_text() == theirs
    assert run("disconnect", "claude-desktop")[0] == 0 and path.read_text() == theirs  # not ours: left alone
    assert run("connect", "claude-desktop", "-w", ws, "--name", "recall")[0] == 0
    assert set(json.loads(path.read_text())["mcpServers"]) == {"mdrecall", "recall"}
    assert run("connect", "claude-desktop", "-w", ws, "--force")[0] == 0
    assert is_our_server(json.loads(path.read_text())["mcpServers"]["mdrecall"])


def test_claude_code_hooks_merge_beside_the_users_own(home: Path, ws: Path, run: Run) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = (CONFIGS / "claude-settings.json").read_text(encoding="utf-8")
    settings.write_text(original, encoding="utf-8")
    code, out, err = run("connect", "claude-code", "-w", ws, "--hook-timeout", "4")
    assert code == 0, err
    doc = json.loads(settings.read_text())
    before = json.loads(original)
    assert doc["permissions"] == before["permissions"] and doc["env"] == before["env"] and doc["model"] == "sonnet"
    assert doc["hooks"]["PreToolUse"] == before["hooks"]["PreToolUse"]
    assert doc["hooks"]["Stop"][0] == before["hooks"]["Stop"][0]  # the user's own Stop hook stays first
    ours = {event: groups[-1]["hooks"][0] for event, groups in doc["hooks"].items() if event != "PreToolUse"}
    assert set(ours) == {"UserPromptSubmit", "SessionStart", "PreCompact", "Stop"}
    assert " hook recall --host claude-code -w " in ours["UserPromptSubmit"]["command"] and "--timeout 4" in ours["UserPromptSubmit"]["command"]
    assert " hook flush " in ours["PreCompact"]["command"] and " hook capture " in ours["Stop"]["command"]
    assert all(h["type"] == "command" and isinstance(h["timeout"], int) for h in ours.values())
    assert run("connect", "claude-code", "-w", ws)[0] == 0  # again, another timeout: replaced, not added
    again = json.loads(settings.read_text())
    assert len(again["hooks"]["Stop"]) == 2 and len(again["hooks"]["UserPromptSubmit"]) == 1
    assert run("disconnect", "claude-code")[0] == 0
    assert settings.read_text(encoding="utf-8") == original
    assert json.loads((home / ".claude.json").read_text()) == {"mcpServers": {}}
    settings.write_text('{\n  "model": "opus"\n}\n')  # no hooks of the user's: disconnect leaves no empty shell
    assert run("connect", "claude-code", "-w", ws)[0] == 0 and run("disconnect", "claude-code")[0] == 0
    assert settings.read_text() == '{\n  "model": "opus"\n}\n'


def test_claude_code_project_scope_writes_mcp_json_and_project_settings(home: Path, ws: Path, tmp_path: Path, run: Run) -> None:
    project = tmp_path / "kestrel"
    project.mkdir()
    shutil.copy(CONFIGS / "mcp-project.json", project / ".mcp.json")
    code, _, err = run("connect", "claude-code", "-w", ws, "--scope", "project", "--project", project)
    assert code == 0, err
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"sentry", "mdrecall"} and servers["sentry"] == {"type": "http", "url": "https://mcp.sentry.dev/mcp"}
    assert "UserPromptSubmit" in json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert not (home / ".claude.json").exists()
    code, _, err = run("connect", "claude-desktop", "-w", ws, "--scope", "project")
    assert code == 2 and "no project config" in err


def test_codex_gets_the_server_and_its_notify_capture_hook(home: Path, ws: Path, run: Run) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = (CONFIGS / "codex-config.toml").read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    assert run("connect", "codex", "-w", ws)[0] == 0
    doc = tomllib.loads(path.read_text())
    assert doc["notify"][-6:] == ["hook", "capture", "--host", "codex", "-w", str(ws)]
    assert doc["mcp_servers"]["context7"] == tomllib.loads(original)["mcp_servers"]["context7"]
    assert doc["mcp_servers"]["mdrecall"]["args"][-2:] == ["--session-key", "codex"]
    text = path.read_text()
    assert text.index("notify =") < text.index("[sandbox_workspace_write]")  # a top-level key, above every table
    assert run("disconnect", "codex")[0] == 0 and path.read_text() == original
    # A notify program of the user's own is kept; the server is still added, and the user is told.
    path.write_text('notify = ["python3", "/home/ana/bin/ding.py"]\n' + original)
    code, _, err = run("connect", "codex", "-w", ws)
    assert code == 0 and "notify is already set to another program" in err
    assert tomllib.loads(path.read_text())["notify"] == ["python3", "/home/ana/bin/ding.py"]


def test_generic_json_and_toml_targets(home: Path, ws: Path, tmp_path: Path, run: Run) -> None:
    target = tmp_path / "agent.toml"
    original = (CONFIGS / "generic.toml").read_text()
    target.write_text(original)
    assert run("connect", "toml", "-w", ws, "--file", target, "--key", "mcp.servers")[0] == 0
    doc = tomllib.loads(target.read_text())
    assert doc["title"] == "my agent" and set(doc["mcp"]["servers"]) == {"search", "mdrecall"}
    assert "# An MCP host that keeps servers under [mcp.servers]" in target.read_text()
    assert run("disconnect", "toml", "--file", target, "--key", "mcp.servers")[0] == 0 and target.read_text() == original
    other = tmp_path / "host.json"
    other.write_text('{\n  // JSONC is accepted for a generic file\n  "agents": {"mcp": {}}\n}\n')
    assert run("connect", "json", "-w", ws, "--file", other, "--key", "agents.mcp")[0] == 0
    assert is_our_server(jsonc.loads(other.read_text(), comments=True)["agents"]["mcp"]["mdrecall"])
    code, _, err = run("connect", "json", "-w", ws)
    assert code == 2 and "needs --file" in err


def test_dry_run_prints_a_diff_and_writes_nothing(home: Path, ws: Path, run: Run) -> None:
    path = config_path(HOSTS["cursor"])
    path.parent.mkdir(parents=True)
    original = (CONFIGS / "cursor-mcp.json").read_text()
    path.write_text(original)
    code, out, _ = run("connect", "cursor", "-w", ws, "--dry-run")
    assert code == 0 and out.startswith(f"--- {path}\n+++ {path}\n@@")
    assert '+        "mdrecall": {' in out and out.count("\n-") == 0
    assert path.read_text() == original and not path.with_name("mcp.json.mdrecall.bak").exists()
    code, out, _ = run("connect", "cursor", "-w", ws, "--json", "--dry-run")
    report = json.loads(out)
    assert report["dryRun"] and report["files"][0]["changed"] and report["files"][0]["diff"].startswith("---")


def test_workspace_mistakes_are_usage_errors(home: Path, tmp_path: Path, run: Run) -> None:
    code, _, err = run("connect", "cursor", "-w", tmp_path / "nope")
    assert code == 2 and "is not a directory" in err
    code, _, err = run("connect", "cursor", "-w", tmp_path)  # a folder, but no MEMORY.md or memory/
    assert code == 2 and "is it the memory workspace?" in err
    assert not config_path(HOSTS["cursor"]).exists()


def test_a_symlinked_config_is_written_through_to_its_target(home: Path, ws: Path, tmp_path: Path, run: Run) -> None:
    dotfiles = tmp_path / "dotfiles" / "cursor-mcp.json"
    dotfiles.parent.mkdir()
    shutil.copy(CONFIGS / "cursor-mcp.json", dotfiles)
    link = config_path(HOSTS["cursor"])
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    assert run("connect", "cursor", "-w", ws)[0] == 0
    assert link.is_symlink() and "mdrecall" in json.loads(dotfiles.read_text())["mcpServers"]


def test_a_file_changed_by_the_host_meanwhile_is_not_overwritten(home: Path, ws: Path) -> None:
    path = config_path(HOSTS["claude-desktop"])
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {}}\n')
    (change,) = plan(HOSTS["claude-desktop"], Options(workspace=ws), connect=True)
    path.write_text('{"mcpServers": {}, "rewritten": true}\n')  # the host saved it in between
    with pytest.raises(ConnectError, match="changed while mdrecall was editing it"):
        change.write()
    assert json.loads(path.read_text()) == {"mcpServers": {}, "rewritten": True}


@pytest.mark.parametrize(("platform", "env", "expected"), [
    ("darwin", {"HOME": "/Users/ana"}, "/Users/ana/Library/Application Support/Claude/claude_desktop_config.json"),
    ("win32", {"HOME": "C:/Users/ana", "APPDATA": "C:/Users/ana/AppData/Roaming"}, "C:/Users/ana/AppData/Roaming/Claude/claude_desktop_config.json"),
    ("linux", {"HOME": "/home/ana"}, "/home/ana/.config/Claude/claude_desktop_config.json"),
    ("linux", {"HOME": "/home/ana", "XDG_CONFIG_HOME": "/home/ana/.xdg"}, "/home/ana/.xdg/Claude/claude_desktop_config.json"),
])  # fmt: skip
def test_documented_locations_per_operating_system(platform: str, env: dict[str, str], expected: str) -> None:
    assert config_path(HOSTS["claude-desktop"], env=env, platform=platform).as_posix() == expected
    vscode = config_path(HOSTS["vscode"], env=env, platform=platform).as_posix()
    assert vscode.endswith("Code/User/mcp.json")
    assert config_path(HOSTS["codex"], env={**env, "CODEX_HOME": "/opt/codex"}, platform=platform).as_posix() == "/opt/codex/config.toml"
    assert config_path(HOSTS["claude-code"], env=env, platform=platform).as_posix() == env["HOME"] + "/.claude.json"
    assert config_path(HOSTS["cursor"], env=env, platform=platform).as_posix() == env["HOME"] + "/.cursor/mcp.json"


def test_the_server_entry_starts_this_installation(home: Path, ws: Path) -> None:
    (change,) = plan(HOSTS["claude-desktop"], Options(workspace=ws), connect=True)
    entry = json.loads(change.after)["mcpServers"]["mdrecall"]
    assert entry["command"] == sys.executable and entry["args"] == ["-m", "mdrecall", "mcp", "-w", str(ws)]
