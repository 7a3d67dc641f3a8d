"""Recording recalls through the real search path (open_manager, provider "none") and directly."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from dreamhelpers import at, hit

from mdrecall import open_manager
from mdrecall.config import parse_config
from mdrecall.dreaming import RecallStore, install_recall_tracking, record_grounding, record_recalls
from mdrecall.dreaming.paths import is_short_term
from mdrecall.errors import ConfigError

UTC = {"timezone": "UTC"}


def entries(ws: Path) -> dict[str, Any]:
    return {e.snippet: e for e in RecallStore(ws).load().entries.values()}


def test_every_search_records_its_short_term_hits(workspace: Path, manager_config: Callable[..., dict]) -> None:
    (workspace / "MEMORY.md").write_text("# Memory\n\n- Postgres port policy: never expose 5432.\n", encoding="utf-8")
    (workspace / "memory" / "infra.md").write_text("# Infra\n\n- Postgres backups go to port 5432.\n", encoding="utf-8")
    with open_manager(workspace, manager_config()) as m:
        first = m.search("postgres port", now=at())
        assert {r.path for r in first.results} == {"memory/2026-03-02.md", "MEMORY.md", "memory/infra.md"}
        second = m.search("which port does postgres listen on", now=at(days=1))
        m.search("acme delivery date", now=at(days=2))
    found = entries(workspace)
    pg = found["Postgres 16 runs on db-2, port 5433."]
    assert pg.recall_count == 2 and pg.unique_queries == 2 and pg.recall_days == ["2026-03-02", "2026-03-03"]
    assert pg.heading == "Infra" and (pg.start_line, pg.end_line) == (6, 6)
    # Relevance is each hit's score relative to the best hit of its search.
    expected = sum(
        next(r.score for r in resp.results if r.path == "memory/2026-03-02.md") / max(r.score for r in resp.results)
        for resp in (first, second)
    )
    assert pg.total_relevance == pytest.approx(expected)
    assert pg.total_score == pytest.approx(sum(r.score for resp in (first, second) for r in resp.results
                                               if r.path == "memory/2026-03-02.md"))
    assert found["Acme wants the delivery by June 3; contact is Dana Whitfield."].recall_count == 1
    # Only the facts the queries were about: not the other lines of the same chunk, and never the
    # long-term files (MEMORY.md, the evergreen topic note).
    assert set(found) == {"Postgres 16 runs on db-2, port 5433.", "Acme wants the delivery by June 3; contact is Dana Whitfield."}


def test_tracking_can_be_switched_off(workspace: Path, manager_config: Callable[..., dict]) -> None:
    with open_manager(workspace, manager_config(tracking=False)) as m:
        assert m.search("postgres port", now=at()).results
    assert not (workspace / "memory/.dreams").exists()


def test_bad_dreaming_config_fails_when_the_manager_opens(workspace: Path, manager_config: Callable[..., dict]) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'dreaming.minScores' \(did you mean 'minScore'\?\)"):
        open_manager(workspace, manager_config(minScores=0.5))
    with pytest.raises(ConfigError, match="dreaming.minScore"):
        open_manager(workspace, manager_config(minScore=2))
    with pytest.raises(ConfigError, match="unknown time zone"):
        open_manager(workspace, manager_config(timezone="Mars/Olympus"))


def test_listener_failure_never_breaks_search(workspace: Path, manager_config: Callable[..., dict]) -> None:
    store_dir = workspace / "memory/.dreams"
    store_dir.mkdir(parents=True)
    (store_dir / "short-term-recall.sqlite").mkdir()  # a directory where the store should be: writes fail
    with open_manager(workspace, manager_config()) as m:
        assert m.search("postgres port", now=at()).results
        m.flush()  # type: ignore[attr-defined]
        tracking = m.status().details["recallTracking"]
        assert tracking["recorded"] == 0 and tracking["queued"] == 0 and "cannot open the recall store" in tracking["lastError"]


def test_short_term_paths() -> None:
    assert is_short_term("memory/2026-03-02.md", "memory")
    assert is_short_term("memory/daily/2026-03-02-standup.md", "memory")
    assert is_short_term("./memory/2026-03-02.md", "memory")
    assert is_short_term(".openclaw/sessions/s1/transcripts/a.jsonl", "sessions")
    assert not is_short_term(".openclaw/sessions/s1/transcripts/a.jsonl", "sessions", track_sessions=False)
    for path in ("MEMORY.md", "memory/infra.md", "notes/2026-03-02.md", "memory/dreaming/2026-03-02.md",
                 "memory/.dreams/2026-03-02.md"):
        assert not is_short_term(path, "memory"), path


def test_same_query_same_day_counts_once_but_next_day_counts(workspace: Path) -> None:
    results = [hit("memory/2026-03-02.md", 1, 12, 0.9)]
    assert record_recalls(workspace, "Postgres port", results, at(), config=UTC).recorded == 1
    assert record_recalls(workspace, "postgres   PORT", results, at(hours=3), config=UTC).recorded == 0
    assert record_recalls(workspace, "postgres port", results, at(days=1), config=UTC).recorded == 1
    no_dedupe = {**UTC, "dedupeByQueryPerDay": False}
    assert record_recalls(workspace, "postgres port", results, at(days=1, hours=1), config=no_dedupe).recorded == 1
    assert entries(workspace)["Postgres 16 runs on db-2, port 5433."].recall_count == 3


def test_a_search_hit_and_its_json_shapes_record_the_same(workspace: Path) -> None:
    """SearchHit objects are read directly (not through to_dict): every shape records the same."""
    result = hit("memory/2026-03-02.md", 5, 7, 0.6, snippet="- Postgres 16 runs on db-2, port 5433.")
    result = replace(result, explanation={"keyword": {"terms": ["postgres"]}, "vector": {"cosine": 0.4}})
    recorded = []
    for shape in (result, result.to_dict(), result.to_dict(camel=True)):
        store = workspace / "memory" / ".dreams"
        shutil.rmtree(store, ignore_errors=True)
        record_recalls(workspace, "postgres port", [shape], at(), config=UTC)
        recorded.append({k: (e.snippet, e.start_line, e.end_line, e.max_score, e.total_relevance)
                         for k, e in RecallStore(workspace).load().entries.items()})
    assert recorded[0] and recorded[0] == recorded[1] == recorded[2]


def test_a_fact_without_concept_tags_is_tagged_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tagger runs on an entry's first signal and when its text changes, not on every recall
    of a fact that has no tags (it used to run again each time)."""
    from mdrecall.dreaming import concepts

    calls: list[str] = []
    real = concepts.concept_tags

    def counting(path: str, text: str, limit: int = concepts.MAX_TAGS) -> list[str]:
        calls.append(text)
        return real(path, text, limit)

    monkeypatch.setattr(concepts, "concept_tags", counting)
    (workspace / "memory" / "2026-03-05.md").write_text("- ok, done.\n", encoding="utf-8")
    results = [hit("memory/2026-03-05.md", 1, 1, 0.9)]
    for day in range(3):
        assert record_recalls(workspace, "was it done", results, at(days=day), config=UTC).recorded == 1
    (e,) = RecallStore(workspace).load().entries.values()
    assert e.recall_count == 3 and e.concept_tags == [] and calls == ["ok, done."]
    (workspace / "memory" / "2026-03-05.md").write_text("- ok, done: the billing-service runs on Kubernetes.\n", encoding="utf-8")
    record_recalls(workspace, "was it done", results, at(days=4), config=UTC)
    assert len(calls) == 2


