"""The ``mdrecall`` entry point: version, help, completion, closed pipes, what a start imports."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import subprocess_env


def test_version_and_help(mdrecall: Callable[..., tuple[int, str, str]]) -> None:
    from mdrecall import __version__

    code, out, _ = mdrecall("--version")
    assert code == 0 and out.strip() == f"mdrecall {__version__}"
    code, out, _ = mdrecall("--help")
    assert code == 0

    def section(title: str) -> set[str]:
        body = out.split(f"\n{title}:\n")[1].split("\n\n")[0]
        return {line.split()[0] for line in body.splitlines() if line.startswith("  ") and not line.startswith("   ")}

    assert section("Core commands") == {"init", "index", "search", "get", "history", "remember", "forget", "status"}
    assert section("Serving agents and people") == {"mcp", "ui", "watch"}
    assert section("Maintenance") >= {"doctor", "config", "export", "import", "gc", "plugins", "completion"}
    assert section("Backends") >= {"ltm", "migrate-store", "postgres"}  # the bundled backends' commands
    assert "..." not in out.split("Core commands:")[1]  # summaries are wrapped, never cut
    assert 'mdrecall search "how do we deploy?"' in out.split("Examples:")[1]
    assert mdrecall()[0] == 2  # no command: usage
    code, _, err = mdrecall("serch", "x")
    assert code == 2 and "Did you mean 'search'?" in err and len(err.strip().splitlines()) == 2


def test_completion_script_and_live_completion(tmp_path: Path, mdrecall: Callable[..., tuple[int, str, str]]) -> None:
    code, script, _ = mdrecall("completion", "bash")
    assert code == 0 and "_MDRECALL_COMPLETE=bash_complete" in script
    assert mdrecall("completion", "zsh")[0] == 0 and mdrecall("completion", "fish")[0] == 0
    assert mdrecall("completion", "tcsh")[0] == 2
    # What the installed script asks the program at each <TAB>.
    env = {**subprocess_env(tmp_path), "_MDRECALL_COMPLETE": "bash_complete", "COMP_WORDS": "mdrecall rem", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "mdrecall"], capture_output=True, text=True, env=env, timeout=60)
    assert "plain,remember" in done.stdout.splitlines()
    env.update(COMP_WORDS="mdrecall search --corpus ", COMP_CWORD="3")
    done = subprocess.run([sys.executable, "-m", "mdrecall"], capture_output=True, text=True, env=env, timeout=60)
    assert {"plain,memory", "plain,sessions", "plain,all"} <= set(done.stdout.splitlines())


def test_output_closed_early_is_not_a_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(40):  # ~2 MB of export: far more than a pipe holds
        (ws / "memory" / f"note-{i}.md").write_text(f"# Note {i}\n" + ("- a line of memory text\n" * 2000), encoding="utf-8")
    for args in (["export", "-w", str(ws)], ["promote", "--all", "-w", str(ws)]):
        proc = subprocess.Popen([sys.executable, "-m", "mdrecall", *args, "-c", "provider=none"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=subprocess_env(tmp_path / "home"))  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()  # `| head -1`
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(60)
        assert "Traceback" not in err and "BrokenPipe" not in err, err
        assert code in (0, 1)  # Click ends a command whose output pipe closed with exit 1
        if args[0] == "export":
            assert code == 1


def test_a_search_loads_only_what_it_uses(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# M\n- a fact about kumquats\n", encoding="utf-8")
    script = ("import sys, json\nfrom mdrecall.cli import main\n"
              f"code = main(['search', 'kumquats', '-w', {str(ws)!r}, '-c', 'provider=none'])\n"
              "print(json.dumps([code, sorted(sys.modules)]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=subprocess_env(tmp_path / "home"), timeout=60)
    code, modules = json.loads(done.stdout.splitlines()[-1])
    assert code == 0, done.stderr
    assert "mdrecall.cli.memory" in modules
    for unused in ("mdrecall.cli.portable", "mdrecall.portable", "mdrecall.mcp.server", "mdrecall.cli.dreaming",
                   "mdrecall.cli.workspace", "mdrecall.doctor", "rich", "torch", "sentence_transformers"):  # fmt: skip
        assert unused not in modules, unused


def test_mcp_help_and_the_readme_name_every_tool_mcp_serves(mdrecall: Callable[..., tuple[int, str, str]]) -> None:
    pytest.importorskip("mcp")
    from mdrecall.mcp.server import served_tools

    code, out, _ = mdrecall("mcp", "--help")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    agents = readme.split("### Agents (MCP)")[1].split("```")[0]
    for tool in served_tools("builtin"):
        assert tool in out and f"`{tool}`" in agents, tool
