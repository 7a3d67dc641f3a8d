"""``mdrecall promote`` and ``mdrecall dream`` (registered by the dreaming plugin).

promote                      ranked candidates that pass the thresholds (``--all``: every entry, with why not)
promote --explain ID         one entry's component breakdown and gates (full key, text id or a unique prefix)
promote --stage              add passing candidates to memory/.dreams/promotion-queue.md for review
promote --apply              write approved queue items (plus all passing ones with autoApply or --all-passing)
dream [--dry-run] [--report FILE]   one light → deep pass, for cron

Exit codes: 0 done; 1 an operation failed or --explain found nothing; 2 bad usage or config;
3 some approved candidates were refused (MEMORY.md budget), so a cron job notices.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from mdrecall.cli.options import command_hint, json_option, load_cli_config, workspace_options, workspace_path
from mdrecall.config import DreamingConfig, MemoryConfig
from mdrecall.dreaming.clock import ensure_aware
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.promotion import apply, explain, list_candidates, stage
from mdrecall.dreaming.scoring import WEIGHTS, Evaluation
from mdrecall.dreaming.sweep import run_dream

F = TypeVar("F", bound=Callable[..., Any])

EXIT_REFUSED = 3


def _now_option(func: F) -> F:
    # Replaying a store at a fixed time (tests, investigations); not for everyday use.
    return click.option("--now", "now_text", default=None, hidden=True)(func)


def _load(workspace: str, overrides: tuple[str, ...], now_text: str | None) -> tuple[Path, MemoryConfig, DreamingConfig, datetime]:
    root = workspace_path(workspace).resolve()
    memory_config = load_cli_config(workspace, overrides)
    now = ensure_aware(datetime.fromisoformat(now_text.replace("Z", "+00:00")) if now_text else None)
    return root, memory_config, memory_config.dreaming, now




def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_table(evaluations: list[Evaluation], cfg: DreamingConfig, show_failing: bool) -> None:
    passing = sum(1 for ev in evaluations if ev.passed)
    click.echo(
        f"{passing} candidate(s) pass (minScore {cfg.minScore:g}, minRecallCount {cfg.minRecallCount}, "
        f"minUniqueQueries {cfg.minUniqueQueries}, minRecallDays {cfg.minRecallDays}, maxAgeDays {cfg.maxAgeDays:g})"
    )
    if not evaluations:
        return
    click.echo(f"{'':>3} {'score':>5} {'rec':>3} {'qry':>3} {'day':>3}  {'id':<12}  {'source':<28}  text")
    for i, ev in enumerate(evaluations, 1):
        e = ev.entry
        source = f"{e.path}:{e.start_line}-{e.end_line}"
        click.echo(f"{i:>3} {ev.score:5.3f} {e.signal_count:>3} {e.unique_queries:>3} {len(e.recall_days):>3}  "
              f"{e.claim_hash:<12}  {_short(source, 28):<28}  {_short(e.snippet, 60)}")
        if show_failing and ev.failures:
            click.echo(f"{'':>10}not promoted: {'; '.join(ev.failures)}")


def _print_explain(ev: Evaluation, cfg: DreamingConfig) -> None:
    e = ev.entry
    days = e.recall_days
    click.echo(e.key)
    click.echo(f"  text:      {e.snippet}")
    if e.heading:
        click.echo(f"  heading:   {e.heading}")
    click.echo(f"  source:    {e.path}:{e.start_line}-{e.end_line} ({e.source}{', passage' if e.passage else ''})")
    click.echo(f"  signals:   {e.signal_count} (recalls {e.recall_count}, daily {e.daily_count}, grounded {e.grounded_count})")
    click.echo(f"  queries:   {e.unique_queries} distinct")
    click.echo(f"  days:      {len(days)}" + (f" ({days[0]} … {days[-1]})" if days else ""))
    click.echo(f"  scores:    avg raw {e.total_score / max(1, e.signal_count):.3f}, max raw {e.max_score:.3f}, "
          f"avg relative {ev.components.relevance:.3f}")
    click.echo(f"  last seen: {e.last_recalled_at} ({ev.age_days:.1f} days ago)")
    click.echo(f"  tags:      {', '.join(e.concept_tags) or '-'}")
    for label, value in (("promoted", e.promoted_at), ("staged", e.staged_at), ("rejected", e.rejected_at)):
        if value:
            click.echo(f"  {label}:  {value}")
    click.echo(f"  {'component':<14} {'value':>6} {'weight':>6} {'adds':>6}")
    for name, component in ev.components.as_dict().items():
        click.echo(f"  {name:<14} {component:6.3f} {WEIGHTS[name]:6.2f} {WEIGHTS[name] * component:6.3f}")
    click.echo(f"  {'score':<14} {'':>6} {'':>6} {ev.score:6.3f}   (minScore {cfg.minScore:g})")
    if ev.passed:
        click.echo("  verdict:   passes every threshold")
    else:
        click.echo("  verdict:   not promoted: " + "; ".join(ev.failures))


@click.command("promote")
@workspace_options
@json_option
@_now_option
@click.option("--explain", "explain_id", metavar="ID", help="show one entry's score components and gates")
@click.option("--stage", "do_stage", is_flag=True, help="add passing candidates to the review queue")
@click.option("--apply", "do_apply", is_flag=True, help="write approved candidates into MEMORY.md")
@click.option("--all-passing", is_flag=True,
              help="with --apply: also write every passing candidate, approved or not (as dreaming.autoApply)")
@click.option("--all", "show_all", is_flag=True, help="list every entry, including those below the thresholds")
@click.option("--limit", type=int, default=None, help="list at most this many (default: dreaming.limit)")
@click.option("--dry-run", is_flag=True, help="show what --stage/--apply would do; write nothing")
def promote(
    workspace: str,
    overrides: tuple[str, ...],
    as_json: bool,
    now_text: str | None,
    explain_id: str | None,
    do_stage: bool,
    do_apply: bool,
    all_passing: bool,
    show_all: bool,
    limit: int | None,
    dry_run: bool,
) -> int:
    """Review and promote recurring short-term memories into MEMORY.md."""
    workspace_root, memory_config, cfg, now = _load(workspace, overrides, now_text)
    if explain_id:
        found = explain(workspace_root, explain_id, memory_config, now)
        if as_json:
            click.echo(json.dumps([ev.to_dict() for ev in found], ensure_ascii=False, indent=2))
        elif not found:
            click.echo(f"no recall entry matches {explain_id!r}", err=True)
        else:
            for ev in found:
                _print_explain(ev, cfg)
        return 0 if found else 1

    if not (do_stage or do_apply):
        evaluations = list_candidates(workspace_root, memory_config, now, include_failing=show_all)
        evaluations = evaluations[: limit or (None if show_all else cfg.limit)]
        if as_json:
            click.echo(json.dumps([ev.to_dict() for ev in evaluations], ensure_ascii=False, indent=2))
        else:
            _print_table(evaluations, cfg, show_all)
        return 0

    out: dict[str, Any] = {}
    code = 0
    if do_apply:
        mode: Literal["approved", "passing"] = "passing" if (all_passing or cfg.autoApply) else "approved"
        result = apply(workspace_root, memory_config, now, mode=mode, dry_run=dry_run)
        out["apply"] = result.to_dict()
        if result.refused and any("MEMORY.md" in s.reason for s in result.refused):
            code = EXIT_REFUSED
        nothing = not (result.applied or result.refused or result.rejected or result.dropped or result.reconciled)
        if not as_json and nothing and mode == "approved":
            click.echo(f"nothing approved yet: mark items [x] in {queue_path(workspace_root).relative_to(workspace_root)}")
        elif not as_json:
            verb = "would write" if dry_run else "wrote"
            click.echo(f"{verb} {len(result.applied)} fact(s) to {result.memory_path.name} "
                  f"({result.memory_chars_before} → {result.memory_chars_after} characters, budget {cfg.memoryMaxChars})")
            for item in result.applied:
                click.echo(f"  + {_short(item.text, 100)}")
            for label, group in (("already there", result.reconciled), ("dropped", result.dropped),
                                 ("refused", result.refused), ("rejected", result.rejected)):
                for s in group:
                    click.echo(f"  {label}: {_short(s.text, 60) or s.key} — {s.reason}")
            for message in result.messages:
                click.echo(message, err=True)
    if do_stage:
        staged = stage(workspace_root, memory_config, now, dry_run=dry_run)
        out["stage"] = staged.to_dict()
        if not as_json:
            rel = queue_path(workspace_root).relative_to(workspace_root)
            verb = "would stage" if dry_run else "staged"
            click.echo(f"{verb} {len(staged.added)} new candidate(s) in {rel} ({staged.kept} already waiting)")
            for queued in staged.added:
                click.echo(f"  [ ] {_short(queued.text, 90)}  (score {queued.score:.2f}, id {queued.id})")
            for s in staged.dropped:
                click.echo(f"  not staged: {_short(s.text, 60)} — {s.reason}")
            if staged.added or staged.kept:
                then = command_hint(workspace, overrides, "promote", "--apply")
                click.echo(f"review it: mark [x] to approve or [-] to reject, edit text freely, then `{then}`")
    if as_json:
        click.echo(json.dumps(out, ensure_ascii=False, indent=2))
    return code


@click.command("dream")
@workspace_options
@json_option
@_now_option
@click.option("--dry-run", is_flag=True, help="report what would happen; write nothing")
@click.option("--report", "report_file", metavar="FILE", default=None, help="also write a Markdown report of the pass to FILE")
def dream(workspace: str, overrides: tuple[str, ...], as_json: bool, now_text: str | None, dry_run: bool, report_file: str | None) -> int:
    """One promotion pass, then exit: refresh recalled facts, promote the approved ones, stage the rest (cron-friendly)."""
    workspace_root, memory_config, cfg, now = _load(workspace, overrides, now_text)
    report = run_dream(workspace_root, memory_config, now, dry_run=dry_run, report_path=report_file)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(report.to_markdown(), nl=False)
    if not cfg.enabled:
        click.echo("dreaming is disabled (dreaming.enabled: false); nothing done", err=True)
    refused = report.apply is not None and any("MEMORY.md" in s.reason for s in report.apply.refused)
    return EXIT_REFUSED if refused else 0
