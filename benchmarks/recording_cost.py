"""What recall tracking costs per search, recorded alone (dreaming/recording.py), on a workspace and
index that ``benchmarks/speed.py --phases model`` built (``ws-N``, ``model-N.sqlite``).

The bench questions are searched once with tracking off; their results are then recorded on a copy
of the workspace the way the background recorder does (one batch, a kept block cache): first as
new recalls, then twice more as the same searches on later recordings (entries exist, blocks
cached). Thread CPU per search, median of ``--rounds``. Run it with ``PYTHONPATH`` on another
source tree to compare two codes.

    python benchmarks/recording_cost.py --workdir DIR --size 1000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True, help="speed.py's --workdir")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from mdrecall import open_manager
    from mdrecall.config import parse_config
    from mdrecall.dreaming.recording import BlockCache, record_recalls_batch

    ws = args.workdir / f"ws-{args.size}"
    queries = speed.make_queries(ws, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        store = speed.copy_model_index(args.workdir, args.size, Path(tmp))
        settings = speed._config(str(store), "local")
        settings["dreaming"] = {"tracking": False}
        with open_manager(ws, settings, use_global_config=False) as m:
            searched = [(q, m.search(q).results) for q in queries]
        config = parse_config({**settings, "dreaming": {"tracking": True, "dedupeByQueryPerDay": False}})
        jobs = [("recall", q, results, None, "recall") for q, results in searched]
        first, again = [], []
        for n in range(args.rounds):
            copy = Path(tmp) / f"ws-{n}"
            shutil.copytree(ws, copy)
            cache = BlockCache()
            t0 = time.thread_time()
            record_recalls_batch(copy, jobs, config=config, cache=cache)
            t1 = time.thread_time()
            for _ in range(2):
                record_recalls_batch(copy, jobs, config=config, cache=cache)
            t2 = time.thread_time()
            first.append((t1 - t0) / len(jobs) * 1000)
            again.append((t2 - t1) / (2 * len(jobs)) * 1000)
    print(f"{args.size} chunks, {len(jobs)} searches: first recording {statistics.median(first):.2f} ms a search, "
          f"recorded again {statistics.median(again):.2f} ms (thread CPU, median of {args.rounds})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
