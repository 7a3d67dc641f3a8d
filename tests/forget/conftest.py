"""Fixtures of the forgetting tests (the helpers are in forgethelpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from forgethelpers import make_fact_ws


@pytest.fixture
def fact_ws(tmp_path: Path) -> Path:
    """A workspace stating the fact (forgethelpers.TOKEN) in a daily note and in a transcript."""
    return make_fact_ws(tmp_path)
