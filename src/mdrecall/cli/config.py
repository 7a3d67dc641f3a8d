"""``mdrecall config show | validate``: the configuration in effect, and whether files are valid."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from mdrecall.cli.options import dumps, json_option, load_cli_config, workspace_options
from mdrecall.errors import ConfigError
from mdrecall.masking import masked, masked_override


def config_files(workspace: str) -> list[Path]:
    """The files ``load_config`` reads for this workspace, in order (later wins), that exist."""
    from mdrecall.config import global_config_path, workspace_config_paths

    root = Path(workspace).expanduser()
    candidates = [global_config_path(), *(workspace_config_paths(root) if root.is_dir() else [])]
    return [p for p in candidates if p.is_file()]


@click.group("config")
def config() -> None:
    """Show the configuration in effect, or check config files."""


@config.command("show")
@workspace_options
@json_option
@click.option("--changed", is_flag=True, help="only the keys that differ from the defaults")
def show(workspace: str, overrides: tuple[str, ...], as_json: bool, changed: bool) -> int:
    """Print the configuration this workspace runs with (files + -c overrides), secrets masked."""
    import yaml

    from mdrecall.config import MemoryConfig

    cfg = load_cli_config(workspace, overrides).model_dump(mode="json", by_alias=True)
    cfg["sync"]["watch"] = None  # set per command (off for one-shot commands); not the file's value
    if changed:
        defaults = MemoryConfig().model_dump(mode="json", by_alias=True)
        defaults["sync"]["watch"] = None
        cfg = _diff(cfg, defaults)
    files = [str(p) for p in config_files(workspace)]
    shown = [masked_override(item) for item in overrides]
    data = {"files": files, "overrides": shown, "config": masked(cfg)}
    if as_json:
        click.echo(dumps(data))
        return 0
    click.echo("# files read (later wins): " + (", ".join(files) or "none (defaults)"))
    if overrides:
        click.echo("# overrides: " + " ".join(shlex.quote(item) for item in shown))
    if changed and not cfg:
        click.echo("# nothing differs from the defaults")
        return 0
    click.echo(yaml.safe_dump(masked(cfg), sort_keys=False, allow_unicode=True).rstrip())
    return 0


def _diff(value: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        base = default.get(key)
        if isinstance(item, dict) and isinstance(base, dict):
            nested = _diff(item, base)
            if nested:
                out[key] = nested
        elif item != base:
            out[key] = item
    return out


@config.command("validate")
@workspace_options
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@json_option
def validate(workspace: str, overrides: tuple[str, ...], files: tuple[str, ...], as_json: bool) -> int:
    """Check config FILES (default: the ones this workspace reads, plus -c overrides).

    Exit 0 when valid, 2 with the key and file of each error otherwise."""
    import yaml

    from mdrecall.config import parse_config, yaml_problem

    errors: list[str] = []
    checked: list[str] = []
    if files:
        for name in files:
            checked.append(name)
            try:
                data = yaml.safe_load(Path(name).read_text(encoding="utf-8")) or {}
                if not isinstance(data, dict):
                    raise ConfigError(f"{name}: expected a mapping at the top level, got {type(data).__name__}")
                section = data.get("memory", data)
                if not isinstance(section, dict):
                    raise ConfigError(f"{name}: 'memory' must be a mapping")
                parse_config(section, origin=name)
            except OSError as exc:
                errors.append(f"{name}: {exc.strerror or exc}")
            except (yaml.YAMLError, ConfigError) as exc:
                errors.append(str(exc) if isinstance(exc, ConfigError) else f"{name}: not valid YAML ({yaml_problem(exc)})")
    else:
        checked = [str(p) for p in config_files(workspace)] + (["overrides"] if overrides else [])
        try:
            load_cli_config(workspace, overrides)
        except ConfigError as exc:
            errors.append(str(exc))
    if as_json:
        click.echo(dumps({"ok": not errors, "checked": checked, "errors": errors}))
    elif errors:
        for error in errors:
            click.echo(f"mdrecall: config error: {error}", err=True)
    else:
        click.echo("config ok: " + (", ".join(checked) or "no config files (defaults)"))
    return 2 if errors else 0
