"""The ``mdrecall`` command group, as the process runs it when no daemon answers (cli/__init__.py
first asks a running one: cli/warm/).

Exit codes: 0 success; 1 nothing found (search) or an operation failed; 2 bad usage or config;
3 promotion refused (``promote --apply``, ``dream``); 130 interrupted. Output closed early
(``mdrecall ... | head``) ends the command quietly with 1, as Click does. Plugins add subcommands through the ``register_commands`` hook.

Commands are imported when they run, not at start: a one-shot keyword search should not pay for
the MCP server, export or promotion code (docs/cli.md has the start-up figures).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import click

from mdrecall.cli.options import INTERRUPTED, parse_overrides
from mdrecall.errors import ConfigError, MdrecallError, PathError

__all__ = ["COMMANDS", "INTERRUPTED", "cli", "main", "parse_overrides", "run"]

#: Built-in commands: name -> "module:attribute", in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "init": "mdrecall.cli.workspace:init",
    "index": "mdrecall.cli.memory:index",
    "search": "mdrecall.cli.memory:search",
    "get": "mdrecall.cli.memory:get",
    "history": "mdrecall.cli.history:history",
    "remember": "mdrecall.cli.remember:remember",
    "forget": "mdrecall.cli.forget:forget",
    "status": "mdrecall.cli.memory:status",
    "doctor": "mdrecall.cli.doctor:doctor",
    "config": "mdrecall.cli.config:config",
    "watch": "mdrecall.cli.watch:watch",
    "mcp": "mdrecall.cli.mcp:mcp",
    "connect": "mdrecall.cli.connect:connect",
    "disconnect": "mdrecall.cli.connect:disconnect",
    "hook": "mdrecall.cli.hook:hook",
    "ui": "mdrecall.cli.ui:ui",
    "export": "mdrecall.cli.portable:export",
    "import": "mdrecall.cli.portable:import_",
    "import-chats": "mdrecall.cli.chats:import_chats",
    "gc": "mdrecall.cli.workspace:gc",
    "plugins": "mdrecall.cli.plugins:plugins",
    "completion": "mdrecall.cli.completion:completion",
}


#: How ``mdrecall --help`` groups the commands: (section, built-in and bundled commands). A command
#: not named here is listed under "Backends" when a backend's module registers it, else "Plugins".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Core commands", ("init", "index", "search", "get", "history", "remember", "forget", "status")),
    ("Serving agents and people", ("mcp", "ui", "watch")),
    ("Dreaming (promotion into MEMORY.md)", ("promote", "dream")),
    ("Maintenance", ("doctor", "config", "export", "import", "gc", "plugins", "completion")),
    ("Backends", ("ltm", "migrate-store", "postgres")),
)

EXAMPLES = """Examples:

\b
  mdrecall init ~/agent && cd ~/agent       MEMORY.md, memory/, .mdrecall.yaml
  mdrecall remember "Deploys need a green canary for 30 minutes."
  mdrecall search "how do we deploy?"       hybrid search, results cited
  mdrecall get 'memory/2026-11-05.md#L3-L7' the lines a result cites
  mdrecall search -w ~/agent -c provider=none "db port"
  mdrecall mcp --print-config claude-desktop
  mdrecall doctor                           what is wrong, and the fix
"""


def _section_of(name: str, command: click.Command) -> str:
    for title, names in SECTIONS:
        if name in names:
            return title
    module = getattr(command.callback, "__module__", None) or type(command).__module__
    return "Backends" if module.startswith("mdrecall.backends.") else "Plugins"


class LazyGroup(click.Group):
    """A group whose built-in commands load on use; plugin commands are registered on first need."""

    _plugins_registered = False

    def _register_plugin_commands(self) -> None:
        if LazyGroup._plugins_registered:
            return
        LazyGroup._plugins_registered = True
        from mdrecall.plugins import call_each

        for _name, _ in call_each("register_commands", cli=self):
            pass

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._register_plugin_commands()
        return [*COMMANDS, *sorted(name for name in self.commands if name not in COMMANDS)]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in sections (core, serving, dreaming, maintenance, backends, plugins), each
        with its whole first sentence, wrapped rather than cut."""
        order = {name: i for i, name in enumerate(n for _, names in SECTIONS for n in names)}
        sections: dict[str, list[tuple[str, str]]] = {title: [] for title, _ in SECTIONS}
        names = sorted(self.list_commands(ctx), key=lambda n: (order.get(n, len(order)), n))
        width = max((len(n) for n in names), default=0)
        for name in names:
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            summary = command.get_short_help_str(limit=300)
            sections.setdefault(_section_of(name, command), []).append((name.ljust(width), summary))
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows, col_max=width + 2)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            self.commands[cmd_name] = command
            return command
        self._register_plugin_commands()
        return self.commands.get(cmd_name)


