"""What an idempotent write costs in LanceDB: a plain append against the insert-if-absent merge on
``id`` the LanceDB backend uses (``LanceStore.add``), one memory per write into a table that already
holds ``--rows`` memories (384-dim vectors, the bundled model's size), on a local folder and on
moto's S3 (``moto[server]`` on loopback; no network, so the S3 figures are request overhead, not
latency). The merge joins the new rows against the table's ids, so a commit LanceDB retries after
its answer was lost finds them there instead of storing them twice::

    python benchmarks/ltm_write_cost.py --rows 1000 --writes 20

Results and their reading: docs/reliability.md, section "LanceDB on object storage under faults".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _record(rng: np.random.Generator, n: int) -> dict[str, Any]:
    from mdrecall.backends.lancedb.records import new_record

    vector = rng.normal(size=384).astype(np.float32)
    return new_record(f"memory number {n}: {uuid.uuid4()}", vector / np.linalg.norm(vector), importance=0.5,
                      category="fact", agent_id="main", source="tool", session_key=None, provenance={})  # fmt: skip


def measure(uri: str, options: dict[str, str], mode: str, rows: int, writes: int) -> dict[str, float]:
    from mdrecall.backends.lancedb.store import LanceStore

    rng = np.random.default_rng(0)
    store = LanceStore(uri, storage_options=options)
    store.open({"provider": "benchmark"}, 384, None)
    store.table.add(pa.Table.from_pylist([_record(rng, n) for n in range(rows)], schema=store.table.schema))
    times = []
    for n in range(writes):
        data = pa.Table.from_pylist([_record(rng, rows + n)], schema=store.table.schema)
        started = time.perf_counter()
        if mode == "append":
            store.table.add(data)
        else:
            store.table.merge_insert("id").when_not_matched_insert_all().execute(data)
        times.append(time.perf_counter() - started)
    return {"p50_ms": round(statistics.median(times) * 1000, 1), "max_ms": round(max(times) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from ltmhelpers import S3_KEY, S3_SECRET, moto_endpoint, s3_client

    endpoint = moto_endpoint()
    results: dict[str, Any] = {"rows": args.rows, "writes": args.writes}
    for mode in ("append", "merge"):
        with tempfile.TemporaryDirectory() as folder:
            results[f"{mode} local"] = measure(folder, {}, mode, args.rows, args.writes)
        bucket = f"cost-{uuid.uuid4().hex[:10]}"
        s3_client(endpoint).create_bucket(Bucket=bucket)
        options = {"aws_access_key_id": S3_KEY, "aws_secret_access_key": S3_SECRET, "aws_endpoint": endpoint,
                   "aws_region": "us-east-1", "allow_http": "true"}  # fmt: skip
        results[f"{mode} moto-s3"] = measure(f"s3://{bucket}/m", options, mode, args.rows, args.writes)
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
