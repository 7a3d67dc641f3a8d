"""The ``mdrecall`` command: a thin shell over the core (one module per command group).

Exit codes: 0 success; 1 nothing found (search) or an operation failed; 2 bad usage or config;
3 promotion refused (``promote --apply``, ``dream``); 130 interrupted. Output closed early
(``mdrecall ... | head``) ends the command quietly with 1, as Click does. Plugins add subcommands
through the ``register_commands`` hook.

``main`` first offers ``search``, ``get`` and ``status`` to a daemon serving this workspace with the
same configuration (``mdrecall watch``: cli/warm/), which answers them exactly as this process
would; when none does, the command runs here (cli/app.py). This module imports nothing else at
start, so that the first path costs little more than Python's own start (docs/cli.md, "The warm
path"): the Click group is imported on first use.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: see mdrecall/__init__.py
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from mdrecall.cli.app import COMMANDS, INTERRUPTED, cli, parse_overrides

__all__ = ["COMMANDS", "INTERRUPTED", "cli", "main", "parse_overrides"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from mdrecall.cli.warm.client import answer

    code = answer(args)
    if code is not None:
        return code
    from mdrecall.cli.app import main as run_here

    return run_here(args)


def __getattr__(name: str) -> Any:
    if name in ("COMMANDS", "INTERRUPTED", "cli", "parse_overrides"):
        from mdrecall.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'mdrecall.cli' has no attribute {name!r}")
