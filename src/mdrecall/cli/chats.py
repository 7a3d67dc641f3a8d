"""``mdrecall import-chats EXPORT``: a ChatGPT or Claude.ai data export as session transcripts
(:mod:`mdrecall.hosts.exports`; docs/hosts/chatgpt.md, docs/hosts/claude-ai.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from mdrecall.cli.options import echo_json, json_option, load_cli_config, load_model, open_cli_manager, workspace_options

if TYPE_CHECKING:
    from mdrecall.hosts.exports import Service


@click.command("import-chats")
@workspace_options
@click.argument("export", metavar="EXPORT", type=click.Path(path_type=Path))
@click.option("--from", "service", type=click.Choice(["chatgpt", "claude-ai"]), default=None,
              help="which service made the export (default: recognised from its content)")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="say what would be written; write nothing")
@click.option("--no-index", is_flag=True, help="only write the transcripts; the next search or `mdrecall index` indexes them")
@json_option
def import_chats(workspace: str, overrides: tuple[str, ...], export: Path, service: str | None, dry_run: bool,
                 no_index: bool, as_json: bool) -> int:  # fmt: skip
    """Import EXPORT (the data export's .zip, its conversations.json, or the unzipped folder) as one
    transcript per conversation under <sessions.dir>/chatgpt|claude-ai/transcripts/, secrets redacted.

    Importing a newer export again rewrites only the conversations that changed and deletes none.
    """
    from mdrecall.hosts.exports import import_export
    from mdrecall.sources.transcripts import sessions_root

    config = load_cli_config(workspace, overrides)
    root = sessions_root(Path(workspace).expanduser(), config.sessions.dir)
    report = import_export(export, root, service=cast("Service | None", service), dry_run=dry_run)
    out = report.to_dict()
    indexed = "sessions" in config.sources
    if indexed and not no_index and not dry_run and (report.written or report.updated):
        with open_cli_manager(workspace, overrides) as manager:
            load_model(manager, quiet=as_json)
            manager.sync()
    out["indexed"] = indexed and not no_index and not dry_run
    out["sessionKey"] = report.service
    if as_json:
        echo_json(out)
        return 0
    verb = "would write" if dry_run else "wrote"
    click.echo(f"{report.service} export: {report.conversations} conversations, {report.messages} messages -> {report.directory}")
    click.echo(f"{verb} {len(report.written)} new, {len(report.updated)} updated; {report.unchanged} unchanged, "
               f"{report.empty} without text, {report.malformed} malformed entries skipped")  # fmt: skip
    if report.redacted:
        click.echo(f"note: {report.redacted} secret(s) redacted before writing", err=True)
    if report.unknown:
        names = ", ".join(f"{k} x{v}" for k, v in sorted(report.unknown.items()))
        click.echo(f"note: types this version does not read were skipped: {names} (docs/hosts/{report.service}.md)", err=True)
    if not indexed:
        click.echo("note: these transcripts are not indexed: add sessions to sources (sources: [memory, sessions])", err=True)
    elif not dry_run:
        click.echo(f"search them with --session-key {report.service} (or set sessions.visibility: all)")
    return 0
