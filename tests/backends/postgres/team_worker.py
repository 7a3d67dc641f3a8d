"""One agent for the concurrency tests: edits its workspace, syncs and searches in a loop, and checks
on every search that nothing private of another agent comes back. Prints ``ready`` once the store is
open, and one JSON line at the end.

``--through-faults alice,bob,...`` (test_faults.py): the server restarts under it, so a StoreError (the
one clear line a fault becomes) is counted as an outage and the loop goes on; any other exception is
an error. Without it every exception ends the run.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from mdrecall import open_manager
from mdrecall.errors import StoreError

AGENTS = ("alice", "bob", "carol")


def main() -> int:
    workspace, dsn, agent, seconds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    faults = "--through-faults" in sys.argv
    agents = tuple(sys.argv[sys.argv.index("--through-faults") + 1].split(",")) if faults else AGENTS
    rng = random.Random(agent)
    config = {"backend": "postgres", "provider": "none", "sync": {"watch": False, "onSearch": False},
              "postgres": {"dsn": dsn, "agentId": agent, "poolMin": 1, "poolMax": 2}}
    stats: dict[str, Any] = {"agent": agent, "syncs": 0, "searches": 0, "edits": 0, "violations": [],
                             "outages": 0, "errors": [], "synced_after_last_outage": False}
    with open_manager(workspace, config, use_global_config=False) as manager:
        print("ready", flush=True)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            n = rng.randrange(12)
            shared = n % 3 == 0
            rel = f"memory/shared/s{n}.md" if shared else f"memory/p{n}.md"
            path = workspace / rel
            action = rng.random()
            if action < 0.15 and path.exists():
                path.unlink()
            else:
                token = f"TEAM-{agent}" if shared else f"PRIVATE-{agent}"
                body = "\n".join(f"- {token} kestrel note {rng.randrange(10**6)} line {i}" for i in range(rng.randint(1, 30)))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"# {rel}\n{body}\n", encoding="utf-8")
            stats["edits"] += 1
            try:
                manager.sync()
                stats["syncs"] += 1
                results = manager.search("kestrel note", min_score=0, max_results=50).results
            except StoreError:
                if not faults:
                    raise
                stats["outages"] += 1
                stats["synced_after_last_outage"] = False
                time.sleep(0.2)
                continue
            except Exception as exc:
                if not faults:
                    raise
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.2)
                continue
            for result in results:
                for other in agents:
                    if other != agent and f"PRIVATE-{other}" in result.snippet:
                        stats["violations"].append(result.path)
                if result.path.startswith("@") and not result.path.split("/", 1)[1].startswith("memory/shared/"):
                    stats["violations"].append(result.path)
            stats["searches"] += 1
            stats["synced_after_last_outage"] = True
        _final_sync(manager, faults)
    print(json.dumps(stats))
    return 1 if stats["violations"] or stats["errors"] else 0


def _final_sync(manager: Any, faults: bool) -> None:
    give_up = time.monotonic() + 60
    while True:
        try:
            manager.sync()
            return
        except StoreError:
            if not faults or time.monotonic() > give_up:
                raise
            time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(main())
