"""``mdrecall remember "…"``: append a fact to today's daily note (or ``--target``), then index it."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from mdrecall.cli.options import (
    command_hint,
    echo_json,
    json_option,
    load_cli_config,
    load_model,
    now_option,
    open_cli_manager,
    workspace_options,
)


@click.command("remember")
@workspace_options
@click.argument("text")
@click.option("--target", metavar="PATH", default=None,
              help="memory file to append to: MEMORY.md or memory/<name>.md (default: today's memory/YYYY-MM-DD.md)")  # fmt: skip
@click.option("--heading", metavar="TITLE", default=None,
              help="the ## section of the file to add it to (made if missing); default: the section the text's "
                   "first word names (\"Decision: ...\" under \"## Decisions\"), else \"## Remembered\"")  # fmt: skip
@click.option("--no-index", is_flag=True, help="only write the note; the next search or `mdrecall index` indexes it")
@now_option
@json_option
def remember(workspace: str, overrides: tuple[str, ...], text: str, target: str | None, heading: str | None,
             no_index: bool, now: datetime | None, as_json: bool) -> int:  # fmt: skip
    """Write TEXT into memory: today's daily note, or --target FILE ("-" reads standard input).

    Secrets are redacted; the entry carries when it was written. It is indexed at once (searchable
    now) unless --no-index."""
    from mdrecall.sources.remember import RememberError
    from mdrecall.sources.remember import remember as write_memory

    if text == "-":
        text = sys.stdin.read()
    config = load_cli_config(workspace, overrides)
    try:
        written = write_memory(workspace, text, config=config, target=target, now=now, via="cli",
                               heading=heading)  # fmt: skip
    except RememberError as exc:
        raise click.UsageError(str(exc)) from None
    out = written.to_dict()
    if not no_index:
        with open_cli_manager(workspace, overrides) as manager:
            load_model(manager, quiet=as_json)
            report = manager.sync()
        out["indexed"] = report.files_indexed > 0 or report.full_rebuild
        if not out["indexed"] and report.rebuild_reason:
            out["warning"] = f"written, not indexed yet: {report.rebuild_reason}"
    if as_json:
        echo_json(out)
        return 0
    verb = "created" if written.created else "appended to"
    click.echo(f"{verb} {written.path}: {written.citation}")
    if out.get("warning"):
        later = command_hint(workspace, overrides, "index")
        click.echo(f"note: {out['warning']}; the next `{later}` or search picks it up", err=True)
    if written.redacted:
        click.echo(f"note: {written.redacted} secret(s) redacted before writing", err=True)
    return 0
