"""The shared contract (tests/contract/) covers what every backend promises; these check it on the
example workspace through the real QMD: every file indexed, a planted fact with a correct citation,
the citation read back, read_file identical to the builtin's, an idempotent sync, close, config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qmdhelpers import PLANTED_LINE, PLANTED_PATH, PLANTED_QUESTION, file_lines, open_qmd, qmd_config

from mdrecall import open_manager
from mdrecall.errors import ConfigError, MdrecallError, PathError


@pytest.fixture(scope="module")
def manager(qmd_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    m = open_qmd(qmd_workspace, tmp_path_factory.mktemp("qmd-contract"))
    assert m.wait_warm(60)
    yield m
    m.close()


def _markdown_files(workspace: Path) -> list[str]:
    files = ["MEMORY.md"] if (workspace / "MEMORY.md").is_file() else []
    files += [p.relative_to(workspace).as_posix() for p in (workspace / "memory").rglob("*.md")
              if not any(part.startswith(".") for part in p.relative_to(workspace).parts)]
    return sorted(files)


def test_indexes_the_example_workspace(manager: Any, qmd_workspace: Path) -> None:
    expected = _markdown_files(qmd_workspace)
    status = manager.status()
    assert status.backend == "qmd"
    assert status.files == len(expected)
    names = {c["name"]: c for c in status.details["collections"]}
    assert names["memory-root"]["documents"] == 1
    assert names["memory-dir"]["documents"] == len(expected) - 1
    assert status.details["process"]["running"] and status.details["process"]["transport"] == "mcp-stdio"
    assert status.search_mode == "keyword-only" and status.provider == "qmd"
    assert status.clean is True and status.details["pendingChanges"] == {}
    # QMD's config and index live under the configured index dir, nowhere else.
    assert status.location is not None
    assert Path(status.location).is_file() and Path(status.location).is_relative_to(manager.layout.root)


def test_planted_fact_found_with_a_correct_citation(manager: Any, qmd_workspace: Path) -> None:
    response = manager.search(PLANTED_QUESTION)
    assert response.provider == "qmd" and response.mode == "keyword-only" and not response.warnings
    top = response.results[0]
    assert top.path == PLANTED_PATH and top.source == "memory"
    assert top.start_line <= PLANTED_LINE <= top.end_line
    assert top.citation == f"{PLANTED_PATH}#L{top.start_line}-L{top.end_line}"
    # The snippet is exactly the cited lines of the file.
    assert top.snippet.split("\n") == file_lines(qmd_workspace, top.path, top.start_line, top.end_line)
    assert "Priya" in top.snippet
    assert all(0.0 <= r.score <= 1.0 for r in response.results)
    assert [r.score for r in response.results] == sorted((r.score for r in response.results), reverse=True)


def test_read_file_of_a_citation(manager: Any, qmd_workspace: Path) -> None:
    top = manager.search(PLANTED_QUESTION).results[0]
    read = manager.read_file(top.path, from_line=top.start_line, lines=top.end_line - top.start_line + 1)
    assert read.path == PLANTED_PATH and read.from_line == top.start_line
    assert read.text == top.snippet


ATTACKS = ["../../etc/passwd", "/etc/passwd", "memory/../../outside.md", "memory/nope.md", ".openclaw/sessions/main/transcripts/2026-11-14.jsonl",
           "memory/", "MEMORY.md\x00", "", "memory\\2026-10-26.md", "memory/2026-10-26.md", "MEMORY.md"]


@pytest.mark.parametrize("path", ATTACKS)
def test_read_file_is_the_builtins(manager: Any, qmd_workspace: Path, tmp_path: Path, path: str) -> None:
    config = {"provider": "none", "store": {"path": str(tmp_path / "b.sqlite")}, "sync": {"watch": False}}
    builtin = open_manager(qmd_workspace, config, use_global_config=False)
    try:
        def outcome(m: Any) -> Any:
            try:
                return m.read_file(path, from_line=2, lines=3)
            except PathError as exc:
                return ("PathError", exc.code)

        assert outcome(manager) == outcome(builtin)
    finally:
        builtin.close()


def test_sync_is_idempotent(manager: Any, qmd_workspace: Path) -> None:
    files = len(_markdown_files(qmd_workspace))
    again = manager.sync()
    assert (again.files_indexed, again.files_removed, again.files_unchanged) == (0, 0, files)
    assert again.rebuild_reason is None
    assert manager.status().files == files


def test_close_stops_qmd(qmd_workspace: Path, tmp_path: Path) -> None:
    m = open_qmd(qmd_workspace, tmp_path)
    assert m.wait_warm(60)
    assert m.search(PLANTED_QUESTION).results
    pid = m.process.pid
    m.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(MdrecallError):
        m.search(PLANTED_QUESTION)
    m.close()  # twice is fine


def test_config_section_is_validated(qmd_workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"qmd\.mdoe"):
        open_manager(qmd_workspace, qmd_config(tmp_path, qmd={"mdoe": "search"}), use_global_config=False)
    with pytest.raises(ConfigError, match=r"qmd\.models\.embed.*never downloads"):
        open_manager(qmd_workspace, qmd_config(tmp_path, qmd={"models": {"embed": "hf:ggml-org/x/y.gguf"}}), use_global_config=False)


def test_cli_status_of_a_fresh_process(qmd_workspace: Path, tmp_path: Path) -> None:
    # A one-shot `mdrecall status` knows what QMD indexed only after its own first sync: it waits for it.
    args = ["-w", str(qmd_workspace), "-c", "backend=qmd", "-c", "provider=none", "-c", f"store.path={tmp_path / 'b.sqlite'}",
            "-c", f"qmd.indexDir={tmp_path / 'qmd'}"]
    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "mdrecall", "status", "--json", *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["backend"] == "qmd" and status["files"] == len(_markdown_files(qmd_workspace))
    assert status["clean"] is True and status["pendingChanges"] == {} and status["health"]["failures"] == 0
    text = subprocess.run([sys.executable, "-m", "mdrecall", "status", *args], capture_output=True, text=True, env=env, timeout=120)
    assert "backend:   qmd" in text.stdout and "freshness: clean" in text.stdout, text.stdout + text.stderr
