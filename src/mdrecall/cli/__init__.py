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


#: Options every command takes, which people also write before the command's name (`mdrecall -w ws
#: search x`, as git takes `-C`): the value-taking ones and the flags.
_COMMON_WITH_VALUE = frozenset({"-w", "--workspace", "-c", "--config", "--session-key"})
_COMMON_FLAGS = frozenset({"--json"})


def commands_first(args: list[str]) -> list[str]:
    """``args`` with the common options written before the command moved after its name, so that
    ``mdrecall -w ws -c provider=none search x`` runs ``mdrecall search -w ws -c provider=none x``.
    Anything else before the command (``--version``, ``-h``, a typo) is left for Click to judge."""
    moved: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in _COMMON_FLAGS and "=" not in arg:
            moved.append(arg)
            i += 1
        elif name in _COMMON_WITH_VALUE and name != arg:  # --workspace=ws
            moved.append(arg)
            i += 1
        elif name in _COMMON_WITH_VALUE and i + 1 < len(args):
            moved += args[i : i + 2]
            i += 2
        else:
            break
    if not moved or i >= len(args) or args[i].startswith("-"):
        return args
    return [args[i], *moved, *args[i + 1 :]]


def main(argv: Sequence[str] | None = None) -> int:
    args = commands_first(list(sys.argv[1:] if argv is None else argv))
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
