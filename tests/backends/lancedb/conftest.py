"""Fixtures for the LanceDB backend: real LanceDB, the real bundled model, a local folder or S3.

* ``local_model``: ``provider: local`` resolves to the session's one all-MiniLM-L6-v2 instance, so
  every manager gets real embeddings without loading the model again.
* ``target``: parametrised ``local`` (a folder) and ``s3`` (``moto[server]`` on 127.0.0.1, one
  bucket per test, credentials through ``${ENV}`` expansion); ``target.config(**lancedb)`` is the
  memory config mapping, ``target.files()`` every stored file's bytes (for the forget tests).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lancedb")

S3_KEY = "ltm-test-key"
S3_SECRET = "ltm-test-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3-compatible server (moto) on loopback for the whole session."""
    pytest.importorskip("moto")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("moto server exited; see moto.log")
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("moto server did not start")
    yield endpoint
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
                        region_name="us-east-1")


@pytest.fixture
def local_model(local_provider: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from mdrecall.embeddings import registry

    monkeypatch.setitem(registry._FACTORIES, "local", lambda config: local_provider)
    return local_provider


@dataclass
class Target:
    kind: str
    db_path: str
    storage: dict[str, str]
    endpoint: str | None = None
    bucket: str | None = None
    prefix: str | None = None

    def lancedb(self, **extra: Any) -> dict[str, Any]:
        section: dict[str, Any] = {"dbPath": self.db_path}
        if self.storage:
            section["storageOptions"] = dict(self.storage)
        section.update(extra)
        return section

    def config(self, **lancedb: Any) -> dict[str, Any]:
        return {"backend": "lancedb", "provider": "local", "sync": {"watch": False}, "lancedb": self.lancedb(**lancedb)}

    def files(self) -> dict[str, bytes]:
        """Every file of the database (all tables, versions, indexes, transactions) and its bytes."""
        if self.kind == "local":
            root = Path(self.db_path)
            return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        client = s3_client(self.endpoint or "")
        out: dict[str, bytes] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + "/"):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
        return out


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Target:
    if request.param == "local":
        return Target("local", str(tmp_path / "lancedb"), {})
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = f"ltm-{uuid.uuid4().hex[:12]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    monkeypatch.setenv("LTM_TEST_S3_KEY", S3_KEY)
    monkeypatch.setenv("LTM_TEST_S3_SECRET", S3_SECRET)
    storage = {
        "aws_access_key_id": "${LTM_TEST_S3_KEY}",
        "aws_secret_access_key": "${LTM_TEST_S3_SECRET}",
        "aws_endpoint": endpoint,
        "aws_region": "us-east-1",
        "allow_http": "true",
    }
    return Target("s3", f"s3://{bucket}/team-memory", storage, endpoint, bucket, "team-memory")


@pytest.fixture
def ltm_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Long-term memory\n", encoding="utf-8")
    return ws


@pytest.fixture
def open_ltm(local_model: Any, ltm_ws: Path, target: Target) -> Iterator[Callable[..., Any]]:
    """``open_ltm(**lancedb_keys)`` -> a LanceMemoryManager (closed after the test)."""
    from mdrecall import open_manager

    opened: list[Any] = []

    def factory(workspace: Path | None = None, **lancedb: Any) -> Any:
        manager = open_manager(workspace or ltm_ws, target.config(**lancedb))
        opened.append(manager)
        return manager

    yield factory
    for manager in opened:
        manager.close()