def test_overlapping_chunks_of_one_search_count_once(workspace: Path) -> None:
    results = [hit("memory/2026-03-02.md", 1, 7, 0.9), hit("memory/2026-03-02.md", 5, 12, 0.7)]
    summary = record_recalls(workspace, "postgres port", results, at(), config=UTC)
    assert summary.recorded == 1
    pg = entries(workspace)["Postgres 16 runs on db-2, port 5433."]
    assert pg.recall_count == 1 and pg.max_score == pytest.approx(0.9)


def test_relevance_is_relative_to_the_best_hit(workspace: Path) -> None:
    (workspace / "memory" / "2026-03-03.md").write_text("- Kestrel staging moved to port 7000.\n", encoding="utf-8")
    results = [hit("MEMORY.md", 1, 3, 0.8), hit("memory/2026-03-03.md", 1, 1, 0.4)]
    record_recalls(workspace, "kestrel port", results, at(), config=UTC)
    e = entries(workspace)["Kestrel staging moved to port 7000."]
    assert e.total_score == pytest.approx(0.4) and e.total_relevance == pytest.approx(0.5)


def test_a_hit_sharing_no_word_with_the_query_is_kept_as_a_passage(workspace: Path) -> None:
    record_recalls(workspace, "which database engine do we operate", [hit("memory/2026-03-02.md", 5, 7, 0.6)], at(), config=UTC)
    (e,) = RecallStore(workspace).load().entries.values()
    assert e.passage and e.snippet == "Postgres 16 runs on db-2, port 5433.\nThe staging cluster is called kestrel."


