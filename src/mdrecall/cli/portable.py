"""``mdrecall export`` and ``mdrecall import``: a workspace's memories as JSON Lines (docs/cli.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mdrecall.cli.options import echo_json, json_option, load_model, open_cli_manager, workspace_options
from mdrecall.errors import MdrecallError


def _output_path(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``-o FILE`` checked before anything is read: a missing folder or a directory is a usage error."""
    if value == "-":
        return value
    target = Path(value).expanduser()
    if target.is_dir():
        raise click.BadParameter(f"{value} is a directory; name the file to write, e.g. {Path(value) / 'memory.jsonl'}",
                                 ctx=ctx, param=param)  # fmt: skip
    if not target.parent.is_dir():
        raise click.BadParameter(f"the folder {target.parent} does not exist (create it first)", ctx=ctx, param=param)
    return str(target)


@click.command("export")
@workspace_options
@click.option("-o", "--output", metavar="FILE", default="-", show_default=True, callback=_output_path,
              help="where to write (- = standard output); its folder must exist")  # fmt: skip
@json_option
def export(workspace: str, overrides: tuple[str, ...], output: str, as_json: bool) -> int:
    """Export the workspace's memory files as mdrecall-export JSON Lines (any backend can import it)."""
    from mdrecall.portable import export_jsonl

    with open_cli_manager(workspace, overrides) as manager:
        if output == "-":
            report = export_jsonl(manager, sys.stdout)
        else:
            target = Path(output)
            tmp = target.with_name(f".{target.name}.partial")
            try:
                with tmp.open("w", encoding="utf-8") as handle:
                    report = export_jsonl(manager, handle)
                tmp.replace(target)  # a half-written export never takes the name
            finally:
                tmp.unlink(missing_ok=True)
    summary = report.to_dict()
    if as_json and output != "-":
        echo_json(summary)
    elif output != "-" or not sys.stdout.isatty():
        click.echo(f"exported {report.files} file(s), {report.bytes} bytes" + (f" to {output}" if output != "-" else ""), err=True)
    for item in report.skipped:
        click.echo(f"not exported: {item['path']}: {item['reason']}", err=True)
    return 0


@click.command("import")
@workspace_options
@click.argument("source", metavar="FILE", default="-",
                type=click.Path(exists=True, dir_okay=False, readable=True, allow_dash=True))  # fmt: skip
@click.option("--overwrite", is_flag=True, help="replace files that exist with other content (default: keep them, report)")
@click.option("--dry-run", is_flag=True, help="check the export and say what would be written")
@click.option("--no-index", is_flag=True, help="write the files only; the next search or `mdrecall index` indexes them")
@json_option
def import_(workspace: str, overrides: tuple[str, ...], source: str, overwrite: bool, dry_run: bool, no_index: bool, as_json: bool) -> int:
    """Import an mdrecall-export file (FILE, or - for standard input) into the workspace.

    The whole file is checked first: a damaged or truncated export writes nothing (exit 1).
    Exit 1 also when some files were kept because they differ (use --overwrite)."""
    from mdrecall.portable import import_files, read_export

    try:
        if source == "-":
            files = read_export(sys.stdin)
        else:
            with open(source, encoding="utf-8") as handle:
                files = read_export(handle)
    except UnicodeDecodeError:
        raise MdrecallError(f"{source} is not an mdrecall export (not UTF-8 text); nothing was written") from None
    with open_cli_manager(workspace, overrides) as manager:
        if not (dry_run or no_index):
            load_model(manager, quiet=as_json)
        report = import_files(manager, files, on_conflict="overwrite" if overwrite else "skip", dry_run=dry_run,
                              index=not no_index)  # fmt: skip
    if as_json:
        echo_json(report.to_dict())
    else:
        verb = "would write" if dry_run else "wrote"
        click.echo(f"{verb} {len(report.written)} file(s), {len(report.unchanged)} unchanged"
                   + (", indexed" if report.indexed else ""))  # fmt: skip
        for path in report.conflicts:
            click.echo(f"kept {path}: it exists with other content (--overwrite replaces it)", err=True)
        for item in report.skipped:
            click.echo(f"skipped {item['path']}: {item['reason']}", err=True)
    return 1 if report.conflicts else 0
