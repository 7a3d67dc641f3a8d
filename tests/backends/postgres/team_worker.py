"""One agent for the concurrency test: edits its workspace, syncs and searches in a loop, and checks
on every search that nothing private of another agent comes back. Prints one JSON line at the end."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from mdrecall import open_manager

AGENTS = ("alice", "bob", "carol")


def main() -> int:
    workspace, dsn, agent, seconds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    rng = random.Random(agent)
    config = {"backend": "postgres", "provider": "none", "sync": {"watch": False, "onSearch": False},
              "postgres": {"dsn": dsn, "agentId": agent, "poolMin": 1, "poolMax": 2}}
    stats = {"agent": agent, "syncs": 0, "searches": 0, "edits": 0, "violations": []}
    deadline = time.monotonic() + seconds
    with open_manager(workspace, config, use_global_config=False) as manager:
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
            manager.sync()
            stats["syncs"] += 1
            for result in manager.search("kestrel note", min_score=0, max_results=50).results:
                for other in AGENTS:
                    if other != agent and f"PRIVATE-{other}" in result.snippet:
                        stats["violations"].append(result.path)
                if result.path.startswith("@") and not result.path.split("/", 1)[1].startswith("memory/shared/"):
                    stats["violations"].append(result.path)
            stats["searches"] += 1
        manager.sync()
    print(json.dumps(stats))
    return 1 if stats["violations"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
