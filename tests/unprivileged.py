"""Run test code where file permissions apply (root ignores ``chmod 000``).

As root, the code runs in a child process whose capability bounding set lacks ``CAP_DAC_OVERRIDE``
and ``CAP_DAC_READ_SEARCH`` (``setpriv``), so a mode-000 file is unreadable to it as it would be to
any user. Otherwise it runs in a plain child process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def run_where_permissions_apply(code: str, timeout: float = 240) -> str:
    """Run ``code`` (Python, with ``tests/`` importable) and return its stdout; fail on a non-zero exit."""
    command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(TESTS)!r})\n{code}"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv (util-linux) is missing: cannot drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout
