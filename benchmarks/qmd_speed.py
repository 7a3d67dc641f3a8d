"""Warm search latency through the QMD backend against the builtin engine, same workspace, same run.

For each workspace (the example workspace, and generated ones of ``--sizes`` files from
benchmarks/speed.py's generator) it indexes with both backends (``provider: none``: keyword search
on both sides, QMD's models being absent), then times ``manager.search`` for the same questions:

* wall time p50/p95/mean per search;
* CPU per search: this Python process (``time.process_time``) and, for QMD, the warm ``qmd mcp``
  process (utime+stime from /proc/<pid>/stat), so work moved into the child is not hidden;
* processes started during the timed searches: ``subprocess.Popen`` calls in this process, the QMD
  process's pid before and after, its child processes (/proc/<pid>/task/*/children), and the
  machine-wide fork counter (/proc/stat ``processes``; other users' processes count too);
* for scale, QMD the way the reference drove it: one ``qmd search --json`` process per query (cold).

    python benchmarks/qmd_speed.py --sizes 1000 --out benchmarks/results/qmd_speed.json

Results and their reading: docs/qmd.md, section "Speed".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

EXAMPLE_QUESTIONS = [
    "what database does pebble use",
    "who owns the importer",
    "when does the meal planner ship",
    "what is the image upload size limit",
    "which region is the api hosted in",
    "what did we decide about feature flags",
    "who is on call this week",
    "what is Biscuit's Chinese nickname",
    "why did the login test flake",
    "how long are database snapshots kept",
    "饼干",
    "Postgres full-text search decision",
]


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]

    return {"min_ms": round(ordered[0] * 1000, 3), "p50_ms": round(pct(50) * 1000, 3), "p95_ms": round(pct(95) * 1000, 3),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 3), "n": len(ordered)}


def _proc_cpu_s(pid: int | None) -> float:
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _children(pid: int | None) -> list[int]:
    if not pid:
        return []
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _forks() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


class PopenCounter:
    """Counts every process this Python process starts while it is installed."""

    def __init__(self) -> None:
        self.count = 0
        self._original = subprocess.Popen.__init__

    def __enter__(self) -> PopenCounter:
        original = self._original
        counter = self

        def counting(popen: Any, *args: Any, **kwargs: Any) -> None:
            counter.count += 1
            original(popen, *args, **kwargs)

        subprocess.Popen.__init__ = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.Popen.__init__ = self._original  # type: ignore[method-assign]


def _time_searches(search: Callable[[str], Any], queries: list[str], child_pid: Callable[[], int | None],
                   rounds: int, warmup: int = 5) -> dict[str, Any]:
    for q in queries[:warmup]:
        search(q)
    pid_before = child_pid()
    child_cpu = _proc_cpu_s(pid_before)
    forks = _forks()
    samples: list[float] = []
    hits = 0
    cpu = time.process_time()
    with PopenCounter() as popen:
        for _ in range(rounds):
            for q in queries:
                started = time.perf_counter()
                response = search(q)
                samples.append(time.perf_counter() - started)
                hits += bool(response.results)
    cpu = time.process_time() - cpu
    pid_after = child_pid()
    child_cpu = (_proc_cpu_s(pid_after) - child_cpu) if pid_after == pid_before else None
    n = len(samples)
    return {
        **_percentiles(samples),
        "cpu_python_ms": round(cpu / n * 1000, 3),
        "cpu_child_ms": None if child_cpu is None else round(child_cpu / n * 1000, 3),
        "answered_share": round(hits / n, 3),
        "processes": {
            "popen_calls": popen.count,
            "qmd_pid_unchanged": pid_before == pid_after if pid_before else None,
            "qmd_children_after": len(_children(pid_after)) if pid_after else None,
            "machine_forks_during": _forks() - forks,
        },
    }


def _cold_cli(manager: Any, queries: list[str]) -> dict[str, Any]:
    """One `qmd search --json` process per query (the reference's process model), same index."""
    argv = manager._argv  # the backend's own command line: same binary, env and index
    samples = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for q in queries:
        started = time.perf_counter()
        subprocess.run(argv("search", q, "--json", "-n", "10"), env=manager._env, cwd=str(manager.layout.root),
                       capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {**_percentiles(samples), "cpu_child_ms": round(cpu / len(samples) * 1000, 3), "processes_per_search": 1}


def bench_workspace(name: str, workspace: Path, queries: list[str], tmp: Path, rounds: int) -> dict[str, Any]:
    from mdrecall import open_manager

    common = {"provider": "none", "sync": {"watch": False}}
    # The builtin's recall tracking (dreaming) writes memory/.dreams/ on its first searches; creating
    # that directory then would move memory/'s mtime and make QMD's next search re-index (correctly,
    # but not what is measured here).
    (workspace / "memory" / ".dreams").mkdir(parents=True, exist_ok=True)
    builtin = open_manager(workspace, {**common, "store": {"path": str(tmp / f"{name}-builtin.sqlite")}}, use_global_config=False)
    qmd = open_manager(workspace, {**common, "backend": "qmd", "store": {"path": str(tmp / f"{name}-fallback.sqlite")},
                                   "qmd": {"indexDir": str(tmp / f"{name}-qmd"), "warmFallback": False}}, use_global_config=False)
    try:
        started = time.perf_counter()
        builtin.sync()
        builtin_index = time.perf_counter() - started
        assert qmd.wait_warm(600)
        started = time.perf_counter()
        qmd.sync()
        qmd_resync = time.perf_counter() - started
        started = time.perf_counter()
        builtin.sync()
        builtin_resync = time.perf_counter() - started
        # Files written moments ago are "racily clean" (an mtime within 2 s of the check could still
        # move): both engines re-check them on every search until a sync sees them settled.
        time.sleep(2.1)
        qmd.sync()
        builtin.sync()
        result = {
            "files": qmd.status().files,
            "queries": len(queries),
            "builtin": {"index_s": round(builtin_index, 3), "noop_resync_s": round(builtin_resync, 3),
                        "search": _time_searches(builtin.search, queries, lambda: None, rounds)},
            "qmd": {"noop_resync_s": round(qmd_resync, 3),
                    "search": _time_searches(qmd.search, queries, lambda: qmd.process.pid if qmd.process else None, rounds)},
            "qmd_cold_cli": _cold_cli(qmd, queries[: min(len(queries), 20)]),
        }
        details = qmd.status().details
        assert details["answeredBy"] == "qmd", f"QMD did not answer the timed searches: {details['fallback']}"
        result["qmd"]["process"] = details["process"]
        return result
    finally:
        qmd.close()
        builtin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000], help="generated workspaces (files); none: example only")
    parser.add_argument("--rounds", type=int, default=10, help="passes over the questions per workspace")
    parser.add_argument("--queries", type=int, default=50, help="questions for generated workspaces")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from speed import generate_workspace, make_queries

    report: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
                              "workspaces": {}}
    with tempfile.TemporaryDirectory(prefix="mdrecall-qmd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["MDRECALL_HOME"] = str(tmp / "home")
        example = tmp / "example"
        shutil.copytree(ROOT / "examples" / "workspace", example)
        shutil.rmtree(example / "memory" / ".dreams", ignore_errors=True)
        report["workspaces"]["example"] = bench_workspace("example", example, EXAMPLE_QUESTIONS, tmp, args.rounds)
        print(json.dumps({"example": report["workspaces"]["example"]}, indent=1), flush=True)
        for size in args.sizes:
            ws = tmp / f"gen-{size}"
            generate_workspace(ws, size)
            queries = make_queries(ws, args.queries)
            rounds = max(1, args.rounds // 5)
            report["workspaces"][f"generated-{size}"] = bench_workspace(f"gen{size}", ws, queries, tmp, rounds)
            print(json.dumps({f"generated-{size}": report["workspaces"][f"generated-{size}"]}, indent=1), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
