"""How fast the Postgres backend fails and recovers under faults (docs/reliability.md, "Postgres under
faults"), on a throwaway embedded PostgreSQL of its own (tests/pghelpers.py ``fault_server``).

    python benchmarks/pg_faults.py [--notes 20] [--runs 5] [--out pg_faults.json]

Measures, with one agent and a workspace of ``--notes`` notes (provider none, keyword search):

* warm search: the median in-process search, and the liveness check each pooled connection gets as
  it leaves the pool (one empty statement);
* terminated: every session of the agent ended by ``pg_terminate_backend``; the next search's time
  (or the error it raised);
* server down: a CLI ``mdrecall search`` and ``mdrecall status`` against a stopped server (wall time
  of the whole command, Python start-up included; the lines it printed on stderr; ``cliSearchServerUp``
  is the same command with the server up), ``open_manager`` in this process (the part of the command
  that waits on the server), and searches of an already open manager (the first, which finds its
  pooled connections dead, and the next);
* restarted: the first in-process search after the server is back (the pool reconnects by itself).

Only public APIs (``open_manager``, the CLI) are used, so the same script measures an older checkout
(``PYTHONPATH=<checkout>/src``) for comparison. Wall times on a shared machine: read ratios within
one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _timed(work: Callable[[], object]) -> tuple[float, str | None]:
    """(milliseconds, the error's type and first line, or None)."""
    t0 = time.perf_counter()
    try:
        work()
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return round((time.perf_counter() - t0) * 1000, 2), error


def _cli(ws: Path, *args: str, timeout: float = 120) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "mdrecall", *args, "-w", str(ws)], capture_output=True, text=True,
                              timeout=timeout)
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, stderr = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return {"seconds": round(time.perf_counter() - t0, 2), "exit": code, "stderrLines": len(lines),
            "lastLine": lines[-1][:300] if lines else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each timed step")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import psycopg

    import mdrecall
    from mdrecall import open_manager
    from pghelpers import fault_server, pg_config

    server = fault_server()
    ws = Path(tempfile.mkdtemp(prefix="mdrecall-pgf-ws-"))
    try:
        db = server.new_database()
        dsn = db.add_agent("alice", "core")
        role = str(psycopg.conninfo.conninfo_to_dict(dsn)["user"])
        (ws / "memory").mkdir()
        for i in range(args.notes):
            (ws / "memory" / f"n{i:03d}.md").write_text(f"# Note {i}\n- kestrel harbour fact {i}\n", encoding="utf-8")
        (ws / ".mdrecall.yaml").write_text(json.dumps({"backend": "postgres", "provider": "none",
                                                       "postgres": {"dsn": dsn, "agentId": "alice"}}))
        config = pg_config(dsn, "alice", postgres={"poolMin": 2, "poolMax": 4},
                           sync={"watch": False, "onSearch": False})
        out: dict[str, Any] = {"mdrecall": str(Path(mdrecall.__file__).parent), "notes": args.notes, "runs": args.runs}

        def terminate() -> int:
            with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
                return len(conn.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                                        "WHERE usename = %s AND datname = %s", (role, db.name)).fetchall())

        with open_manager(ws, config, use_global_config=False) as manager:
            manager.sync()

            def search() -> object:
                return manager.search("kestrel harbour", min_score=0)

            for _ in range(5):
                search()
            warm = [_timed(search)[0] for _ in range(max(20, args.runs * 10))]
            out["warmSearchMs"] = {"median": statistics.median(warm), "min": min(warm)}
            with psycopg.connect(dsn, autocommit=True) as conn:
                checks = []
                for _ in range(200):
                    t0 = time.perf_counter()
                    conn.execute("")
                    checks.append((time.perf_counter() - t0) * 1000)
            out["livenessCheckMs"] = {"median": round(statistics.median(checks), 4)}

            after_terminate = []
            for _ in range(args.runs):
                ended = terminate()
                after_terminate.append({"sessionsEnded": ended, **dict(zip(("ms", "error"), _timed(search)))})
                search()  # the pool settled again
            out["searchAfterTerminate"] = after_terminate

            server.stop("fast")
            try:
                out["cliSearchServerDown"] = _cli(ws, "search", "kestrel harbour", timeout=90)
                out["cliStatusServerDown"] = _cli(ws, "status", timeout=90)
                opens = [_timed(lambda: open_manager(ws, config, use_global_config=False).close())
                         for _ in range(args.runs)]
                out["openServerDown"] = {"ms": [t for t, _ in opens], "error": opens[-1][1]}
                first, later = _timed(search), [_timed(search) for _ in range(args.runs)]
                out["searchServerDown"] = {"firstMs": first[0], "firstError": first[1],
                                           "laterMs": [t for t, _ in later], "laterError": later[-1][1]}
            finally:
                t_start = time.perf_counter()
                server.start()
                started = time.perf_counter() - t_start
            first_back = _timed(search)
            out["searchAfterRestart"] = {"serverStartS": round(started, 2), "firstMs": first_back[0],
                                         "firstError": first_back[1], "nextMs": _timed(search)[0]}
        out["cliSearchServerUp"] = _cli(ws, "search", "kestrel harbour")
        out["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]}
        out["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    finally:
        server.close()
        shutil.rmtree(ws, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
