"""``backend: qmd``: memory search answered by QMD (npm ``@tobilu/qmd``), kept warm over MCP stdio.

Needs the ``qmd`` program (``scripts/install-qmd.sh`` installs it into ``.tools/qmd/``) and no
Python package beyond mdrecall's core. See docs/qmd.md: process model, modes and models, score
calibration, the fallback to the builtin engine and its retry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def create_manager(workspace: Path, config: Any) -> Any:
    """The factory ``open_manager`` calls for ``backend: qmd`` (entry point ``mdrecall.backends``)."""
    from mdrecall.backends.qmd.manager import QmdMemoryManager
    from mdrecall.backends.qmd.settings import parse_settings

    manager = QmdMemoryManager(Path(workspace), config, parse_settings(config.qmd))
    manager.start_background()
    return manager


__all__ = ["create_manager"]
