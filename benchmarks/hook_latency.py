"""What the Claude Code recall hook adds to each prompt: ``mdrecall hook recall`` as Claude Code runs
it (a new process, the UserPromptSubmit JSON on stdin), by workspace size and embedding mode.

Baselines in the same run: ``python -c pass`` (the interpreter alone) and the one-shot
``mdrecall search`` of the same question (what a user would run by hand). Each figure is the median
of ``--runs`` processes: wall time, and CPU time of the child (user + system). Corpus: benchmarks/speed.py's
synthetic notes, indexed once beforehand (the hook never builds an index).

    python benchmarks/hook_latency.py --files 100 10000 --modes none local --out benchmarks/results/hook_latency.json

The machine is shared: read ratios within one run. Results: docs/hosts/claude-code.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import generate_workspace

PROMPT = "Which database do we use for the billing service, and on which port?"


def _timed(argv: list[str], env: dict[str, str], stdin: str = "", ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-500:]}")
    return wall, cpu, done.stdout


def _median(samples: list[tuple[float, float, str]]) -> dict[str, float]:
    return {"wall_s": round(statistics.median(s[0] for s in samples), 3), "cpu_s": round(statistics.median(s[1] for s in samples), 3)}


def run(files: int, mode: str, runs: int, work: Path) -> dict[str, Any]:
    ws = work / f"ws-{files}"
    generate_workspace(ws, files)
    home = work / f"home-{mode}"
    home.mkdir(exist_ok=True)
    (ws / ".mdrecall.yaml").write_text(f"provider: {mode}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDRECALL_") and not k.endswith("_API_KEY")}
    env["MDRECALL_HOME"] = str(home)
    mdrecall = [sys.executable, "-m", "mdrecall"]
    _timed([*mdrecall, "index", "-w", str(ws)], env)
    event = json.dumps({"session_id": "bench", "transcript_path": str(work / "none.jsonl"), "cwd": str(ws),
                        "hook_event_name": "UserPromptSubmit", "prompt": PROMPT})  # fmt: skip
    hook = [_timed([*mdrecall, "hook", "recall", "-w", str(ws), "--timeout", "60"], env, event) for _ in range(runs)]
    search = [_timed([*mdrecall, "search", "-w", str(ws), PROMPT], env, ok=(0, 1)) for _ in range(runs)]  # 1: nothing found
    injected = bool(hook[-1][2].strip())
    return {"files": files, "mode": mode, "runs": runs, "hook": _median(hook), "search": _median(search), "injected": injected,
            "hookLog": (home / "logs" / "hooks.log").read_text()[-400:] if (home / "logs" / "hooks.log").exists() else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--modes", nargs="+", default=["none", "local"], help="provider values: none (keyword-only), local")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", type=Path, default=None, help="reuse generated workspaces here")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="mdrecall-hook-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    python = [_timed([sys.executable, "-c", "pass"], dict(os.environ)) for _ in range(args.runs)]
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
               "interpreter": _median(python), "cases": []}  # fmt: skip
    for mode in args.modes:
        for files in args.files:
            case = run(files, mode, args.runs, work)
            results["cases"].append(case)
            print(json.dumps(case))
    print(json.dumps({"interpreter": results["interpreter"]}))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