@click.group(
    name="mdrecall",
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXAMPLES,
)
@click.version_option(version=None, package_name="mdrecall", prog_name="mdrecall", message="%(prog)s %(version)s")
def cli() -> None:
    """Long-term memory for AI agents, from Markdown files.

    Markdown files are the truth (MEMORY.md, memory/*.md); mdrecall indexes them and answers searches
    with citations, from this command, an MCP server, a web page or Python. Every command takes -w
    WORKSPACE (default: $MDRECALL_WORKSPACE, else the current directory), -c KEY=VALUE config overrides
    and --json; `mdrecall COMMAND -h` says more. Exit codes: 0 done, 1 nothing found or failed, 2 bad
    usage or config, 3 promotion refused, 130 interrupted (docs/cli.md).
    """


def _stdout_gone() -> None:
    # The reader went away (`| head`): send whatever is still buffered nowhere, so the interpreter's
    # final flush does not print a BrokenPipeError of its own.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


#: Set to see the traceback of an unexpected error instead of its one-line summary.
DEBUG_ENV = "MDRECALL_DEBUG"


def _show_usage_error(exc: click.UsageError) -> None:
    """Two lines: what was wrong, and the help that says how to do it (Click's own adds the usage
    synopsis and a blank line)."""
    click.echo(f"Error: {exc.format_message()}", err=True)
    ctx = exc.ctx
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        click.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)


def _interrupt(signum: int, frame: object) -> None:
    # The first Ctrl-C stops the command: KeyboardInterrupt unwinds it, so what is finished is kept
    # and the index is closed. A second one ends the process at once (the default action) instead
    # of interrupting that clean-up with Python's "Exception ignored in: <module 'threading'>".
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    raise KeyboardInterrupt


def _catch_interrupts() -> Any:
    """Install :func:`_interrupt` for SIGINT where Python's own handler is; the handler it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return None  # ignored (a background job), or someone else's handler: theirs to keep
    signal.signal(signal.SIGINT, _interrupt)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    # Our own process: no "Loading weights" bar from transformers on every command (a library user's
    # progress bars are theirs to decide, so this is set here and not in the provider).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    args = list(sys.argv[1:] if argv is None else argv)
    previous = _catch_interrupts()
    code = run(args)
    if previous is not None and code != INTERRUPTED:
        signal.signal(signal.SIGINT, previous)  # in-process callers (tests) get theirs back
    return code


def run(args: list[str]) -> int:
    """One command, its errors turned into one or two lines and an exit code (the daemon runs its
    requests through this too, so both paths say the same)."""
    try:
        try:
            result: Any = cli.main(args=args, prog_name="mdrecall", standalone_mode=False)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:  # Click turns most of these into exit 1 itself; the last flush is ours
        _stdout_gone()
        return 1
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return 2
    except click.UsageError as exc:
        _show_usage_error(exc)
        return 2
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ConfigError as exc:
        click.echo(f"mdrecall: config error: {exc}", err=True)
        return 2
    except PathError as exc:
        click.echo(f"mdrecall: {exc} [{exc.code}]", err=True)
        return 1
    except MdrecallError as exc:
        click.echo(f"mdrecall: {exc}", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return INTERRUPTED
    except OSError as exc:  # a file or folder the system refused: say which and why, as cp or git do
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"mdrecall: {exc.strerror or exc}{where}", err=True)
        return 1
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        # A bug, not a slip: one line for the user, the traceback on request.
        click.echo(f"mdrecall: unexpected error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 to see where)", err=True)
        return 1
    if isinstance(result, int):
        return result
    return 0

