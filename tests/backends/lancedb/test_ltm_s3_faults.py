"""LanceDB on S3 (moto) behind a fault-injecting proxy (s3faults.py): 5xx, throttling, uploads cut
mid-way, answers lost after the write happened, answers later than the client waits, an outage, a
first commit cut before its manifest, a stray table folder.

What must hold: a short fault is absorbed and the memory is stored once; during an outage every path
(open, list, count, search, recall, store, forget, maintenance, status, the tools, the CLI) fails
with one clear line and stores nothing half-way; after it, everything stored before is there and
writing works again; a table folder without a manifest is never taken for a table.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ltm_worker import subprocess_env
from s3faults import Fault, FaultProxy

from ltmhelpers import S3_ENV, Target, moto_endpoint, s3_client
from mdrecall import open_manager
from mdrecall.errors import StoreError

pytest.importorskip("moto")

#: Short client retries and timeouts, so an outage fails a call in a second or two (LanceDB's own
#: defaults: 3 retries, 180 s retry budget, 30 s per request).
FAST_FAIL = {"client_max_retries": "2", "client_retry_timeout": "5", "timeout": "4s"}
MANIFEST_PUT = {"method": "PUT", "path": r"/_versions/\d+\.manifest"}
DATA_PUT = {"method": "PUT", "path": r"/data/[^/?]+\.lance"}


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    started = FaultProxy(moto_endpoint()).start()
    yield started
    started.stop()


@pytest.fixture
def s3(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    """A fresh bucket reached through the proxy; the proxy's faults cleared after the test."""
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    target = Target.s3()
    target.storage.update({"aws_endpoint": proxy.endpoint, **FAST_FAIL})
    yield target
    proxy.clear()


@pytest.fixture
def ltm(local_model: Any, ltm_ws: Path, s3: Target) -> Iterator[Any]:
    """``ltm()`` -> a new LanceMemoryManager on the bucket (a fresh process would open the same)."""
    opened: list[Any] = []

    def factory(**lancedb: Any) -> Any:
        manager = open_manager(ltm_ws, s3.config(**lancedb))
        opened.append(manager)
        return manager

    yield factory
    for manager in opened:
        manager.close()


def _texts(manager: Any) -> list[str]:
    return sorted(r.text for r in manager.list_entries())


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert isinstance(exc, StoreError), f"{type(exc).__name__}: {text}"
    assert "\n" not in text and len(text) < 600 and text.startswith("LanceDB ") and ".rs" not in text, text
    return text


STATEMENTS = [
    "I prefer tea over coffee in the morning.",
    "We decided the billing service runs on PostgreSQL 16.",
    "My dentist appointment is every second Tuesday.",
    "The staging cluster lives in the Frankfurt region.",
    "Our release train leaves every other Thursday.",
    "I am allergic to peanuts.",
    "The design review board meets on Fridays at ten.",
    "My sister's birthday is on the ninth of March.",
    "We agreed to rotate the on-call pager weekly.",
]


