"""One-shot commands as an agent's shell runs them: a new process per command, with and without a
warm daemon (``mdrecall watch``, cli/warm/), against ``qmd search`` in the same run.

Per round, every command once, in turn (so load drifts hit them alike); each figure is the median over
``--runs`` rounds of the child's wall time and CPU time (user + system, ``RUSAGE_CHILDREN``). With
``--busy``, the rounds run again beside a competing load (one busy loop per core). What is timed:

* ``python_startup``: ``python -c pass``, the floor of any Python command;
* ``core_keyword_search``: ``open_manager`` and one ``search()`` in a new process (no CLI);
* ``cli_search_cold``: ``mdrecall search`` with ``MDRECALL_WARM=off`` (no daemon asked);
* ``cli_search_warm``: the same with a daemon serving the workspace; ``daemon_cpu_s_median`` is the
  daemon's own CPU for the command (from /proc, so it includes its watcher's background work);
* ``cli_get_*``, ``cli_status_*``: the same for ``get`` and ``status``;
* ``qmd_search``: ``qmd search QUERY -n 10`` on a QMD index of the same notes (BM25).

Every warm command is checked against its cold twin first (same exit code and output, ``checkedAt``
aside) and its path against ``MDRECALL_WARM_TRACE``. Workspace and keyword index: benchmarks/speed.py's
(``--workdir``, reused when present).

    python benchmarks/oneshot.py --files 10000 --runs 9 --busy --qmd .tools/qmd/bin/qmd --out benchmarks/results/oneshot-10k.json

Results and their reading: docs/benchmarks.md, "Fast at every size (issue 27)".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import _qmd_index, competing_load, generate_workspace

QUERY = "what did Caroline say about the adoption agency?"


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """``mdrecall watch`` for the workspace, answering one-shot commands."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"},
                                     start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 600
        while "answering one-shot" not in log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)

    def cpu(self) -> float:
        return _proc_cpu(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(2)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _masked(out: bytes) -> bytes:
    return re.sub(rb'"checkedAt": "[^"]*"', b'"checkedAt": "..."', out)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.workdir)
    ws = work / f"ws-{args.files}"
    gen = generate_workspace(ws, args.files)
    store = work / f"kw-{args.files}.sqlite"
    home = work / "home-oneshot"
    home.mkdir(parents=True, exist_ok=True)
    trace = work / "oneshot-trace.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDRECALL_") and not k.endswith("_API_KEY")}
    env |= {"MDRECALL_HOME": str(home), "MDRECALL_WARM_TRACE": str(trace), "TOKENIZERS_PARALLELISM": "false"}
    cold_env = {**env, "MDRECALL_WARM": "off"}
    bindir = Path(sys.executable).parent
    mdrecall = [str(bindir / "mdrecall")] if (bindir / "mdrecall").exists() else [sys.executable, "-m", "mdrecall"]
    common = ["-w", str(ws), "-c", "provider=none", "-c", f"store.path={store}"]
    if not store.exists():
        print(f"indexing {args.files} files (keyword-only)…", file=sys.stderr)
        _run([*mdrecall, "index", *common, "-q"], cold_env)
    shutil.rmtree(ws / "memory" / ".dreams", ignore_errors=True)

    core = (
        "from mdrecall import open_manager\n"
        f"m = open_manager({str(ws)!r}, {{'provider': 'none', 'store': {{'path': {str(store)!r}}}, 'sync': {{'watch': False}}}})\n"
        f"r = m.search({QUERY!r}); m.close(); print(len(r.results))\n"
    )
    first = "memory/daily/2023/2023-01-01-0.md"
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python_startup": ([sys.executable, "-c", "pass"], cold_env),
        "core_keyword_search": ([sys.executable, "-c", core], cold_env),
        "cli_search_cold": ([*mdrecall, "search", *common, QUERY], cold_env),
        "cli_search_warm": ([*mdrecall, "search", *common, QUERY], env),
        "cli_get_cold": ([*mdrecall, "get", *common, first], cold_env),
        "cli_get_warm": ([*mdrecall, "get", *common, first], env),
        "cli_status_cold": ([*mdrecall, "status", *common], cold_env),
        "cli_status_warm": ([*mdrecall, "status", *common], env),
    }
    if args.qmd and os.path.exists(args.qmd):
        args.qmd = os.path.abspath(args.qmd) if os.sep in args.qmd else args.qmd  # the children run elsewhere
        qmd_env = {**os.environ, **_qmd_index(args.qmd, ws, work / f"qmd-{args.files}")}
        commands["qmd_search"] = ([args.qmd, "search", QUERY, "-n", "10"], qmd_env)

    daemon = Daemon([*mdrecall, "watch", *common], env, work / "oneshot-daemon.log")
    out: dict[str, Any] = {"workspace": gen, "query": QUERY}
    try:
        out["identical"] = _check_identical(commands, trace)
        out["idle"] = _rounds(commands, args.runs, daemon, trace)
        if args.busy:
            with competing_load(args.busy):
                out["busy"] = _rounds(commands, args.runs, daemon, trace)
    finally:
        daemon.stop()
    out["ratios"] = _ratios(out)
    return out


