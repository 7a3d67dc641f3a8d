"""``mdrecall dream``: one light → deep pass over the recall store, then exit (cron-friendly).

Light: tidy the store. Entries recalled within ``lightLookbackDays`` are checked against their live
notes: a fact that moved gets its new lines, a fact whose text was deleted or rewritten (or whose note
is gone) is forgotten, and contaminated entries are removed. Unlike OpenClaw, the light phase does not
inject synthetic "daily" recalls for every line of recent notes: promotion rests on real searches only
(synthetic signals were the cause of OpenClaw issues #64068 and #92706).

Deep: write approved queue items (and every passing candidate when ``autoApply`` is on) into MEMORY.md,
then stage the remaining passing candidates for review. Everything happens under the store lock.

``dry_run`` computes the same report and writes nothing (except the report file, when one is asked for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mdrecall.dreaming.clock import age_days, ensure_aware, from_iso, to_iso
from mdrecall.dreaming.config import dreaming_config, sessions_dir
from mdrecall.dreaming.contamination import REPORT_MARKER, is_contaminated
from mdrecall.dreaming.paths import is_short_term, memory_file_path, queue_path
from mdrecall.dreaming.promotion import (
    ApplyResult,
    Skipped,
    StageResult,
    _apply_into,
    _stage_into,
    read_queue_text,
    rehydrate,
    write_queue,
)
from mdrecall.dreaming.recording import read_source_blocks
from mdrecall.dreaming.scoring import rank
from mdrecall.dreaming.store import RecallStore
from mdrecall.markdown_write import read_markdown, write_markdown


@dataclass
class LightReport:
    entries: int = 0
    checked: int = 0
    moved: int = 0
    forgotten: list[Skipped] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "checked": self.checked,
            "moved": self.moved,
            "forgotten": [s.to_dict() for s in self.forgotten],
        }


@dataclass
class DreamReport:
    workspace: Path
    started_at: str
    dry_run: bool
    light: LightReport
    ranked: int = 0
    passing: int = 0
    apply: ApplyResult | None = None
    stage: StageResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace": str(self.workspace),
            "startedAt": self.started_at,
            "dryRun": self.dry_run,
            "light": self.light.to_dict(),
            "deep": {
                "ranked": self.ranked,
                "passing": self.passing,
                "apply": self.apply.to_dict() if self.apply else None,
                "stage": self.stage.to_dict() if self.stage else None,
            },
        }

    def to_markdown(self) -> str:
        tag = f" <!-- {REPORT_MARKER} -->"
        lines = [f"# Dream report ({self.started_at}){' — dry run, nothing written' if self.dry_run else ''}",
                 f"<!-- {REPORT_MARKER} -->", ""]
        lines += ["## Light", ""]
        lines.append(f"- Recall store: {self.light.entries} entries; {self.light.checked} re-read against their notes, "
                     f"{self.light.moved} moved, {len(self.light.forgotten)} forgotten.")
        for skipped in self.light.forgotten:
            lines.append(f"  - forgot `{skipped.key}`: {skipped.reason}{tag}")
        lines += ["", "## Deep", ""]
        lines.append(f"- Ranked {self.ranked} entries; {self.passing} pass the promotion thresholds.")
        if self.apply:
            a = self.apply
            lines.append(f"- Promoted {len(a.applied)} into MEMORY.md (mode: {a.mode}); "
                         f"MEMORY.md {a.memory_chars_before} → {a.memory_chars_after} characters.")
            for item in a.applied:
                lines.append(f"  - {item.text}{tag}")
            for label, group in (("already there", a.reconciled), ("dropped", a.dropped),
                                 ("refused", a.refused), ("rejected", a.rejected)):
                if group:
                    lines.append(f"- {label.capitalize()}: {len(group)}")
                    for s in group:
                        lines.append(f"  - `{s.key}`: {s.reason}{tag}")
            lines.extend(f"- {m}" for m in a.messages)
        if self.stage:
            staged = self.stage
            lines.append(f"- Staged {len(staged.added)} new candidate(s) for review in `{queue_path(self.workspace).relative_to(self.workspace)}` "
                         f"({staged.kept} already waiting).")
            for queued in staged.added:
                lines.append(f"  - {queued.text} (score {queued.score:.2f}, id `{queued.id}`){tag}")
            for skipped in staged.dropped:
                lines.append(f"  - not staged `{skipped.key}`: {skipped.reason}{tag}")
        return "\n".join(lines) + "\n"


def run_dream(
    workspace: Path | str,
    config: Any = None,
    now: datetime | None = None,
    *,
    dry_run: bool = False,
    report_path: Path | str | None = None,
) -> DreamReport:
    workspace = Path(workspace)
    cfg = dreaming_config(config)
    now = ensure_aware(now)
    sdir = sessions_dir(config)
    report = DreamReport(workspace, to_iso(now), dry_run, LightReport())
    store = RecallStore(workspace, cfg)
    if not cfg.enabled:
        return report
    with store.update(now, dry_run=dry_run) as state:
        light = report.light
        light.entries = len(state.entries)
        for entry in list(state.entries.values()):
            if entry.promoted_at:
                continue
            if is_contaminated(entry.snippet) or not is_short_term(entry.path, entry.source, track_sessions=cfg.trackSessions):
                light.forgotten.append(Skipped(entry.key, "not short-term material (dreaming output or a long-term file)"))
                del state.entries[entry.key]
                continue
            if age_days(now, from_iso(entry.last_recalled_at)) > cfg.lightLookbackDays:
                continue
            light.checked += 1
            located = rehydrate(workspace, entry, sdir)
            if located is None:
                gone = read_source_blocks(workspace, entry.source, entry.path, sdir) is None
                reason = "its note was deleted" if gone else "its text was deleted or rewritten"
                light.forgotten.append(Skipped(entry.key, reason, entry.snippet))
                del state.entries[entry.key]
                continue
            if located.status == "exact" and (located.start_line, located.end_line) != (entry.start_line, entry.end_line):
                entry.start_line, entry.end_line = located.start_line, located.end_line
                light.moved += 1

        evaluations = rank(state.entries.values(), now, cfg, include_failing=True)
        report.ranked = len(evaluations)
        report.passing = sum(1 for ev in evaluations if ev.passed)

        queue, queue_base = read_queue_text(workspace)
        report.apply = ApplyResult(memory_file_path(workspace), "passing" if cfg.autoApply else "approved", dry_run)
        _apply_into(workspace, cfg, now, state, queue, report.apply, sdir)
        report.stage = StageResult(queue_path(workspace), dry_run)
        _stage_into(workspace, cfg, now, state, queue, report.stage, sdir)
        if not dry_run:
            write_queue(workspace, queue, queue_base)
    if report_path is not None:
        write_markdown(report_path, report.to_markdown(), base=read_markdown(report_path))
    return report
