"""``mdrecall completion bash|zsh|fish``: the shell completion script (Click's)."""

from __future__ import annotations

import click

_INSTALL = {
    "bash": 'eval "$(mdrecall completion bash)"        # in ~/.bashrc',
    "zsh": 'eval "$(mdrecall completion zsh)"         # in ~/.zshrc',
    "fish": "mdrecall completion fish > ~/.config/fish/completions/mdrecall.fish",
}


@click.command("completion")
@click.argument("shell", type=click.Choice(sorted(_INSTALL)))
def completion(shell: str) -> int:
    """Print the shell completion script for SHELL (bash, zsh or fish). Install it with:

    \b
      bash: eval "$(mdrecall completion bash)"   (in ~/.bashrc)
      zsh:  eval "$(mdrecall completion zsh)"    (in ~/.zshrc)
      fish: mdrecall completion fish > ~/.config/fish/completions/mdrecall.fish
    """
    from click.shell_completion import get_completion_class

    from mdrecall.cli import cli

    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - click knows the three shells offered
        raise click.UsageError(f"no completion for {shell}")
    click.echo(cls(cli, {}, "mdrecall", "_MDRECALL_COMPLETE").source())
    return 0