@pytest.mark.slow  # LanceDB's retries and a 5 s delay
def test_short_faults_are_absorbed_and_every_memory_is_stored_once(ltm: Any, proxy: FaultProxy) -> None:
    m = ltm()
    stored = [m.store_memory(STATEMENTS[0])["id"]]
    faults = [
        Fault("status", status=503, times=2, **DATA_PUT),  # SlowDown on the upload of the rows
        Fault("status", status=429, times=2, **MANIFEST_PUT),  # throttled commit
        Fault("status", status=500, times=2, method="GET", path=r"list-type=2"),  # listing versions fails
        Fault("cut", times=1, **DATA_PUT),  # the upload cut mid-way
        Fault("delay", seconds=1.0, times=1, **DATA_PUT),  # slow, within the client's timeout
        Fault("delay", seconds=5.0, times=1, **MANIFEST_PUT),  # answered after the client gave up (4 s)
        # The commit lands but its answer is lost, and LanceDB cannot check the outcome (the manifest's
        # HEAD fails): it retries the commit. An append would be stored twice, and maintenance, which
        # drops exact duplicates, then removed both copies.
        Fault("lost", times=1, **MANIFEST_PUT),
    ]
    for n, fault in enumerate(faults, start=1):
        proxy.add(fault)
        if fault.action == "lost":
            proxy.add(Fault("status", status=503, method="HEAD", path=r"/_versions/\d+\.manifest"))
        try:
            outcome = m.store_memory(STATEMENTS[n])
        except StoreError as exc:
            # Only when the client gave up on a commit still in flight: reported failed, in one line,
            # though the write may land after all (whole: its manifest names only files written
            # before). The caller's retry finds it stored (duplicate) or stores another copy
            # (created), which maintenance merges with the late one.
            assert fault.action == "delay", exc
            _one_line(exc)
            proxy.clear()
            outcome = m.store_memory(STATEMENTS[n])
        proxy.clear()
        assert fault.hits >= 1, f"{fault} was never hit"
        assert outcome["action"] == "created" or (fault.action == "delay" and outcome["action"] == "duplicate"), outcome
        stored.append(outcome.get("id") or outcome["existingId"])
    m.sync(force=True)  # maintenance: compaction, exact-duplicate removal, cleanup
    assert m.maintainer.last_error is None
    rows = ltm().list_entries()
    assert sorted(r.text for r in rows) == sorted(STATEMENTS[: len(stored)]), "a memory was lost or stored twice"
    by_text = {r.text: r.id for r in rows}
    merged = [i for i, text in zip(stored, STATEMENTS) if by_text[text] != i]
    assert len(merged) <= 1, (merged, rows)  # only the delayed write's copy may have been merged away


@pytest.mark.slow  # ~2 s per failing call (LanceDB's own retries), a dozen of them
def test_outage_fails_every_path_with_one_line_and_stores_nothing(ltm: Any, proxy: FaultProxy, s3: Target) -> None:
    from mdrecall.agent.plugin import create_memory_capability

    before = ltm()
    kept = before.store_memory(STATEMENTS[0])["id"]
    cap = create_memory_capability(before.workspace, s3.config())
    cap.call_tool("memory_recall", {"query": "tea"})  # opened before the outage
    with proxy.fault("refuse"):
        fresh = ltm()  # connects and opens its table on its first call: during the outage
        calls = {
            "open": fresh.count,
            "count": before.count,
            "list": before.list_entries,
            "search": lambda: before.search("what do I drink in the morning?"),
            "recall": lambda: before.recall("morning drink"),
            "store": lambda: before.store_memory(STATEMENTS[1]),
            "forget": lambda: before.forget(memory_id=kept),
        }
        for what, call in calls.items():
            with pytest.raises(StoreError) as caught:
                call()
            assert _one_line(caught.value), what
        with pytest.raises(StoreError) as caught:
            fresh.sync(force=True)  # `mdrecall index`: maintenance needs the table
        _one_line(caught.value)
        before.sync(force=True)  # maintenance fails, recorded (it is retried on the next writes)
        assert (before.maintainer.last_error or "").startswith("StoreError: LanceDB ")
        status = fresh.status()  # status never raises: it says what failed
        assert status.warnings and "StoreError" in status.warnings[0] and status.last_error
        # The tools answer, saying nothing was stored.
        answer = cap.call_tool("memory_store", {"text": STATEMENTS[2]})
        assert answer["action"] == "error" and answer["code"] == "store_unavailable" and answer["disabled"], answer
        assert answer["message"].startswith("Not stored: the long-term memory store failed (LanceDB")
        recalled = cap.call_tool("memory_recall", {"query": "tea"})
        assert recalled["count"] == 0 and recalled["code"] == "store_unavailable", recalled
        captured = cap.auto_capture([{"role": "user", "content": "Remember that I prefer window seats."}])
        assert captured is not None and captured["captured"] == [] and "StoreError" in captured["error"]
    cap.close()
    after = ltm()
    assert _texts(after) == [STATEMENTS[0]]  # what was stored is there; nothing from the outage
    assert after.store_memory(STATEMENTS[3])["action"] == "created"
    assert _texts(after) == sorted([STATEMENTS[0], STATEMENTS[3]])
    assert fresh.store_memory(STATEMENTS[4])["action"] == "created"  # the manager that failed to open recovers too


