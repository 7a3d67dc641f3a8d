"""Helpers for the command tests: run ``mdrecall`` in process (``main(argv)``) or as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def mdrecall(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``mdrecall("search", "x", "-w", ws)`` -> (exit code, stdout, stderr), in process."""
    from mdrecall.cli import main

    monkeypatch.delenv("MDRECALL_WORKSPACE", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def subprocess_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "MDRECALL_WORKSPACE"}
    env.update(MDRECALL_HOME=str(home), PYTHONIOENCODING="utf-8")
    return env


def run_process(home: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mdrecall", *args], capture_output=True, text=True,
                          env=subprocess_env(home), timeout=120, **kwargs)  # type: ignore[call-overload]  # fmt: skip
