"""The ``mdrecall`` command, run as a real subprocess (``python -m mdrecall``) with an isolated home."""

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
    # The citation search printed reads exactly the cited lines.
    cited = run(home, "get", results[0]["citation"], *common, "--json")
    assert cited.returncode == 0, cited.stderr
    cited_json = json.loads(cited.stdout)
    assert (cited_json["from"], cited_json["lines"]) == (results[0]["startLine"], results[0]["endLine"] - results[0]["startLine"] + 1)
    assert run(home, "get", "memory/long.md#L5-L6", *common).stdout.strip().split("\n") == ["row 5", "row 6"]

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
        (["index", "-w", "{ws}/missing"], 1, "not a directory"),
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
