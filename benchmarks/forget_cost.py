"""What one verified forget costs, by index size: ``mdrecall forget`` of one line in a workspace of N notes.

Corpus: benchmarks/speed.py's synthetic Zipf notes (one chunk each), with one note stating a planted
fact; vectors from ``mdrecall.testing.FakeProvider`` at 384 dimensions (instant and deterministic,
the same bytes per vector as all-MiniLM-L6-v2: what VACUUM and the byte scan pay for). Each run forgets
the fact by text (every store is scrubbed and scanned), in a fresh copy of the indexed workspace, and
reports wall and CPU time per phase (the plan; the apply: rewrite, row deletes, re-index, scrubs, scan),
the index size, and what the scan read.

    python benchmarks/forget_cost.py --files 1000 10000 --out benchmarks/results/forget_cost.json

The machine is shared: read ratios within one run. Results: docs/forgetting.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import generate_workspace

TOKEN = "Kq7Zorbleflux"


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> dict[str, float]:
    wall, cpu = _clock()
    return {"wall_s": round(wall - start[0], 3), "cpu_s": round(cpu - start[1], 3)}


def run(files: int, work: Path) -> dict[str, Any]:
    from mdrecall import open_manager
    from mdrecall.forget import apply_plan, plan_forget
    from mdrecall.testing import FakeProvider, plugin, registered

    source = work / f"ws-{files}"
    generate_workspace(source, files, corpus="zipf")
    note = source / "memory" / "2026-03-02.md"
    note.write_text(f"# 2026-03-02\n\n- The vault code is {TOKEN}.\n- Lunch at noon.\n", encoding="utf-8")
    ws = work / f"run-{files}"
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(source, ws)
    config = {"provider": "bench-fake", "store": {"path": str(work / f"index-{files}.sqlite")}, "sync": {"watch": False}}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{config['store']['path']}{suffix}").unlink(missing_ok=True)
    with registered(plugin(providers={"bench-fake": lambda c: FakeProvider(dims=384)})):
        with open_manager(ws, config, use_global_config=False) as manager:
            started = _clock()
            manager.sync()
            indexed = _since(started)
            size = Path(config["store"]["path"]).stat().st_size
            started = _clock()
            plan = plan_forget(manager, TOKEN)
            planned = _since(started)
            started = _clock()
            report = apply_plan(manager, plan)
            applied = _since(started)
    assert report.verified, report.to_dict()
    return {
        "files": files + 2,
        "indexBytes": size,
        "index": indexed,
        "plan": planned,
        "apply": applied,
        "scanFiles": report.checked_files,
        "scanBytes": report.checked_bytes,
        "stores": [s.to_dict() for s in report.stores],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    work = args.work or Path(tempfile.mkdtemp(prefix="mdrecall-forget-bench-"))
    os.environ["MDRECALL_HOME"] = str(work / "home")
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
               "runs": [run(n, work) for n in args.files]}  # fmt: skip
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
