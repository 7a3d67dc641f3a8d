"""Staging, review, and writing promotions into MEMORY.md: rehydration, idempotence, budget, atomicity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dreamhelpers import DAILY, at, hit

from mdrecall.dreaming import RecallStore, apply, list_candidates, record_recalls, stage
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.queue import parse_queue
from writers import Appender

CFG = {"timezone": "UTC"}
PG = "Postgres 16 runs on db-2, port 5433."
ACME = "Acme wants the delivery by June 3; contact is Dana Whitfield."
PG_QUERIES = ["postgres port", "which port does postgres listen on", "postgres on db-2"]


def recall_month(ws: Path, cfg: dict = CFG) -> None:
    """The Postgres fact: 3 days, 3 queries. The Acme fact: once."""
    for day, query in enumerate(PG_QUERIES):
        record_recalls(ws, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=cfg)
    record_recalls(ws, "acme delivery date", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=2), config=cfg)


NOW = at(days=2, hours=14)  # the night of the third recall


def approve_all(ws: Path) -> None:
    path = queue_path(ws)
    path.write_text(path.read_text(encoding="utf-8").replace("- [ ] ", "- [x] "), encoding="utf-8")


def snapshot(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def test_candidates_rank_the_recurring_fact_only(workspace: Path) -> None:
    recall_month(workspace)
    (candidate,) = list_candidates(workspace, CFG, NOW)
    assert candidate.entry.snippet == PG and candidate.passed
    everything = list_candidates(workspace, CFG, NOW, include_failing=True)
    acme = next(ev for ev in everything if ev.entry.snippet == ACME)
    assert not acme.passed and any("minRecallCount" in f for f in acme.failures)


def test_stage_approve_apply(workspace: Path) -> None:
    recall_month(workspace)
    staged = stage(workspace, CFG, NOW)
    assert [i.text for i in staged.added] == [f"Infra: {PG}"]
    queue = parse_queue(queue_path(workspace).read_text(encoding="utf-8"))
    assert [(i.status, i.text) for i in queue.items] == [("pending", f"Infra: {PG}")]
    # Nothing is written until a person approves.
    assert apply(workspace, CFG, NOW).applied == []
    assert not (workspace / "MEMORY.md").exists()

    approve_all(workspace)
    result = apply(workspace, CFG, NOW)
    assert [p.text for p in result.applied] == [f"Infra: {PG}"]
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert memory.startswith("# Long-term memory\n\n## Promoted from short-term memory (2026-03-04)\n\n- Infra: ")
    line = next(l for l in memory.splitlines() if PG in l)
    assert re.fullmatch(
        r"- Infra: Postgres 16 runs on db-2, port 5433\. <!-- mdrecall:promoted id=[0-9a-f]{12} "
        r"source=memory/2026-03-02\.md:6-6 score=0\.\d\d recalls=3 -->", line)
    assert parse_queue(queue_path(workspace).read_text(encoding="utf-8")).items == []
    (entry,) = [e for e in RecallStore(workspace).load().entries.values() if e.snippet == PG]
    assert entry.promoted_at == "2026-03-04T23:00:00.000Z"
    # Promoted facts leave the candidate list.
    assert list_candidates(workspace, CFG, NOW) == []


def test_rerunning_promotion_changes_nothing(workspace: Path) -> None:
    recall_month(workspace)
    stage(workspace, CFG, NOW)
    approve_all(workspace)
    apply(workspace, CFG, NOW)
    before = snapshot(workspace)
    for later in (NOW, at(days=3)):
        assert apply(workspace, CFG, later, mode="passing").applied == []
        assert stage(workspace, CFG, later).added == []
    assert snapshot(workspace) == before


def test_auto_mode_writes_passing_candidates_without_review(workspace: Path) -> None:
    recall_month(workspace)
    result = apply(workspace, {**CFG, "autoApply": True}, NOW)
    assert result.mode == "passing" and [p.text for p in result.applied] == [f"Infra: {PG}"]
    assert ACME not in (workspace / "MEMORY.md").read_text(encoding="utf-8")


def test_edited_note_is_promoted_as_it_reads_now(workspace: Path) -> None:
    recall_month(workspace)
    note = workspace / "memory/2026-03-02.md"
    note.write_text("# Moved\n\nA new first paragraph.\n\n" + note.read_text(encoding="utf-8").replace("db-2", "db-3"),
                    encoding="utf-8")
    result = apply(workspace, CFG, NOW, mode="passing")
    (item,) = result.applied
    assert item.text == "Infra: Postgres 16 runs on db-3, port 5433."
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert "db-2" not in memory.replace("memory/2026-03-02.md", "")
    assert "source=memory/2026-03-02.md:10-10" in memory  # the fact's current line


def test_rewritten_or_deleted_text_is_never_promoted(workspace: Path) -> None:
    recall_month(workspace)
    note = workspace / "memory/2026-03-02.md"
    note.write_text(note.read_text(encoding="utf-8").replace(PG, "We dropped the database idea entirely."), encoding="utf-8")
    result = apply(workspace, CFG, NOW, mode="passing")
    assert result.applied == [] and [d.reason for d in result.dropped] == [
        "text deleted or rewritten in its note since it was recalled"]
    assert not (workspace / "MEMORY.md").exists()

    note.unlink()
    recall_month(workspace)  # more searches cannot resurrect it: the note is gone
    assert apply(workspace, CFG, NOW, mode="passing").applied == []
    assert not (workspace / "MEMORY.md").exists()


def test_reviewer_edits_and_rejections(workspace: Path) -> None:
    recall_month(workspace)
    for day, query in enumerate(["acme deadline", "when does acme want delivery", "dana whitfield contact"]):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=CFG)
    stage(workspace, CFG, NOW)
    path = queue_path(workspace)
    text = path.read_text(encoding="utf-8")
    text = text.replace(f"- [ ] Infra: {PG}", "- [x] Postgres 16 lives on db-2\n  (port 5433, not the default).")
    text = text.replace(f"- [ ] {ACME}", f"- [-] {ACME}")  # the heading is not repeated: the text names Acme
    path.write_text(text, encoding="utf-8")
    result = apply(workspace, CFG, NOW)
    assert [p.text for p in result.applied] == ["Postgres 16 lives on db-2 (port 5433, not the default)."]
    assert result.applied[0].edited
    assert [r.text for r in result.rejected] == [ACME]
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert "not the default" in memory and "Acme" not in memory
    # A rejected fact is not staged again, however often it is recalled.
    record_recalls(workspace, "acme contact person", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=3), config=CFG)
    assert stage(workspace, CFG, at(days=3, hours=14)).added == []


def test_budget_is_never_exceeded(workspace: Path) -> None:
    recall_month(workspace)
    filler = "# Long-term memory\n\n" + "".join(f"- Existing fact number {i}.\n" for i in range(20))
    (workspace / "MEMORY.md").write_text(filler, encoding="utf-8")
    cfg = {**CFG, "memoryMaxChars": len(filler) + 60}
    stage(workspace, cfg, NOW)
    approve_all(workspace)
    result = apply(workspace, cfg, NOW)
    assert result.applied == [] and len(result.refused) == 1
    assert "would grow MEMORY.md to" in result.refused[0].reason
    assert "dreaming.memoryMaxChars" in result.messages[0]
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == filler
    # Still approved in the queue, so raising the budget later applies it.
    assert [i.status for i in parse_queue(queue_path(workspace).read_text(encoding="utf-8")).items] == ["approved"]
    result = apply(workspace, {**CFG, "memoryMaxChars": 20_000}, NOW)
    assert len(result.applied) == 1


def test_memory_file_already_over_budget_refuses_everything(workspace: Path) -> None:
    recall_month(workspace)
    big = "# Long-term memory\n\n" + "x" * 900 + "\n"
    (workspace / "MEMORY.md").write_text(big, encoding="utf-8")
    result = apply(workspace, {**CFG, "memoryMaxChars": 800}, NOW, mode="passing")
    assert result.applied == [] and result.refused[0].reason == "MEMORY.md is already over its budget"
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == big


def test_facts_already_in_memory_are_reconciled_not_duplicated(workspace: Path) -> None:
    recall_month(workspace)
    (workspace / "MEMORY.md").write_text(f"# Memory\n\n- Infra: {PG}\n", encoding="utf-8")
    result = apply(workspace, CFG, NOW, mode="passing")
    assert result.applied == [] and [r.reason for r in result.reconciled] == ["already in MEMORY.md"]
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == f"# Memory\n\n- Infra: {PG}\n"
    assert all(e.promoted_at for e in RecallStore(workspace).load().entries.values() if e.snippet == PG)


def test_one_section_per_day(workspace: Path) -> None:
    recall_month(workspace)
    (workspace / "MEMORY.md").write_text("# Memory\n\n## People\n\n- Dana is the Acme contact.\n", encoding="utf-8")
    apply(workspace, CFG, NOW, mode="passing")
    for day, query in enumerate(["kestrel cluster", "staging cluster name", "what is kestrel"]):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day, hours=1), config=CFG)
    apply(workspace, CFG, NOW, mode="passing")
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert memory.count("## Promoted from short-term memory (2026-03-04)") == 1
    section = memory.split("## Promoted from short-term memory (2026-03-04)")[1]
    assert section.index("Postgres") < section.index("kestrel")
    assert memory.startswith("# Memory\n\n## People\n\n- Dana is the Acme contact.\n\n## Promoted")


def test_writes_are_atomic_and_keep_the_file_mode(workspace: Path) -> None:
    recall_month(workspace)
    memory = workspace / "MEMORY.md"
    memory.write_text("# Memory\n", encoding="utf-8")
    memory.chmod(0o640)
    apply(workspace, CFG, NOW, mode="passing")
    assert memory.stat().st_mode & 0o777 == 0o640
    leftovers = [p.name for p in workspace.rglob("*.tmp")]
    assert leftovers == []


def test_dry_run_writes_nothing(workspace: Path) -> None:
    recall_month(workspace)
    before = snapshot(workspace)
    assert len(apply(workspace, CFG, NOW, mode="passing", dry_run=True).applied) == 1
    assert len(stage(workspace, CFG, NOW, dry_run=True).added) == 1
    assert snapshot(workspace) == before


@pytest.mark.parametrize("approved", [True, False])
def test_long_candidates_need_a_person(workspace: Path, approved: bool) -> None:
    long_fact = "Runbook: " + ", ".join(f"step {i} restarts the kestrel worker pool" for i in range(12)) + "."
    (workspace / "memory/2026-03-03.md").write_text(f"- {long_fact}\n", encoding="utf-8")
    for day, query in enumerate(["kestrel runbook", "restart kestrel workers", "kestrel worker pool steps"]):
        record_recalls(workspace, query, [hit("memory/2026-03-03.md", 1, 1, 0.9)], at(days=day), config=CFG)
    auto = apply(workspace, CFG, NOW, mode="passing")
    assert auto.applied == [] and "maxCandidateChars" in auto.refused[0].reason
    (item,) = stage(workspace, CFG, NOW).added
    assert "shorten it before approving" in item.notes[0]
    if approved:
        path = queue_path(workspace)
        edited = re.sub(r"^- \[ \] Runbook:.*$", "- [x] Kestrel runbook: restart the worker pool step by step.",
                        path.read_text(encoding="utf-8"), flags=re.M)
        path.write_text(edited, encoding="utf-8")
        assert [p.text for p in apply(workspace, CFG, NOW).applied] == ["Kestrel runbook: restart the worker pool step by step."]


def test_transcript_facts_are_promoted_without_role_prefix(workspace: Path) -> None:
    import json

    transcript = workspace / ".openclaw/sessions/s1/transcripts/t1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(json.dumps({"role": "user", "content": "The office wifi password rotates every Monday."}) + "\n",
                          encoding="utf-8")
    path = ".openclaw/sessions/s1/transcripts/t1.jsonl"
    for day, query in enumerate(["wifi password", "when does the wifi password change", "office wifi rotation"]):
        record_recalls(workspace, query, [hit(path, 1, 1, 0.8, source="sessions")], at(days=day), config=CFG)
    (item,) = apply(workspace, CFG, NOW, mode="passing").applied
    assert item.text == "The office wifi password rotates every Monday."
    assert f"source={path}:1-1" in (workspace / "MEMORY.md").read_text(encoding="utf-8")


def test_lines_appended_during_promotion_survive(tmp_path: Path) -> None:
    """25 promotions, each while another process appends to MEMORY.md as fast as it can."""
    losses = []
    for run in range(25):
        ws = tmp_path / f"ws{run}"
        (ws / "memory").mkdir(parents=True)
        (ws / "memory/2026-03-02.md").write_text(DAILY, encoding="utf-8")
        recall_month(ws)
        memory = ws / "MEMORY.md"
        memory.write_text("# Memory\n\n## People\n\n- Dana is the Acme contact.\n", encoding="utf-8")
        with Appender(memory) as appender:
            appender.wait_started()
            result = apply(ws, CFG, NOW, mode="passing")
            appender.stop()
        text = memory.read_text(encoding="utf-8")
        assert [p.text for p in result.applied] == [f"Infra: {PG}"] and f"Infra: {PG}" in text
        assert text.startswith("# Memory\n\n## People\n\n- Dana is the Acme contact.\n")
        losses.append(len(appender.lost(text)))
    assert losses == [0] * 25


def test_a_symlinked_memory_file_stays_a_link_and_its_target_is_promoted_into(workspace: Path) -> None:
    recall_month(workspace)
    notes = workspace.parent / "shared-notes"
    notes.mkdir()
    target = notes / "long-term.md"
    target.write_text("# Memory\n", encoding="utf-8")
    (workspace / "MEMORY.md").symlink_to(target)
    result = apply(workspace, CFG, NOW, mode="passing")
    assert (workspace / "MEMORY.md").is_symlink() and (workspace / "MEMORY.md").resolve() == target
    assert result.applied and f"Infra: {PG}" in target.read_text(encoding="utf-8")
    assert sorted(p.name for p in notes.iterdir()) == ["long-term.md"]


def test_a_review_made_while_staging_is_kept(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue is a file people edit: an approval saved during a run is merged, not overwritten."""
    import mdrecall.dreaming.promotion as promotion

    recall_month(workspace)
    stage(workspace, CFG, NOW)
    for day, query in [(3, "when is acme due"), (4, "acme contact person")]:
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=CFG)
    real = promotion.write_markdown

    def review_then_write(path: Path, new: str, *, base: str | None) -> object:
        approve_all(workspace)  # the reviewer saves just before our write
        return real(path, new, base=base)

    monkeypatch.setattr(promotion, "write_markdown", review_then_write)
    assert [i.text for i in stage(workspace, CFG, at(days=4, hours=14)).added] == [ACME]
    items = parse_queue(queue_path(workspace).read_text(encoding="utf-8")).items
    assert [(i.status, i.text) for i in items] == [("approved", f"Infra: {PG}"), ("pending", ACME)]