@pytest.mark.slow  # two CLI processes (the model loads in each)
def test_cli_during_an_outage_exits_1_with_one_line(ltm: Any, proxy: FaultProxy, s3: Target, ltm_ws: Path,
                                                     tmp_path: Path) -> None:  # fmt: skip
    ltm().store_memory(STATEMENTS[0])
    (ltm_ws / ".mdrecall.yaml").write_text(yaml.safe_dump(s3.config()), encoding="utf-8")
    conversation = tmp_path / "conversation.jsonl"
    conversation.write_text(json.dumps({"role": "user", "content": "I prefer aisle seats on long flights."}) + "\n")
    env = subprocess_env(tmp_path)
    env.update(S3_ENV)

    def mdrecall(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mdrecall", "ltm", *args, "-w", str(ltm_ws)], capture_output=True,
                              text=True, env=env, timeout=180)  # fmt: skip

    with proxy.fault("refuse"):
        for args in (["list"], ["capture", "--from", str(conversation)]):
            done = mdrecall(*args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("mdrecall ltm: LanceDB "), done.stderr
            assert "Traceback" not in done.stderr
    from click.testing import CliRunner

    from mdrecall.backends.lancedb.cli import ltm as ltm_group

    listed = CliRunner().invoke(ltm_group, ["list", "-w", str(ltm_ws), "--json"], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    assert [m["text"] for m in json.loads(listed.stdout)["memories"]] == [STATEMENTS[0]]


def test_first_commit_cut_before_its_manifest_is_recovered_next_open(ltm: Any, proxy: FaultProxy, s3: Target) -> None:
    # The outage starts between the transaction file and the manifest of the table's first commit,
    # and lasts through LanceDB's clean-up of its own leftovers.
    proxy.add(Fault("refuse", **MANIFEST_PUT))
    proxy.add(Fault("refuse", method="DELETE"))
    proxy.add(Fault("refuse", method="POST", path=r"\?delete"))
    with pytest.raises(StoreError) as caught:
        ltm().count()
    _one_line(caught.value)
    proxy.clear()
    keys = [o["Key"] for o in s3_client(s3.endpoint or "").list_objects_v2(Bucket=s3.bucket).get("Contents", [])]
    assert any("/_transactions/0-" in k for k in keys), keys  # the cut commit's leftover is there...
    assert not any("/_versions/" in k for k in keys), keys  # ...and no manifest: no table
    m = ltm()
    assert m.count() == 0  # created afresh, not "not found" for good
    assert m.store_memory(STATEMENTS[0])["action"] == "created"
    assert _texts(ltm()) == [STATEMENTS[0]]


def test_table_folder_without_manifest_is_not_a_table(ltm: Any, s3: Target) -> None:
    # Another model's table folder holding only a transaction file (its first commit never landed):
    # no table to migrate from, and none to read.
    ghost = f"{s3.prefix}/memories_0123456789ab.lance/_transactions/0-{uuid.uuid4()}.txn"
    s3_client(s3.endpoint or "").put_object(Bucket=s3.bucket, Key=ghost, Body=b"\x08\x01")
    m = ltm()
    assert m.store_memory(STATEMENTS[0])["action"] == "created"
    assert m.status().details["migration"] is None
    assert m.store.table_names() == [m.store.name]
    assert _texts(ltm()) == [STATEMENTS[0]]
