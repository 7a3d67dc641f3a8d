"""Storage growth of the LanceDB backend: versions, files and bytes after N writes, with and without maintenance.

Every LanceDB write is a new version with its own files; without compaction and cleanup a table of
a few hundred memories ends up as hundreds of versions and files. This writes N memories one by
one (the worst case: one ``memory_store`` per memory) into a local folder with the bundled model and
reports, for each maintenance setting, the table's versions, fragments, files and bytes at the end,
plus wall and CPU time per write::

    python benchmarks/ltm_storage.py --writes 200
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

SETTINGS = {
    "off": {"enabled": False},
    "default (every 16 writes, keep 1 min)": {},
    "keep 10 min": {"keepVersionsMinutes": 10},
    "keep 0 min": {"keepVersionsMinutes": 0},
}


def run(writes: int, maintenance: dict, root: Path) -> dict:
    from mdrecall import open_manager

    ws = root / "ws"
    ws.mkdir(parents=True)
    db = root / "db"
    config = {"backend": "lancedb", "provider": "local", "lancedb": {"dbPath": str(db), "duplicateThreshold": 1.0,
                                                                     "maintenance": maintenance}}
    m = open_manager(ws, config)
    m.count()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(writes):
        m.store_memory(f"Fact {i}: server rack-{i} sits in room {i % 17} of building {chr(65 + i % 9)}, row {i % 31}.")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    m.close()  # runs pending maintenance
    files = [p for p in db.rglob("*") if p.is_file()]
    from mdrecall.backends.lancedb.store import LanceStore

    store = LanceStore(str(db))
    store.open_any()
    stats = store.stats()
    return {"versions": stats["versions"], "fragments": stats["fragments"], "files": len(files),
            "bytes": sum(p.stat().st_size for p in files), "rows": stats["rows"],
            "ms_per_write": round(1000 * wall / writes, 1), "cpu_ms_per_write": round(1000 * cpu / writes, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("MDRECALL_HOME", tempfile.mkdtemp())
    results = {}
    for label, maintenance in SETTINGS.items():
        with tempfile.TemporaryDirectory() as tmp:
            results[label] = run(args.writes, maintenance, Path(tmp))
        print(f"{label:40s} {json.dumps(results[label])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
