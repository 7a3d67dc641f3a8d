"""CPU and wall time of the vector centroid a first search reads from disk past the in-memory budget
(search/corpus.py ``IndexCorpus._compute_centroid``), on an existing index.

    python benchmarks/centroid.py /path/to/scale.sqlite    # e.g. the 1M index of benchmarks/scale.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from mdrecall.search.corpus import IndexCorpus
from mdrecall.store.db import IndexDB, StoreOptions


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python benchmarks/centroid.py INDEX.sqlite (an existing index file)", file=sys.stderr)
        return 2
    db = IndexDB(Path(argv[0]), StoreOptions())
    try:
        chunks = db.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        cpu, wall = time.process_time(), time.perf_counter()
        IndexCorpus(db)._compute_centroid(None)
        print(json.dumps({"chunks": chunks, "cpu_s": round(time.process_time() - cpu, 2),
                          "wall_s": round(time.perf_counter() - wall, 2)}))
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
