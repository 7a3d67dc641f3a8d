"""QMD-specific search behaviour: keyword OR over QMD's AND, calibrated scores, freshness after file
changes (sync, search-time check, watcher), transcripts, and modes whose models are absent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qmdhelpers import PLANTED_LINE, PLANTED_PATH, PLANTED_QUESTION, file_lines, make_workspace, open_qmd, wait_for


@pytest.fixture(scope="module")
def manager(qmd_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    m = open_qmd(qmd_workspace, tmp_path_factory.mktemp("qmd-search"))
    assert m.wait_warm(60)
    yield m
    m.close()


def test_or_finds_what_qmds_and_misses(manager: Any, qmd_workspace: Path, tmp_path: Path) -> None:
    assert manager.search(PLANTED_QUESTION).results[0].path == PLANTED_PATH
    strict = open_qmd(qmd_workspace, tmp_path, qmd={"keywordMatch": "and", "indexDir": str(manager.layout.root)})
    try:
        assert strict.wait_warm(60)
        assert strict.search(PLANTED_QUESTION, min_score=0).results == []  # QMD's own semantics: every word
        assert strict.search("disaster recovery drill").results[0].path == PLANTED_PATH
    finally:
        strict.close()


def test_scores_rank_keyword_coverage(manager: Any, qmd_workspace: Path, tmp_path: Path) -> None:
    response = manager.search("Priya disaster recovery drill", min_score=0, max_results=50)
    by_path = {r.path: r.score for r in response.results}
    top = response.results[0]
    assert top.path == PLANTED_PATH and top.score == max(by_path.values())
    # people.md names Priya but holds no drill: it scores by the weight of "priya" alone, lower.
    assert 0 < by_path["memory/people.md"] < top.score
    # The same calibrated scale as the builtin's keyword-only search, said the same way.
    assert top.explanation is not None and top.explanation["keyword"]["score"] == pytest.approx(top.score, abs=1e-4)
    assert set(top.explanation["keyword"]["matched"]) == {"priya", "disaster", "recovery", "drill"}
    # One cut-off rule across backends: keyword-only searches cut at keywordOnlyMinScore (0.1), so a
    # question matching one of its three words still answers, as it does with the builtin engine.
    default = manager.search("Priya disaster recovery drill", max_results=50)
    assert all(r.score >= manager.config.query.keywordOnlyMinScore for r in default.results)
    assert len(default.results) < len(response.results) or min(by_path.values()) >= 0.1
    one_word = manager.search("who is Priya, the gardener from Lisbon?")
    builtin = open_builtin(qmd_workspace, tmp_path)
    try:
        assert bool(one_word.results) == bool(builtin.search("who is Priya, the gardener from Lisbon?").results)
    finally:
        builtin.close()
    # An explicit minScore always wins.
    assert all(r.score >= 0.9 for r in manager.search("Priya disaster recovery drill", min_score=0.9).results)


def open_builtin(workspace: Path, tmp: Path) -> Any:
    from mdrecall import open_manager

    config = {"provider": "none", "store": {"path": str(tmp / "builtin.sqlite")}, "sync": {"watch": False}}
    return open_manager(workspace, config, use_global_config=False)


def test_paths_are_workspace_relative_and_literal(manager: Any, qmd_workspace: Path) -> None:
    odd = qmd_workspace / "memory" / "projects" / "Team notes (draft) v2.md"
    odd.write_text("# Team notes\n\n- The kumquat festival stand needs two volunteers.\n", encoding="utf-8")
    try:
        manager.sync()
        hit = manager.search("kumquat festival volunteers").results[0]
        assert hit.path == "memory/projects/Team notes (draft) v2.md"  # not QMD's "handelized" display form
        assert hit.start_line <= 3 <= hit.end_line
        assert manager.read_file(hit.path).text.startswith("# Team notes")
        zh = manager.search("饼干").results[0]
        assert zh.snippet.split("\n") == file_lines(qmd_workspace, zh.path, zh.start_line, zh.end_line) and "饼干" in zh.snippet
    finally:
        odd.unlink()
        manager.sync()


def test_file_change_picked_up_after_sync(manager: Any, qmd_workspace: Path) -> None:
    note = qmd_workspace / "memory" / "2026-11-21.md"
    note.write_text("# 2026-11-21\n\n- Ordered a standing desk for the zeppelin room.\n", encoding="utf-8")
    report = manager.sync()
    assert report.files_indexed == 1
    hit = manager.search("standing desk zeppelin").results[0]
    assert (hit.path, hit.start_line <= 3 <= hit.end_line) == ("memory/2026-11-21.md", True)
    # An edit moves the fact; the citation follows it.
    note.write_text("# 2026-11-21\n\n## Office\n\n- Cancelled the standing desk; the zeppelin room keeps its chairs.\n", encoding="utf-8")
    manager.sync()
    hit = manager.search("standing desk zeppelin").results[0]
    assert hit.start_line <= 5 <= hit.end_line and "Cancelled" in hit.snippet
    note.unlink()
    assert manager.sync().files_removed == 1
    assert "memory/2026-11-21.md" not in {r.path for r in manager.search("standing desk zeppelin", min_score=0).results}


def test_search_finds_changes_without_an_explicit_sync(manager: Any, qmd_workspace: Path) -> None:
    note = qmd_workspace / "memory" / "2026-11-22.md"
    note.write_text("# 2026-11-22\n\n- The marmalade budget for the offsite is 40 euros.\n", encoding="utf-8")
    try:
        response = manager.search("marmalade budget offsite")
        assert response.results and response.results[0].path == "memory/2026-11-22.md"
        assert response.stale is False
    finally:
        note.unlink()
        manager.sync()


def test_watcher_drives_qmd_update(qmd_workspace: Path, tmp_path: Path) -> None:
    watched = open_qmd(qmd_workspace, tmp_path, sync={"watch": True, "watchDebounceMs": 100})
    try:
        assert watched.wait_warm(60)
        assert watched.watcher is not None and watched.watcher.running
        before = watched.last_update
        note = qmd_workspace / "memory" / "2026-11-23.md"
        note.write_text("# 2026-11-23\n\n- The walrus mascot costume arrives on Tuesday.\n", encoding="utf-8")
        try:
            wait_for(lambda: watched.last_update is not before and not watched.monitor.dirty and not watched.watcher.has_pending(),
                     20, "the watcher's sync")
            assert watched.watcher.stats.callbacks >= 1 and watched.last_update["new"] == 1
            # With a live watcher a search does no file check: this answer comes from the watcher's update.
            assert watched.monitor.needs_check() is False
            hit = watched.search("walrus mascot costume").results[0]
            assert hit.path == "memory/2026-11-23.md" and hit.start_line <= 3 <= hit.end_line
        finally:
            note.unlink()
    finally:
        watched.close()


def test_transcripts_are_searched_redacted_with_jsonl_lines(tmp_path: Path, qmd_binary: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    transcript = ws / ".openclaw" / "sessions" / "main" / "transcripts" / "2026-11-14.jsonl"
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"role": "user", "content": f"My key is {secret}, remember the flamingo deploy window."}) + "\n")
    jsonl = transcript.read_text(encoding="utf-8").split("\n")
    m = open_qmd(ws, tmp_path / "state", sources=["memory", "sessions"])
    try:
        assert m.wait_warm(60)
        hits = m.search("SELECT recipe_id GROUP BY", session_key="main", min_score=0).results
        hit = next(h for h in hits if h.source == "sessions")
        assert hit.path == ".openclaw/sessions/main/transcripts/2026-11-14.jsonl"
        assert any("GROUP BY recipe_id" in line for line in jsonl[hit.start_line - 1 : hit.end_line])
        flamingo = m.search("flamingo deploy window", session_key="main").results[0]
        assert flamingo.source == "sessions" and "flamingo" in jsonl[flamingo.end_line - 1]
        assert secret not in flamingo.snippet
        mirror = "".join(p.read_text() for p in m.layout.sessions_dir.rglob("*.md"))
        assert "flamingo" in mirror and secret not in mirror  # QMD never sees the secret
        # Another session does not see main's transcript (sessions.visibility: own).
        assert all(h.source != "sessions" for h in m.search("flamingo deploy window", session_key="other", min_score=0).results)
        assert all(h.source == "memory" for h in m.search("flamingo deploy window", session_key="main", sources=["memory"], min_score=0).results)
    finally:
        m.close()


def test_modes_that_need_absent_models_degrade_visibly(qmd_workspace: Path, tmp_path: Path) -> None:
    m = open_qmd(qmd_workspace, tmp_path, qmd={"mode": "query"})
    try:
        assert m.wait_warm(60)
        response = m.search(PLANTED_QUESTION)
        assert response.provider == "qmd" and response.mode == "keyword-only" and response.degraded
        assert "needs QMD's embed, rerank, generate model(s), absent" in response.warnings[0]
        assert "never downloads" in response.warnings[0]
        assert response.results[0].path == PLANTED_PATH and response.results[0].start_line <= PLANTED_LINE
        status = m.status()
        assert status.details["mode"] == "query" and status.details["effectiveMode"] == "search"
        assert not status.details["models"]["embed"]["present"]
        assert not m.probe_embedding_availability().ok and m.probe_vector_availability() is False
        # QMD was only ever given local files, so it cannot have fetched one.
        config = m.layout.config_path.read_text()
        assert "hf:" not in config and str(m.layout.models_dir) in config
        assert not any(m.layout.root.rglob("*.gguf"))
        assert m.sync().rebuild_reason is None  # no `qmd embed` without the model
    finally:
        m.close()


def test_warm_search_starts_no_process(manager: Any) -> None:
    manager.search(PLANTED_QUESTION)
    pid, starts = manager.process.pid, manager.status().details["process"]["starts"]
    update = manager.last_update
    # Past sync.reconcileIntervalMs the monitor re-checks the files: a walk finds nothing changed,
    # so no `qmd update` process runs.
    time.sleep(manager.config.sync.reconcileIntervalMs / 1000.0 + 0.1)
    assert manager.monitor.needs_check()
    assert manager.search(PLANTED_QUESTION).results[0].path == PLANTED_PATH
    assert manager.last_update is update and not manager.monitor.needs_check()
    started = time.monotonic()
    for _ in range(20):
        assert manager.search(PLANTED_QUESTION).results[0].path == PLANTED_PATH
    assert time.monotonic() - started < 30  # a sanity bound only; speed lives in benchmarks/qmd_speed.py
    assert (manager.process.pid, manager.status().details["process"]["starts"]) == (pid, starts)
