"""``mdrecall forget TARGET``: remove lines, a file, an entry or a text from memory and every store.

Shows the exact lines first. Deleting needs a confirmation: ``--yes``, the prompt on a terminal, or
``--confirm TOKEN`` with the token a previous run printed (which applies only if the same lines are
still selected). Exit codes: 0 forgotten and verified; 1 nothing matched, not confirmed, or a copy
was still found afterwards; 2 a bad target (a missing file, lines past its end, a path outside
memory, an empty or too broad text).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from mdrecall.cli.options import command_hint, echo_json, load_model, open_cli_manager, workspace_options

if TYPE_CHECKING:
    from mdrecall.forget.plan import ForgetPlan
    from mdrecall.forget.report import ForgetReport


@click.command("forget")
@workspace_options
@click.argument("target")
@click.option("--text", "as_text", is_flag=True, help="read TARGET as a text to find, even if it looks like a path")
@click.option("--yes", is_flag=True, help="forget without asking")
@click.option("--confirm", "token", metavar="TOKEN", default=None,
              help="forget exactly the lines a previous run listed (the token it printed)")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="only list what would be forgotten")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="--format json")
def forget(workspace: str, overrides: tuple[str, ...], target: str, as_text: bool, yes: bool, token: str | None,
           dry_run: bool, fmt: str, as_json: bool) -> int:  # fmt: skip
    """Forget lines, a file or a text everywhere, for good.

    TARGET: lines (memory/2026-03-02.md#L6-L7, as search cites them), a memory file, a transcript,
    a long-term entry (ltm:<id>), or a text (every line containing it).

    The lines go from the Markdown (an edit made meanwhile is kept) and from every store built from
    them: the keyword index, vectors and the embedding cache, dreaming's recall store and review
    queue, other backends' stores. A byte-by-byte scan afterwards checks that no copy is left.
    """
    from mdrecall.forget.plan import ForgetTargetError, plan_forget
    from mdrecall.forget.run import apply_plan

    as_json = as_json or fmt == "json"
    with open_cli_manager(workspace, overrides) as manager:
        try:
            plan = plan_forget(manager, target, text=as_text)
        except ForgetTargetError as exc:
            raise click.UsageError(str(exc)) from None
        if plan.empty:
            if as_json:
                echo_json({**plan.to_dict(), "applied": False, "action": "none"})
            else:
                click.echo(f"nothing in memory matches {target!r}", err=True)
                _warnings(plan.warnings)
            return 1
        if dry_run or (token is not None and token != plan.token) or not (yes or token or _ask(plan, as_json)):
            again = command_hint(workspace, overrides, "forget", target, *(["--text"] if as_text else []),
                                 "--confirm", plan.token)  # fmt: skip
            return _not_applied(plan, again, dry_run=dry_run, changed=token is not None and token != plan.token, as_json=as_json)
        load_model(manager, quiet=as_json)  # re-indexing what is left of the files embeds it
        report = apply_plan(manager, plan)
    if as_json:
        echo_json(report.to_dict())
    else:
        _print_report(report)
    return 0 if report.verified else 1


def _ask(plan: ForgetPlan, as_json: bool) -> bool:
    """On a terminal, show the lines and ask; elsewhere a confirmation must come as --yes or --confirm."""
    if as_json or not _interactive():
        return False
    _print_plan(plan, "will forget")
    return click.confirm(f"Forget these {plan.line_count} line(s) for good?", default=False)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _not_applied(plan: ForgetPlan, again: str, *, dry_run: bool, changed: bool, as_json: bool) -> int:
    """``again``: the command that forgets exactly these lines, as it runs from here."""
    if as_json:
        echo_json({**plan.to_dict(), "dryRun": dry_run, "applied": False, "action": "changed" if changed else "confirm",
                   "confirmWith": again})  # fmt: skip
        return 0 if dry_run and not changed else 1
    if dry_run or changed or not _interactive():  # (a terminal's prompt has shown the lines already)
        _print_plan(plan, "would forget")
    if changed:
        click.echo("mdrecall: the lines this target selects are not the ones that token names (memory changed "
                   "since); nothing was forgotten", err=True)  # fmt: skip
    if dry_run and not changed:
        click.echo(f"to forget exactly these lines: {again}")
        return 0
    click.echo(f"nothing forgotten yet; to forget exactly these lines: {again} (or --yes)", err=True)
    return 1


def _print_plan(plan: ForgetPlan, verb: str) -> None:
    click.echo(f"{verb} {plan.line_count} line(s) in {len(plan.selections)} file(s):")
    for selection in plan.selections:
        whole = " (the whole file)" if selection.whole and selection.kind != "ltm" else ""
        click.echo(f"  {selection.path}{whole}")
        for line in selection.lines:
            click.echo(f"    {line.line:>5}  {line.shown}")
    if plan.leftovers:
        click.echo("  and copies no file holds any more: " + "; ".join(plan.leftovers))
    _warnings(plan.warnings)


def _warnings(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _print_report(report: ForgetReport) -> None:
    _print_plan(report.plan, "forgot")
    click.echo("removed from:")
    for store in report.stores:
        click.echo(f"  {store.store:<13} {store.location}: {store.describe()}")
    for failure in report.failures:
        click.echo(f"mdrecall: not done: {failure}", err=True)
    _warnings(report.warnings)
    if report.remaining:
        click.echo(f"mdrecall: copies still found in {len(report.remaining)} place(s):", err=True)
        for found in report.remaining:
            click.echo(f"  {found.file}: {found.needle[:80]!r}", err=True)
    elif report.verified:
        click.echo(f"verified: no copy left in the {report.checked_files} file(s) read ({report.checked_bytes / 2**20:.1f} MiB)")
