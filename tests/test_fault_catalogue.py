"""docs/reliability.md's fault and attack catalogue is the one pytest's collection gives today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_catalogue_in_the_docs_is_current() -> None:
    """Also fails when a category no longer matches any test (a renamed test file or function)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "fault_catalogue.py"), "--check"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr

