"""The fixed cost of a cold one-shot ``mdrecall search``: one code tree against another, same run.

Each ``--src LABEL=PATH`` names a source tree (``src/`` of a checkout; ``git archive <commit> src | tar
-x -C DIR`` gives an older one). Per round, every tree runs one keyword-only ``mdrecall search`` in a
new process, in turn (so load drifts hit them alike), on a copy of examples/workspace indexed once;
``--runs`` rounds, CPU = user + system of the child (``RUSAGE_CHILDREN``), median and min. With
``--callgrind``, each tree's search also runs once under valgrind's callgrind: instructions, which do
not depend on the machine's load (``PYTHONHASHSEED=0``, so that two runs count alike).

    python benchmarks/coldstart.py --src before=/tmp/before/src --src after=src --runs 15 --callgrind

``--workspace WS --store PATH``: an indexed workspace instead (benchmarks/oneshot.py's
``ws-10000`` and ``kw-10000.sqlite`` in its ``--workdir``), searched as oneshot.py searches it.

``--site DIR`` runs Python with ``-S`` and DIR (plus the tree) as its whole path: a site-packages
folder without the venv's ``.pth`` files, e.g. one made of links to every entry of the venv's
site-packages but the example plugin's (an installation with no third-party plugin).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

QUERY = "what did Caroline say about the adoption agency?"
ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, capture_output=True, check=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", required=True, help="LABEL=PATH of a source tree (repeatable)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions (valgrind)")
    parser.add_argument("--site", help="run with python -S and this folder as site-packages")
    parser.add_argument("--workspace", help="an indexed workspace to search instead of examples/workspace")
    parser.add_argument("--store", help="its index (with --workspace)")
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.src)
    work = Path(tempfile.mkdtemp(prefix="mdrecall-coldstart-"))
    try:
        ws = Path(args.workspace) if args.workspace else work / "ws"
        if not args.workspace:
            shutil.copytree(ROOT / "examples" / "workspace", ws)
        env0 = {k: v for k, v in os.environ.items() if not k.startswith(("MDRECALL_", "PYTHON"))}
        env0 |= {"MDRECALL_HOME": str(work / "home"), "MDRECALL_WARM": "off"}
        py = [sys.executable, *(["-S"] if args.site else [])]
        store = ["-c", f"store.path={args.store}"] if args.store else []
        search = ["-m", "mdrecall", "search", "-w", str(ws), "-c", "provider=none", *store, QUERY]

        def env_for(path: str) -> dict[str, str]:
            return {**env0, "PYTHONPATH": os.pathsep.join([str(Path(path).resolve()), *([args.site] if args.site else [])])}

        if not args.workspace:
            first = next(iter(trees.values()))
            subprocess.run([*py, "-m", "mdrecall", "index", "-w", str(ws), "-c", "provider=none"], env=env_for(first),
                           capture_output=True, check=True)  # fmt: skip
        for path in trees.values():  # bytecode written, the recall store made: what every later run finds
            _run([*py, *search], env_for(path))
        cpu: dict[str, list[float]] = {label: [] for label in trees}
        for _ in range(args.runs):
            for label, path in trees.items():
                cpu[label].append(_run([*py, *search], env_for(path)))
        print(f"load average {os.getloadavg()[0]:.1f}, {args.runs} rounds")
        for label, xs in cpu.items():
            line = f"{label:12s} CPU median {statistics.median(xs):.3f} s, min {min(xs):.3f} s"
            if args.callgrind:
                out = work / "callgrind.out"
                done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *py, *search],
                                      env={**env_for(trees[label]), "PYTHONHASHSEED": "0"}, capture_output=True, text=True)  # fmt: skip
                found = re.search(r"Collected : (\d+)", done.stderr)
                line += f", {int(found.group(1)) / 1e6:,.0f} M instructions" if found else ", callgrind failed"
            print(line)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