def test_hits_on_a_changed_file_fall_back_to_the_snippet(workspace: Path) -> None:
    results = [hit("memory/2026-03-09.md", 3, 4, 0.7, snippet="- Vault token rotates every 30 days.\n- Misc line")]
    record_recalls(workspace, "vault token rotation", results, at(), config=UTC)
    (e,) = RecallStore(workspace).load().entries.values()
    assert e.snippet == "Vault token rotates every 30 days." and (e.start_line, e.end_line) == (3, 3)


def test_contaminated_text_is_never_recorded(workspace: Path) -> None:
    note = workspace / "memory" / "2026-03-04.md"
    note.write_text(
        "- Postgres 16 runs on db-2, port 5433. <!-- mdrecall:promoted id=0123456789ab source=memory/2026-03-02.md:6-6 -->\n"
        "- Candidate: Postgres port is 5433\n  - confidence: 0.62\n  - evidence: memory/2026-03-02.md:6-6\n"
        "  - recalls: 3\n  - status: staged\n",
        encoding="utf-8",
    )
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-04.md", 1, 6, 0.9)], at(), config=UTC)
    assert summary.recorded == 0
    assert summary.skipped.get("contaminated", 0) >= 1


def test_text_equal_to_a_promoted_fact_is_not_recorded_again(workspace: Path) -> None:
    store = RecallStore(workspace)
    with store.update(at()) as state:
        from mdrecall.dreaming.blocks import text_hash

        state.promoted_hashes.add(text_hash("Postgres 16 runs on db-2, port 5433."))
    # The agent copied the promoted fact, without its marker, into a later note.
    (workspace / "memory" / "2026-03-05.md").write_text("- Postgres 16 runs on db-2, port 5433.\n", encoding="utf-8")
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-05.md", 1, 1, 0.9)], at(days=3), config=UTC)
    assert summary.recorded == 0 and summary.skipped == {"already promoted": 1}


def test_session_transcript_hits_are_recorded(workspace: Path) -> None:
    transcript = workspace / ".openclaw/sessions/s1/transcripts/t1.jsonl"
    transcript.parent.mkdir(parents=True)
    lines = [
        {"type": "message", "message": {"role": "user", "content": "Remember: the office wifi password rotates on Mondays."}},
        {"type": "message", "message": {"role": "assistant", "content": "Noted, the wifi password rotates every Monday."}},
        {"type": "message", "message": {"role": "user", "content": "Also book the dentist for Friday."}},
    ]
    transcript.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    path = ".openclaw/sessions/s1/transcripts/t1.jsonl"
    record_recalls(workspace, "wifi password rotation", [hit(path, 1, 3, 0.7, source="sessions")], at(), config=UTC)
    found = entries(workspace)
    assert set(found) == {"User: Remember: the office wifi password rotates on Mondays.",
                          "Assistant: Noted, the wifi password rotates every Monday."}
    assert all(e.source == "sessions" and e.start_line in (1, 2) for e in found.values())
    assert record_recalls(workspace, "dentist", [hit(path, 3, 3, 0.7, source="sessions")], at(),
                          config={**UTC, "trackSessions": False}).recorded == 0


