"""Four processes capturing at once lose nothing (commit conflicts retried), on a folder and on S3."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ltm_worker import SHARED, statements, subprocess_env

WORKERS = 4
TURNS = 3  # per process (6 in the measured run in docs/lancedb.md)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_four_capturing_processes_lose_nothing(local_model: Any, ltm_ws: Path, target: Any, tmp_path: Path) -> None:
    # Duplicates only when the text is the same (the statements are similar on purpose); maintenance
    # after every second write, so compaction and index refreshes run between the others' appends.
    config = target.config(duplicateThreshold=1.0, maintenance={"everyWrites": 2, "afterSeconds": 0})
    go = tmp_path / "go"
    env = subprocess_env(tmp_path)
    worker = str(Path(__file__).with_name("ltm_worker.py"))
    procs = [
        subprocess.Popen([sys.executable, worker, str(ltm_ws), json.dumps(config), str(w), str(TURNS), str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for w in range(WORKERS)
    ]
    time.sleep(1.0)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["maintenanceError"] is None for r in results), results

    from mdrecall import open_manager

    with open_manager(ltm_ws, config) as m:
        m.sync(force=True)  # maintenance also removes same-text copies two object-store writers raced in
        texts = [r.text for r in m.list_entries()]
    expected = {t for w in range(WORKERS) for turn in range(TURNS) for t in statements(w, turn)}
    assert set(texts) == expected | {SHARED}
    assert len(texts) == len(expected) + 1  # every statement once, the shared one once
    print(f"\n{target.kind}: " + json.dumps(results))
