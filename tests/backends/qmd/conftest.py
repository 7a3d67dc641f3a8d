"""Fixtures for the QMD backend's tests: the real ``qmd`` (scripts/install-qmd.sh), the example
workspace with planted facts, and managers whose QMD home and builtin index live under tmp.

QMD start-up costs a few hundred milliseconds; modules share one manager (one QMD process) where
the tests do not break it on purpose.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mdrecall.backends.qmd.layout import find_binary
from mdrecall.backends.qmd.settings import QmdSettings


@pytest.fixture(scope="session")
def qmd_binary() -> Path:
    binary = find_binary(QmdSettings())
    if binary is None:
        pytest.skip("QMD is not installed: scripts/install-qmd.sh (run by scripts/setup.sh) could not install it; "
                    "run it to see why (it needs npm and the npm registry)")
    probe = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:  # installed but broken: that is a failure, not a reason to skip
        pytest.fail(f"{binary} --version failed ({probe.returncode}): {probe.stderr.strip()[-500:]}")
    return binary


@pytest.fixture(scope="module")
def qmd_workspace(tmp_path_factory: pytest.TempPathFactory, qmd_binary: Path) -> Path:
    from qmdhelpers import make_workspace

    return make_workspace(tmp_path_factory.mktemp("qmd-ws") / "workspace")
