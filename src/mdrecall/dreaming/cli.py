"""``mdrecall promote`` and ``mdrecall dream``.

promote                      ranked candidates that pass the thresholds (``--all``: every entry, with why not)
promote --explain ID         one entry's component breakdown and gates (full key, text id or a unique prefix)
promote --stage              add passing candidates to memory/.dreams/promotion-queue.md for review
promote --apply              write approved queue items (plus all passing ones with autoApply or --all-passing)
dream [--dry-run] [--report FILE]   one light → deep pass, for cron

Exit codes: 0 done; 1 an operation failed or --explain found nothing; 2 bad usage or config;
3 some approved candidates were refused (MEMORY.md budget), so a cron job notices.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from mdrecall.dreaming.clock import ensure_aware
from mdrecall.dreaming.config import DreamingConfig, dreaming_config
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.promotion import apply, explain, list_candidates, stage
from mdrecall.dreaming.scoring import WEIGHTS, Evaluation
from mdrecall.dreaming.sweep import run_dream

EXIT_REFUSED = 3


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-w", "--workspace", default=os.environ.get("MDRECALL_WORKSPACE", "."),
        help="agent workspace (default: $MDRECALL_WORKSPACE or the current directory)",
    )
    parser.add_argument(
        "-c", "--config", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key, e.g. -c dreaming.minScore=0.5 (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    # Replaying a store at a fixed time (tests, investigations); not for everyday use.
    parser.add_argument("--now", default=None, help=argparse.SUPPRESS)


def register_cli(subparsers: Any) -> None:
    p = subparsers.add_parser("promote", help="review and promote recurring short-term memories into MEMORY.md")
    _add_common(p)
    p.add_argument("--explain", metavar="ID", help="show one entry's score components and gates")
    p.add_argument("--stage", action="store_true", help="add passing candidates to the review queue")
    p.add_argument("--apply", action="store_true", help="write approved candidates into MEMORY.md")
    p.add_argument("--all-passing", action="store_true",
                   help="with --apply: also write every passing candidate, approved or not (as dreaming.autoApply)")
    p.add_argument("--all", action="store_true", help="list every entry, including those below the thresholds")
    p.add_argument("--limit", type=int, default=None, help="list at most this many (default: dreaming.limit)")
    p.add_argument("--dry-run", action="store_true", help="show what --stage/--apply would do; write nothing")
    p.set_defaults(func=cmd_promote)

    p = subparsers.add_parser("dream", help="one light → deep promotion sweep (cron-friendly)")
    _add_common(p)
    p.add_argument("--dry-run", action="store_true", help="report what would happen; write nothing")
    p.add_argument("--report", metavar="FILE", help="also write a Markdown report of the pass to FILE")
    p.set_defaults(func=cmd_dream)


def _load(args: argparse.Namespace) -> tuple[Path, Any, DreamingConfig, datetime]:
    from mdrecall.config import load_config

    workspace = Path(args.workspace).expanduser().resolve()
    if not workspace.is_dir():
        from mdrecall.errors import MdrecallError

        raise MdrecallError(f"workspace {workspace} is not a directory")
    overrides = _overrides(args.config)
    memory_config = load_config(workspace, overrides)
    cfg = dreaming_config(memory_config)
    now = ensure_aware(datetime.fromisoformat(args.now.replace("Z", "+00:00")) if args.now else None)
    return workspace, memory_config, cfg, now


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    from mdrecall.cli import parse_overrides

    return parse_overrides(items)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_table(evaluations: list[Evaluation], cfg: DreamingConfig, show_failing: bool) -> None:
    passing = sum(1 for ev in evaluations if ev.passed)
    print(
        f"{passing} candidate(s) pass (minScore {cfg.minScore:g}, minRecallCount {cfg.minRecallCount}, "
        f"minUniqueQueries {cfg.minUniqueQueries}, minRecallDays {cfg.minRecallDays}, maxAgeDays {cfg.maxAgeDays:g})"
    )
    if not evaluations:
        return
    print(f"{'':>3} {'score':>5} {'rec':>3} {'qry':>3} {'day':>3}  {'id':<12}  {'source':<28}  text")
    for i, ev in enumerate(evaluations, 1):
        e = ev.entry
        source = f"{e.path}:{e.start_line}-{e.end_line}"
        print(f"{i:>3} {ev.score:5.3f} {e.signal_count:>3} {e.unique_queries:>3} {len(e.recall_days):>3}  "
              f"{e.claim_hash:<12}  {_short(source, 28):<28}  {_short(e.snippet, 60)}")
        if show_failing and ev.failures:
            print(f"{'':>10}not promoted: {'; '.join(ev.failures)}")


def _print_explain(ev: Evaluation, cfg: DreamingConfig) -> None:
    e = ev.entry
    days = e.recall_days
    print(e.key)
    print(f"  text:      {e.snippet}")
    if e.heading:
        print(f"  heading:   {e.heading}")
    print(f"  source:    {e.path}:{e.start_line}-{e.end_line} ({e.source}{', passage' if e.passage else ''})")
    print(f"  signals:   {e.signal_count} (recalls {e.recall_count}, daily {e.daily_count}, grounded {e.grounded_count})")
    print(f"  queries:   {e.unique_queries} distinct")
    print(f"  days:      {len(days)}" + (f" ({days[0]} … {days[-1]})" if days else ""))
    print(f"  scores:    avg raw {e.total_score / max(1, e.signal_count):.3f}, max raw {e.max_score:.3f}, "
          f"avg relative {ev.components.relevance:.3f}")
    print(f"  last seen: {e.last_recalled_at} ({ev.age_days:.1f} days ago)")
    print(f"  tags:      {', '.join(e.concept_tags) or '-'}")
    for label, value in (("promoted", e.promoted_at), ("staged", e.staged_at), ("rejected", e.rejected_at)):
        if value:
            print(f"  {label}:  {value}")
    print(f"  {'component':<14} {'value':>6} {'weight':>6} {'adds':>6}")
    for name, value in ev.components.as_dict().items():
        print(f"  {name:<14} {value:6.3f} {WEIGHTS[name]:6.2f} {WEIGHTS[name] * value:6.3f}")
    print(f"  {'score':<14} {'':>6} {'':>6} {ev.score:6.3f}   (minScore {cfg.minScore:g})")
    if ev.passed:
        print("  verdict:   passes every threshold")
    else:
        print("  verdict:   not promoted: " + "; ".join(ev.failures))


def cmd_promote(args: argparse.Namespace) -> int:
    workspace, memory_config, cfg, now = _load(args)
    if args.explain:
        found = explain(workspace, args.explain, memory_config, now)
        if args.json:
            print(json.dumps([ev.to_dict() for ev in found], ensure_ascii=False, indent=2))
        elif not found:
            print(f"no recall entry matches {args.explain!r}", file=sys.stderr)
        else:
            for ev in found:
                _print_explain(ev, cfg)
        return 0 if found else 1

    if not (args.stage or args.apply):
        evaluations = list_candidates(workspace, memory_config, now, include_failing=args.all)
        evaluations = evaluations[: args.limit or (None if args.all else cfg.limit)]
        if args.json:
            print(json.dumps([ev.to_dict() for ev in evaluations], ensure_ascii=False, indent=2))
        else:
            _print_table(evaluations, cfg, args.all)
        return 0

    out: dict[str, Any] = {}
    code = 0
    if args.apply:
        mode = "passing" if (args.all_passing or cfg.autoApply) else "approved"
        result = apply(workspace, memory_config, now, mode=mode, dry_run=args.dry_run)
        out["apply"] = result.to_dict()
        if result.refused and any("MEMORY.md" in s.reason for s in result.refused):
            code = EXIT_REFUSED
        nothing = not (result.applied or result.refused or result.rejected or result.dropped or result.reconciled)
        if not args.json and nothing and mode == "approved":
            print(f"nothing approved yet: mark items [x] in {queue_path(workspace).relative_to(workspace)}")
        elif not args.json:
            verb = "would write" if args.dry_run else "wrote"
            print(f"{verb} {len(result.applied)} fact(s) to {result.memory_path.name} "
                  f"({result.memory_chars_before} → {result.memory_chars_after} characters, budget {cfg.memoryMaxChars})")
            for item in result.applied:
                print(f"  + {_short(item.text, 100)}")
            for label, group in (("already there", result.reconciled), ("dropped", result.dropped),
                                 ("refused", result.refused), ("rejected", result.rejected)):
                for s in group:
                    print(f"  {label}: {_short(s.text, 60) or s.key} — {s.reason}")
            for message in result.messages:
                print(message, file=sys.stderr)
    if args.stage:
        staged = stage(workspace, memory_config, now, dry_run=args.dry_run)
        out["stage"] = staged.to_dict()
        if not args.json:
            rel = queue_path(workspace).relative_to(workspace)
            verb = "would stage" if args.dry_run else "staged"
            print(f"{verb} {len(staged.added)} new candidate(s) in {rel} ({staged.kept} already waiting)")
            for item in staged.added:
                print(f"  [ ] {_short(item.text, 90)}  (score {item.score:.2f}, id {item.id})")
            for s in staged.dropped:
                print(f"  not staged: {_short(s.text, 60)} — {s.reason}")
            if staged.added or staged.kept:
                print("review it: mark [x] to approve or [-] to reject, edit text freely, then `mdrecall promote --apply`")
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
    return code


def cmd_dream(args: argparse.Namespace) -> int:
    workspace, memory_config, cfg, now = _load(args)
    report = run_dream(workspace, memory_config, now, dry_run=args.dry_run, report_path=args.report)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(report.to_markdown())
    if not cfg.enabled:
        print("dreaming is disabled (dreaming.enabled: false); nothing done", file=sys.stderr)
    refused = report.apply is not None and any("MEMORY.md" in s.reason for s in report.apply.refused)
    return EXIT_REFUSED if refused else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (``python -m mdrecall.dreaming.cli``): the ``mdrecall`` command, which
    already carries these subcommands."""
    from mdrecall.cli import main as mdrecall_main

    return mdrecall_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
