"""A capturing process for the concurrency test: ``python ltm_worker.py WORKSPACE CONFIG_JSON WORKER TURNS GO_FILE``.

Waits for GO_FILE (so all workers start together), captures TURNS turns of two distinct user
statements each plus one statement every worker makes, then prints its counters as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

COLOURS = ["amber", "cobalt", "crimson", "emerald", "ivory", "saffron", "teal", "violet", "umber", "magenta"]
THINGS = ["notebooks", "bicycles", "teapots", "umbrellas", "lanterns", "kites", "scarves", "clocks", "pianos", "tents"]
PLACES = ["Oslo", "Lima", "Kyoto", "Accra", "Perth", "Quito", "Riga", "Hanoi", "Dakar", "Bergen"]
SHARED = "We decided that every worker reports to the Zanzibar coordination channel."


def statements(worker: int, turn: int) -> list[str]:
    return [
        f"I prefer {COLOURS[turn]} {THINGS[worker]} when I travel to {PLACES[(turn + worker) % 10]}, worker {worker} turn {turn}.",
        f"We decided to ship order {worker * 100 + turn} of {THINGS[(worker + turn) % 10]} to {PLACES[turn]} on day {turn + 1}.",
    ]


def subprocess_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a child process: this one's, with an MDRECALL_HOME of the test's own."""
    env = dict(os.environ)
    env.setdefault("MDRECALL_HOME", str(tmp_path / "home"))
    # Several model processes at once: one BLAS thread each, or their idle threads spin for a core.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def main() -> int:
    workspace, config_json, worker, turns, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
    from mdrecall import open_manager

    manager = open_manager(Path(workspace), json.loads(config_json))
    manager.count()  # open the table before the start signal
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    captured = duplicates = 0
    for turn in range(turns):
        texts = statements(worker, turn) + ([SHARED] if turn == 0 else [])
        report = manager.capture_turn([{"role": "user", "content": " ".join(texts)}], force=True)
        captured += len(report["captured"])
        duplicates += len(report["duplicates"])
    stats = manager.store.stats()
    manager.close()
    print(json.dumps({"worker": worker, "captured": captured, "duplicates": duplicates,
                      "conflictsRetried": stats["conflictsRetried"], "commits": stats["commits"],
                      "maintenanceRuns": manager.maintainer.runs, "maintenanceError": manager.maintainer.last_error}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