def _check_identical(commands: dict[str, tuple[list[str], dict[str, str]]], trace: Path) -> dict[str, bool]:
    same = {}
    for name in commands:
        if name.endswith("_warm"):
            trace.write_text("")
            _, _, warm = _run(*commands[name])
            path = trace.read_text().splitlines()
            _, _, cold = _run(*commands[name.replace("_warm", "_cold")])
            if path[:1] != ["warm"]:
                raise SystemExit(f"{name} was not answered by the daemon: {path}")
            same[name.removesuffix("_warm")] = (warm.returncode, _masked(warm.stdout), warm.stderr) == (
                cold.returncode, _masked(cold.stdout), cold.stderr)  # fmt: skip
            if not same[name.removesuffix("_warm")]:
                raise SystemExit(f"{name}: the daemon's answer differs:\n{warm}\n{cold}")
    return same


def _rounds(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int, daemon: Daemon, trace: Path) -> dict[str, Any]:
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    daemon_cpu: dict[str, list[float]] = {name: [] for name in commands if name.endswith("_warm")}
    for _ in range(runs):
        for name, (argv, env) in commands.items():
            before = daemon.cpu() if name.endswith("_warm") else 0.0
            wall, cpu, done = _run(argv, env)
            if name.endswith("_warm"):
                daemon_cpu[name].append(daemon.cpu() - before)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{name} failed: {done.stderr[-800:]!r}")
            samples[name].append((wall, cpu))
    load = os.getloadavg()
    out: dict[str, Any] = {"loadavg_after": [round(x, 2) for x in load]}
    for name, rows in samples.items():
        out[name] = {"wall_s_median": round(statistics.median(w for w, _ in rows), 3),
                     "cpu_s_median": round(statistics.median(c for _, c in rows), 3),
                     "wall_s_min": round(min(w for w, _ in rows), 3), "n": len(rows)}  # fmt: skip
        if name in daemon_cpu:  # the daemon's CPU for it (/proc: its watcher's background work included)
            out[name]["daemon_cpu_s_median"] = round(statistics.median(daemon_cpu[name]), 3)
    out["warm_answers"] = sum(1 for line in trace.read_text().splitlines() if line == "warm")
    return out


def _ratios(out: dict[str, Any]) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    for phase in ("idle", "busy"):
        p = out.get(phase)
        if not p:
            continue
        q = p.get("qmd_search")
        for name in ("cli_search_warm", "cli_search_cold", "core_keyword_search"):
            if q:
                ratios[f"{phase}_{name}_wall_over_qmd"] = round(p[name]["wall_s_median"] / q["wall_s_median"], 2)
                ratios[f"{phase}_{name}_cpu_over_qmd"] = round(p[name]["cpu_s_median"] / q["cpu_s_median"], 2)
        ratios[f"{phase}_search_cold_over_warm_wall"] = round(p["cli_search_cold"]["wall_s_median"] / p["cli_search_warm"]["wall_s_median"], 2)
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10000, help="workspace size (one chunk per file)")
    parser.add_argument("--runs", type=int, default=9, help="rounds (every command once per round)")
    parser.add_argument("--busy", nargs="?", type=int, const=-1, default=0,
                        help="also measure beside a competing load (N busy processes; default one per core)")  # fmt: skip
    parser.add_argument("--qmd", default=os.environ.get("MDRECALL_QMD_BINARY"), help="QMD launcher (scripts/install-qmd.sh)")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mdrecall-speed"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.busy == -1:
        args.busy = len(os.sched_getaffinity(0))
    results = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_start": [round(x, 2) for x in os.getloadavg()]},  # fmt: skip
        "options": {"files": args.files, "runs": args.runs, "busy_processes": args.busy},
        "results": measure(args),
    }
    results["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(results, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
