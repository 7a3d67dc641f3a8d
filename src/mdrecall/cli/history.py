"""``mdrecall history "topic"``: the dated statements of one fact, oldest first, with citations,
marking which is current and which are superseded (docs/facts.md).

A history is longer than an answer: unless ``-c query.maxInjectedChars=...`` says otherwise, this
command lets its search return up to 16,000 characters of statements (an agent's answers keep 4,000).
"""

from __future__ import annotations

from datetime import datetime

import click

from mdrecall.cli.options import (
    as_of_option,
    echo_json,
    json_option,
    load_model,
    now_option,
    open_cli_manager,
    session_key_option,
    workspace_options,
)

#: The character budget of a history's search, unless configured.
HISTORY_CHARS = 16_000


@click.command("history")
@workspace_options
@click.argument("topic")
@click.option("-n", "max_results", type=click.IntRange(1, 50), default=20, show_default=True, help="most statements")
@click.option("--corpus", type=click.Choice(["memory", "sessions", "all"]), default="all", show_default=True,
              help="memory files, session transcripts, or both")  # fmt: skip
@session_key_option
@now_option
@as_of_option
@json_option
def history(
    workspace: str,
    overrides: tuple[str, ...],
    topic: str,
    max_results: int,
    corpus: str,
    session_key: str | None,
    now: datetime | None,
    as_of: datetime | None,
    as_json: bool,
) -> int:
    """The history of one fact: its statements in date order, current and superseded. Exit 1 when nothing matches."""
    from mdrecall.search.history import fact_history

    if not topic.strip():
        raise click.UsageError("TOPIC must not be empty: the fact to trace, e.g. 'where the database runs'")
    if not any("maxInjectedChars" in o for o in overrides):
        overrides = (*overrides, f"query.maxInjectedChars={HISTORY_CHARS}")
    with open_cli_manager(workspace, overrides) as manager:
        load_model(manager, quiet=as_json)
        sources = None if corpus == "all" else [corpus]
        found = fact_history(manager, topic, max_results=max_results, session_key=session_key, sources=sources,
                             as_of=as_of, now=now)  # fmt: skip
    if as_json:
        echo_json(found.to_dict())
        return 0 if found.statements else 1
    for warning in found.warnings:
        click.echo(f"note: {warning}", err=True)
    if not found.statements:
        click.echo(f"no statements found for {topic!r}" + (f": {found.reason}" if found.reason else ""), err=True)
        return 1
    when = f" as of {as_of.isoformat(timespec='minutes')}" if as_of else ""
    click.echo(f"History of {topic!r}{when}: {len(found.statements)} statement(s), oldest first")
    for s in found.statements:
        status = (
            f"superseded by {s.superseded_by}"
            if s.superseded_by
            else (f"possibly superseded (restated by {s.possibly_restated_by})" if s.possibly_restated_by else "current")
        )
        click.echo(f"\n{s.stated}  {s.citation}  [{status}]")
        for line in s.text.split("\n"):
            click.echo(f"    {line}")
    return 0
