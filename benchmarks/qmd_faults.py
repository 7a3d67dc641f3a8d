"""How long a search waits when QMD misbehaves, and how long QMD takes to come back once it is fixed.

Each fault is a wrapper script given as ``qmd.binary`` that runs the real ``qmd`` (scripts/install-qmd.sh)
for every command but ``qmd mcp`` (the warm process), which it breaks:

* ``slow-start``: ``qmd mcp`` starts 5 s late;
* ``garbled-handshake``: everything ``qmd mcp`` writes is mangled (no line is JSON);
* ``hung-start``: ``qmd mcp`` stops itself (SIGSTOP) before it starts;
* ``hung``: the real ``qmd mcp``, stopped with SIGSTOP once warm (alive, silent);
* ``garbage-stdout``: a junk line before every line ``qmd mcp`` writes;
* ``missing-binary``: ``qmd.binary`` names no file.

For each, on the example workspace with ``qmd.timeoutMs`` 1000 and the default ``qmd.startTimeoutMs``
(20 s), the fallback's index built beforehand (as in any session after the first, so the figures are
QMD's part): the first search right after opening (what ``mdrecall search`` does), the next searches (one
every 0.2 s for ``--follow`` seconds), who answered each; then the fault is removed (the wrapper
execs the real qmd) and searches continue until QMD answers again: the seconds that took and the
slowest search meanwhile.

    python benchmarks/qmd_faults.py --out benchmarks/results/qmd_faults.json

Results and their reading: docs/reliability.md, section "QMD under faults".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mdrecall import open_manager
from mdrecall.backends.qmd.layout import find_binary
from mdrecall.backends.qmd.settings import QmdSettings

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "what database does pebble use"
FAULTS = {
    "slow-start": 'sleep 5; exec "$QMD" "$@"',
    # A shell loop, not tr/awk: those read their input in blocks, which would stall QMD's answers instead.
    "garbled-handshake": "\"$QMD\" \"$@\" | while IFS= read -r line; do printf '%s\\n' \"$line\" | tr '{}' '<>'; done",
    "hung-start": 'kill -STOP $$; exec "$QMD" "$@"',
    "hung": 'exec "$QMD" "$@"',
    "garbage-stdout": "\"$QMD\" \"$@\" | while IFS= read -r line; do echo 'junk: not json'; printf '%s\\n' \"$line\"; done",
}


def _wrapper(path: Path, real: Path, mcp_body: str) -> Path:
    path.write_text(
        "#!/bin/sh\n"
        f'QMD="{real}"\n'
        'case " $* " in *" mcp "*) ;; *) exec "$QMD" "$@";; esac\n'
        f"{mcp_body}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _search(manager: Any) -> dict[str, Any]:
    started = time.monotonic()
    response = manager.search(QUESTION)
    return {"seconds": round(time.monotonic() - started, 3), "answeredBy": "qmd" if response.provider == "qmd" else "fallback",
            "hits": len(response.results), "warning": (response.warnings or [""])[0][:160]}


def run_fault(name: str, real: Path, workspace: Path, tmp: Path, timeout_ms: int, follow_s: float) -> dict[str, Any]:
    binary = tmp / "qmd-wrapper"
    if name == "missing-binary":
        qmd_binary = tmp / "no-such-qmd"
    else:
        qmd_binary = _wrapper(binary, real, FAULTS[name])
    config = {
        "backend": "qmd", "provider": "none", "store": {"path": str(tmp / "builtin.sqlite")}, "sync": {"watch": False},
        "qmd": {"indexDir": str(tmp / "qmd"), "binary": str(qmd_binary), "timeoutMs": timeout_ms, "retryInitialMs": 1000,
                "retryMaxMs": 4000},
    }  # fmt: skip
    with open_manager(workspace, {**config, "backend": "builtin"}, use_global_config=False) as builtin:
        builtin.sync()
    opened = time.monotonic()
    manager = open_manager(workspace, config, use_global_config=False)
    try:
        if name == "hung":
            manager.wait_warm(60)
            os.kill(manager.process.pid, signal.SIGSTOP)
        first = _search(manager)
        first["sinceOpen"] = round(time.monotonic() - opened, 3)
        later: list[dict[str, Any]] = []
        until = time.monotonic() + follow_s
        while time.monotonic() < until:
            later.append(_search(manager))
            time.sleep(0.2)
        # The fault goes away: the wrapper now runs the real qmd (a missing binary appears).
        _wrapper(binary, real, 'exec "$QMD" "$@"')
        if name == "missing-binary":
            manager.settings.binary = str(binary)
            manager.binary = binary
        fixed = time.monotonic()
        recovery: list[dict[str, Any]] = []
        while time.monotonic() - fixed < 60:
            recovery.append(_search(manager))
            if recovery[-1]["answeredBy"] == "qmd":
                break
            time.sleep(0.2)
        return {
            "first": first,
            "laterMaxSeconds": max((s["seconds"] for s in later), default=None),
            "laterSearches": len(later),
            "laterAnsweredBy": sorted({s["answeredBy"] for s in later}),
            "recoverySeconds": round(time.monotonic() - fixed, 3) if recovery[-1]["answeredBy"] == "qmd" else None,
            "recoverySearches": len(recovery),
            "recoveryMaxSearchSeconds": max(s["seconds"] for s in recovery),
            "failures": manager.backoff.failures,
        }
    finally:
        proc = manager.process
        if proc is not None and proc.pid:
            try:
                os.killpg(proc.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        manager.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", nargs="*", default=[*FAULTS, "missing-binary"])
    parser.add_argument("--timeout-ms", type=int, default=1000)
    parser.add_argument("--follow", type=float, default=3.0, help="seconds of searches after the first")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    real = find_binary(QmdSettings())
    if real is None:
        sys.exit("no qmd: run scripts/install-qmd.sh")
    results: dict[str, Any] = {"timeoutMs": args.timeout_ms, "startTimeoutMs": QmdSettings().startTimeoutMs, "faults": {}}
    for name in args.faults:
        with tempfile.TemporaryDirectory(prefix=f"qmd-fault-{name}-") as raw:
            tmp = Path(raw)
            workspace = tmp / "workspace"
            shutil.copytree(ROOT / "examples" / "workspace", workspace, symlinks=True)
            results["faults"][name] = run_fault(name, real, workspace, tmp, args.timeout_ms, args.follow)
            print(name, json.dumps(results["faults"][name]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
