"""A capturing process for the concurrency tests.

``python ltm_worker.py WORKSPACE CONFIG_JSON WORKER TURNS GO_FILE``: waits for GO_FILE (so all
workers start together), captures TURNS turns of two distinct user statements each plus one
statement every worker makes, then prints its counters as JSON.

``python ltm_worker.py rounds WORKSPACE CONFIG_JSON WORKER TURNS GO_DIR DB_PATH...``: one round per
DB_PATH (a database no process has opened yet): waits for ``GO_DIR/<round>``, opens the database
(so the workers race to create its table), captures TURNS turns, closes (maintenance runs), and
prints one JSON line per round: what each capture reported (created ids, duplicates' existing ids,
errors). The model loads once for all rounds.
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


def rounds() -> int:
    workspace, config_json, worker, turns, go_dir = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), Path(sys.argv[6])
    from mdrecall import open_manager
    from mdrecall.errors import MdrecallError

    base = json.loads(config_json)
    for n, db_path in enumerate(sys.argv[7:]):
        config = {**base, "lancedb": {**base["lancedb"], "dbPath": db_path}}
        go = go_dir / str(n)
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        created: list[dict[str, str]] = []
        duplicates: list[dict[str, str]] = []
        errors: list[dict[str, object]] = []
        manager = open_manager(Path(workspace), config)
        try:
            for turn in range(turns):
                texts = statements(worker, turn) + ([SHARED] if turn == 0 else [])
                try:
                    report = manager.capture_turn([{"role": "user", "content": " ".join(texts)}], force=True)
                except MdrecallError as exc:  # reported failed: allowed, and checked by the test
                    errors.append({"error": f"{type(exc).__name__}: {exc}", "texts": texts})
                    continue
                created += [{"id": c["id"], "text": c["text"]} for c in report["captured"]]
                duplicates += [{"existingId": d["existingId"], "existingText": d["existingText"], "text": d["text"]}
                               for d in report["duplicates"]]
        finally:
            manager.close()
        print(json.dumps({"worker": worker, "round": n, "created": created, "duplicates": duplicates, "errors": errors,
                          "maintenanceError": manager.maintainer.last_error}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(rounds() if sys.argv[1] == "rounds" else main())
