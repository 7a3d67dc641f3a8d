"""Helpers for the LanceDB backend's tests and its entries in the shared contract suite.

* :func:`one_blas_thread`: what every LanceDB test runs under (see there).
* :func:`moto_endpoint`: an S3-compatible server (``moto[server]``) on 127.0.0.1, started on first
  use and stopped when the test process exits.
* :class:`Target`: where a test's LanceDB lives, a local folder or a fresh bucket on that server,
  with the config mapping to open it and every stored file's bytes (for the forget tests).
"""

from __future__ import annotations

import atexit
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

S3_KEY = "ltm-test-key"
S3_SECRET = "ltm-test-secret"
#: The environment variables the storage options name (``${ENV}`` expansion is part of what is tested).
S3_ENV = {"LTM_TEST_S3_KEY": S3_KEY, "LTM_TEST_S3_SECRET": S3_SECRET}


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """NumPy's BLAS with one thread while LanceDB's own threads run: on a small shared machine idle
    BLAS threads spin for the cores LanceDB needs (3x the CPU time of these tests with them)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1):
        yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_moto_lock = threading.Lock()
_moto: dict[str, Any] = {}


def moto_endpoint() -> str:
    """The session's S3-compatible server (started on first use); skips the test without moto."""
    import pytest

    pytest.importorskip("moto")
    with _moto_lock:
        if "endpoint" in _moto:
            return str(_moto["endpoint"])
        port = _free_port()
        log = open(Path(tempfile.mkdtemp(prefix="moto-")) / "moto.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"moto server did not start; see {log.name}") from None
                time.sleep(0.1)

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()

        atexit.register(stop)
        _moto["stop"] = stop
        _moto["endpoint"] = f"http://127.0.0.1:{port}"
        return str(_moto["endpoint"])


def stop_moto() -> None:
    """Stop the session's S3 server, if one started (conftest's session end: a pytest-xdist worker
    may leave without running atexit handlers, and the server then outlives the suite)."""
    with _moto_lock:
        stop = _moto.pop("stop", None)
        _moto.pop("endpoint", None)
    if stop is not None:
        atexit.unregister(stop)
        stop()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
                        region_name="us-east-1")  # fmt: skip


@dataclass
class Target:
    kind: str
    db_path: str
    storage: dict[str, str]
    endpoint: str | None = None
    bucket: str | None = None
    prefix: str | None = None

    @classmethod
    def local(cls, root: Path) -> Target:
        return cls("local", str(root / "lancedb"), {})

    @classmethod
    def s3(cls) -> Target:
        """A fresh bucket on the session's server; credentials through ``${ENV}`` (set :data:`S3_ENV`)."""
        endpoint = moto_endpoint()
        bucket = f"ltm-{uuid.uuid4().hex[:12]}"
        s3_client(endpoint).create_bucket(Bucket=bucket)
        storage = {
            "aws_access_key_id": "${LTM_TEST_S3_KEY}",
            "aws_secret_access_key": "${LTM_TEST_S3_SECRET}",
            "aws_endpoint": endpoint,
            "aws_region": "us-east-1",
            "allow_http": "true",
        }
        return cls("s3", f"s3://{bucket}/team-memory", storage, endpoint, bucket, "team-memory")

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
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/"):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
        return out
