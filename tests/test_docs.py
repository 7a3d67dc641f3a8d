"""The docs' examples run as written (conventions in ``tests/docs_runner.py``), and the README's
install steps work in a fresh virtualenv without any GPU package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_runner import ROOT, blocks, run

RUN = ["README.md", "docs/quickstart.md", "docs/facts.md", "docs/forgetting.md", "docs/hosts/walkthrough.md"]
CHECKED = [*RUN, "docs/cli.md", "docs/agents.md", *sorted(f"docs/hosts/{p.name}" for p in (ROOT / "docs" / "hosts").glob("*.md") if p.name != "walkthrough.md")]
GPU_PACKAGES = re.compile(r"^(nvidia-|torch\b|triton\b|cuda|cupy)", re.I)


@pytest.mark.parametrize("doc", CHECKED)
def test_every_command_block_is_marked(doc: str) -> None:
    unmarked = [b.line for b in blocks(ROOT / doc) if b.lang in ("bash", "sh", "shell") and not {"test", "norun"} & set(b.tags)]
    assert not unmarked, f"{doc}: bash blocks at lines {unmarked} say neither 'test' nor 'norun'"


@pytest.mark.parametrize("doc", CHECKED)
def test_json_examples_parse(doc: str) -> None:
    for block in blocks(ROOT / doc):
        if block.lang != "json":
            continue
        try:
            json.loads(block.body)
        except ValueError:
            for line in block.body.splitlines():  # JSON Lines
                json.loads(line)


@pytest.mark.parametrize("doc", RUN)
def test_examples_run_as_written(doc: str, tmp_path: Path) -> None:
    done = run(ROOT / doc, Path(sys.executable).parent, tmp_path)
    assert done.returncode == 0, f"{doc} failed:\n{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-2000:]}"
    assert "Traceback" not in done.stderr
    if doc == "README.md":
        assert "MEMORY.md" in done.stdout and "workspace: " in done.stdout  # search and status printed
        assert (tmp_path / "restored" / "MEMORY.md").read_bytes() == (ROOT / "examples/workspace/MEMORY.md").read_bytes()
    elif doc == "docs/quickstart.md":
        assert "staging database" in done.stdout  # the Python agent found what it wrote
    elif doc == "docs/hosts/walkthrough.md":  # the hook Claude Code runs printed the memory, cited
        assert "<relevant-memories>" in done.stdout and "port 5433" in done.stdout
        assert "(Source: memory/" in done.stdout and "release train leaves every second Wednesday" in done.stdout
        assert not (tmp_path / "user" / ".claude" / "settings.json").exists() or "mdrecall" not in (
            tmp_path / "user" / ".claude" / "settings.json").read_text()  # disconnect took the hooks away again
    elif doc == "docs/facts.md":  # the Python example printed the history
        assert "2026-03-02 memory/2026-03-02.md#L4 superseded memory/2026-05-01.md#L4" in done.stdout
    else:  # docs/forgetting.md: the JSON report of the forget it ran
        report = json.loads((tmp_path / "forgot.json").read_text(encoding="utf-8"))
        assert report and "Kestrel" not in json.dumps(report)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_readme_install_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    """The README's wheel install into a new virtualenv (package index only, nothing prebuilt here),
    then its examples against that install: no GPU package is installed and
    everything runs keyword-only, with doctor saying why."""
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = dist.glob("mdrecall-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    install = [*pip, "install", "-q", "--no-compile", str(wheel)]
    # The package index alone, without this machine's extra local mirrors (listing those makes pip
    # take minutes); the machine's own pip configuration if the index cannot be reached that way.
    plain = subprocess.run(install, capture_output=True, timeout=400, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    if plain.returncode != 0:
        subprocess.run(install, check=True, capture_output=True, timeout=400)
    listed = json.loads(subprocess.run([*pip, "list", "--format", "json"], check=True, capture_output=True, text=True).stdout)
    names = {p["name"].lower() for p in listed}
    assert {"mdrecall", "apsw", "sqlite-vec", "numpy", "click"} <= names
    assert not [n for n in names if GPU_PACKAGES.match(n)], sorted(names)
    done = run(ROOT / "README.md", venv / "bin", tmp_path / "readme")  # (the quickstart runs in the dev environment)
    assert done.returncode == 0, f"README.md in a fresh install:\n{done.stderr[-4000:]}"
    doctor = subprocess.run([str(venv / "bin" / "mdrecall"), "doctor", "-w", str(tmp_path / "readme" / "my-agent"), "--json"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    states = {f["state"] for f in json.loads(doctor.stdout)["findings"]}
    assert "mcp-missing" in states  # the MCP SDK is an extra: doctor says how to add it
