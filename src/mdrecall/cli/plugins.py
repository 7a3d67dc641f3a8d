"""``mdrecall plugins``: what is installed, what each plugin provides, and which failed."""

from __future__ import annotations

import json

import click


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def plugins(as_json: bool) -> int:
    """List plugins (mdrecall's own and installed ones) with their hooks and any load errors."""
    from mdrecall.backends import known_backends
    from mdrecall.embeddings.registry import known_providers
    from mdrecall.plugins import list_plugins

    infos = list_plugins()
    if as_json:
        data = {
            "plugins": [{"name": i.name, "hooks": list(i.hooks), "error": i.error} for i in infos],
            "backends": known_backends(),
            "providers": known_providers(),
        }
        click.echo(json.dumps(data, indent=2))
        return 0
    for info in infos:
        line = f"{info.name}: {', '.join(info.hooks) or '-'}"
        click.echo(line + (f"  [FAILED: {info.error}]" if info.error else ""))
    click.echo(f"backends:  {', '.join(known_backends())}")
    click.echo(f"providers: {', '.join(known_providers())}")
    return 1 if any(i.error for i in infos) else 0