def test_grounding_counts_reads_of_recalled_lines_once_a_day(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config=UTC)
    assert record_grounding(workspace, "memory/2026-03-02.md", 5, 3, at(hours=1), config=UTC) == 1
    assert record_grounding(workspace, "memory/2026-03-02.md", 1, None, at(hours=2), config=UTC) == 0  # same day
    assert record_grounding(workspace, "memory/2026-03-02.md", 10, 2, at(days=1), config=UTC) == 0  # other lines
    assert entries(workspace)["Postgres 16 runs on db-2, port 5433."].grounded_count == 1


def test_install_returns_false_when_disabled() -> None:
    class Fake:
        workspace = Path(".")
        config = parse_config({"dreaming": {"enabled": False}})
        listeners: list = []

        def add_search_listener(self, fn):  # type: ignore[no-untyped-def]
            self.listeners.append(fn)

    fake = Fake()
    assert install_recall_tracking(fake) is False and fake.listeners == []


def test_empty_queries_and_internal_queries_record_nothing(workspace: Path) -> None:
    results = [hit("memory/2026-03-02.md", 1, 12)]
    assert record_recalls(workspace, "   ", results, at(), config=UTC).recorded == 0
    assert record_recalls(workspace, "__dreaming_daily__:2026-03-02", results, at(), config=UTC).recorded == 0
    assert not (workspace / "memory/.dreams").exists()


def test_transcript_hits_through_the_real_search_path(workspace: Path, manager_config: Callable[..., dict]) -> None:
    transcript = workspace / ".openclaw/sessions/s1/transcripts/t1.jsonl"
    transcript.parent.mkdir(parents=True)
    messages = [
        {"role": "user", "content": "Remember that the office wifi password rotates every Monday."},
        {"role": "assistant", "content": "Got it."},
    ]
    transcript.write_text("\n".join(json.dumps(m) for m in messages) + "\n", encoding="utf-8")
    config = {**manager_config(), "sources": ["memory", "sessions"]}
    with open_manager(workspace, config) as m:
        response = m.search("wifi password rotation", session_key="s1", now=at())
        assert any(r.source == "sessions" for r in response.results)
    (e,) = RecallStore(workspace).load().entries.values()
    assert e.source == "sessions" and e.path == ".openclaw/sessions/s1/transcripts/t1.jsonl"
    assert e.snippet == "User: Remember that the office wifi password rotates every Monday." and e.start_line == 1


def test_dream_reports_saved_as_dated_notes_are_never_recorded(workspace: Path) -> None:
    from mdrecall.dreaming import run_dream

    for day, query in enumerate(["postgres port", "which port does postgres listen on", "postgres on db-2"]):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=UTC)
    report = workspace / "memory" / "2026-03-04-dream.md"  # a dated name: short-term by its path
    run_dream(workspace, UTC, at(days=2, hours=14), report_path=report)
    text = report.read_text(encoding="utf-8")
    assert "Postgres 16 runs on db-2" in text
    lines = text.count("\n")
    before = RecallStore(workspace).load().entries
    summary = record_recalls(workspace, "postgres port staged candidates", [hit("memory/2026-03-04-dream.md", 1, lines, 0.9)],
                             at(days=3), config=UTC)
    assert summary.recorded == 0
    assert set(RecallStore(workspace).load().entries) == set(before)


