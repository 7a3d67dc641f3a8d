"""Two processes capturing at once into one S3 table, from its very first commit (both race to create
the table), round after round: nothing a capture reported stored is lost, nothing is stored twice.

Runs on moto (``moto[server]``) behind the fault-injecting proxy (s3faults.py): a round without
faults, then a round where every third commit lands but its answer is lost and LanceDB cannot check
the outcome (the manifest's HEAD answers 503), so it retries a commit that is already there (an
append stored such rows twice, and the exact-duplicate clean-up then deleted both copies).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ltm_worker import SHARED, statements, subprocess_env
from s3faults import Fault, FaultProxy

from ltmhelpers import S3_ENV, Target, moto_endpoint

TURNS = 2


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    started = FaultProxy(moto_endpoint()).start()
    yield started
    started.stop()


def _check_round(target_config: dict[str, Any], outcomes: list[dict[str, Any]], workspace: Path) -> dict[str, int]:
    from mdrecall import open_manager

    with open_manager(workspace, target_config) as m:
        rows = m.list_entries()
    ids = [r.id for r in rows]
    texts = {r.text for r in rows}
    by_id = {r.id: r.text for r in rows}
    assert len(ids) == len(set(ids)), "a memory was stored twice under one id"
    said = {t for o in outcomes for turn in range(TURNS) for t in statements(o["worker"], turn)} | {SHARED}
    accounted: set[str] = set()
    for o in outcomes:
        for error in o["errors"]:  # reported failed (one line): allowed under faults; stored or not
            assert error["error"].startswith("StoreError: LanceDB ") and "\n" not in error["error"], error
            accounted.update(error["texts"])
        for c in o["created"]:
            # Reported stored: it is there (or its exact copy by the other writer, merged by maintenance).
            assert c["id"] in by_id or c["text"] in texts, f"lost: {c}"
            accounted.add(c["text"])
        for d in o["duplicates"]:
            # Reported a duplicate: what it repeats is there.
            assert d["existingId"] in by_id or d["existingText"] in texts, f"lost: {d}"
            accounted.add(d["text"])
    assert accounted == said, said - accounted
    return {"rows": len(ids), "created": sum(len(o["created"]) for o in outcomes)}


def _run_rounds(proxy: FaultProxy, workspace: Path, tmp_path: Path, faults: list[list[Fault]]) -> list[dict[str, int]]:
    """One round per entry of ``faults`` (the faults armed while it runs)."""
    target = Target.s3()
    target.storage.update({"aws_endpoint": proxy.endpoint, "client_max_retries": "2", "client_retry_timeout": "5"})
    config = target.config()
    db_paths = [f"s3://{target.bucket}/round-{n}" for n in range(len(faults))]
    go = tmp_path / "go"
    go.mkdir()
    worker = str(Path(__file__).with_name("ltm_worker.py"))
    env = subprocess_env(tmp_path)
    procs = [
        subprocess.Popen([sys.executable, worker, "rounds", str(workspace), json.dumps(config), str(w), str(TURNS), str(go),
                          *db_paths], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        for w in range(2)
    ]
    summary = []
    try:
        for n, armed in enumerate(faults):
            for fault in armed:
                proxy.add(fault)
            (go / str(n)).touch()  # both workers open round n's new database at once
            outcomes = []
            for p in procs:
                line = p.stdout.readline() if p.stdout else ""
                if not line:
                    p.wait(30)
                    raise AssertionError(f"worker exited ({p.returncode}): {p.stderr.read()[-3000:] if p.stderr else ''}")
                outcomes.append(json.loads(line))
            proxy.clear()
            assert all(f.hits > 0 for f in armed), [(f.action, f.path, f.hits) for f in armed]
            summary.append({**_check_round({**config, "lancedb": {**config["lancedb"], "dbPath": db_paths[n]}}, outcomes, workspace),
                            "faults": sum(f.hits for f in armed)})
        for p in procs:
            assert p.wait(60) == 0, p.stderr.read()[-3000:] if p.stderr else ""
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return summary


def _lost_answers() -> list[Fault]:
    return [
        Fault("lost", method="PUT", path=r"/_versions/\d+\.manifest", every=3),
        Fault("status", status=503, method="HEAD", path=r"/_versions/\d+\.manifest"),
    ]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_processes_capturing_at_once_lose_nothing(local_model: Any, ltm_ws: Path, tmp_path: Path, proxy: FaultProxy,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    summary = _run_rounds(proxy, ltm_ws, tmp_path, [[], _lost_answers()])
    print(f"\n2 processes x {TURNS} turns per round: {summary}; {time.monotonic() - started:.0f} s")
