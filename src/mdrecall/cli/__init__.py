"""The ``mdrecall`` command: a thin shell over the core (one module per command group).

Exit codes: 0 success; 1 nothing found (search) or an operation failed; 2 bad usage or config;
130 interrupted. Plugins add subcommands through the ``register_commands`` hook.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from mdrecall.cli.mcp import mcp
from mdrecall.cli.memory import get, index, search, status
from mdrecall.cli.options import parse_overrides
from mdrecall.cli.plugins import plugins
from mdrecall.cli.watch import watch
from mdrecall.errors import ConfigError, MdrecallError, PathError

__all__ = ["cli", "main", "parse_overrides"]


def _version() -> str:
    from mdrecall import __version__

    return __version__


@click.group(
    name="mdrecall",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(version=None, package_name="mdrecall", prog_name="mdrecall", message="%(prog)s %(version)s")
def cli() -> None:
    """Long-term memory for AI agents, from Markdown files."""


for _command in (index, search, get, status, watch, mcp, plugins):
    cli.add_command(_command)


def _register_plugin_commands() -> None:
    from mdrecall.plugins import call_each

    for _name, _ in call_each("register_commands", cli=cli):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    # Our own process: no "Loading weights" bar from transformers on every command (a library user's
    # progress bars are theirs to decide, so this is set here and not in the provider).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    _register_plugin_commands()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="mdrecall", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return 2
    except click.UsageError as exc:
        exc.show()
        return 2
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return 130
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
        return 130
    if isinstance(result, int):
        return result
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