def test_background_writer_records_exactly_what_recording_each_search_would(
    tmp_path: Path, workspace: Path, manager_config: Callable[..., dict]
) -> None:
    """Searches are recorded on a background thread, several per store update; the store must end up
    exactly as recording each search (and each read) in turn leaves it, including the same query
    twice on one day (counted once) and a read of a just-recalled fact (grounded, not lost)."""
    import shutil

    twin = tmp_path / "twin"
    shutil.copytree(workspace, twin)
    plan = [("postgres port", at()), ("postgres port", at(hours=2)), ("acme delivery date", at()),
            ("which port does postgres listen on", at(days=1)), ("acme contact", at(days=1))]
    responses = []
    with open_manager(workspace, manager_config()) as m:
        for query, now in plan:
            responses.append(m.search(query, now=now))
        m.read_file("memory/2026-03-02.md")  # grounds every fact of that note already recalled
        m.flush()
        tracking = m.status().details["recallTracking"]
        assert tracking["recorded"] == len(plan) + 1 and 1 <= tracking["storeUpdates"] <= len(plan) + 1  # + the read
        assert tracking["lastError"] is None and tracking["cpuMsPerSearch"] > tracking["storeCpuMsPerSearch"] > 0
        live = {k: e.to_json() for k, e in RecallStore(workspace).load().entries.items()}
    for (query, now), response in zip(plan, responses):
        record_recalls(twin, query, response.results, now, config=UTC)
    record_grounding(twin, "memory/2026-03-02.md", 1, None, at(days=1), config=UTC)
    expected = {k: e.to_json() for k, e in RecallStore(twin).load().entries.items()}
    assert live and live.keys() == expected.keys()
    for key in live:
        mine, theirs = dict(live[key]), dict(expected[key])
        # The read's timestamp is the wall clock in the manager, a fixed time in the twin.
        for row in (mine, theirs):
            row.pop("lastGroundedDay", None)
        assert mine == theirs, key
    assert all(e["groundedCount"] == 1 for e in live.values() if e["path"] == "memory/2026-03-02.md")


def test_a_burst_of_searches_wakes_the_writer_once(workspace: Path) -> None:
    """Each search queues its recall; only the first of a burst (or a full batch) wakes the writer.
    Woken per search, it took the interpreter at the start of the next search."""
    import threading

    from mdrecall.dreaming.recording import RecallWriter

    class Counting(threading.Condition):
        wakes = 0

        def notify_all(self) -> None:
            Counting.wakes += 1
            super().notify_all()

    # The first job's pause would end at 1.0 s, the last one's at 1.6 s: the check at ~1.3 s has
    # 0.3 s of slack each way on a loaded machine.
    writer = RecallWriter(workspace, UTC, idle_s=1.0, max_wait_s=60.0)
    writer._cond = Counting()
    try:
        writer.submit("postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=0))
        time.sleep(0.6)
        for day in range(1, 6):  # each moves the pause's end later, without waking the writer
            writer.submit("postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day))
        assert Counting.wakes == 1
        time.sleep(0.7)  # the first job's pause is over, the last one's not
        assert writer.batches == 0
        deadline = time.monotonic() + 10
        while writer.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (writer.batches, writer.recorded) == (1, 6)  # the whole burst, in one update
    finally:
        writer.close()


def test_close_writes_what_is_still_queued(workspace: Path, manager_config: Callable[..., dict]) -> None:
    m = open_manager(workspace, manager_config())
    for day in range(5):
        m.search("postgres port", now=at(days=day))
    m.close()  # no flush: close drains the queue
    (entry,) = [e for e in RecallStore(workspace).load().entries.values() if "Postgres 16" in e.snippet]
    assert entry.recall_count == 5


def test_writer_waits_for_a_pause_and_writes_a_burst_in_one_update(workspace: Path) -> None:
    from mdrecall.dreaming.recording import RecallWriter

    writer = RecallWriter(workspace, UTC, idle_s=5.0, max_wait_s=60.0)
    try:
        for day in range(8):
            writer.submit("postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day))
        assert writer.batches == 0 and not RecallStore(workspace).exists()  # still inside the pause
        assert writer.flush()
        assert (writer.batches, writer.recorded) == (1, 8)
        (entry,) = [e for e in RecallStore(workspace).load().entries.values() if "Postgres 16" in e.snippet]
        assert entry.recall_count == 8
        small = RecallWriter(workspace, UTC, idle_s=5.0, max_batch=3)
        for day in range(3):
            small.submit("postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=10 + day))
        # A full batch is written without waiting for the pause.
        deadline = time.monotonic() + 10
        while small.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert small.batches == 1
        small.close()
    finally:
        writer.close()
