"""How the web inspector's pages scale with the workspace (``mdrecall ui``).

For each size it writes a workspace of N small notes (75 % dated, 25 % topic notes), indexes it
keyword-only, serves the inspector in this process (uvicorn in a thread, the watcher on as
``mdrecall ui`` runs it) and fetches each page ``--repeat`` times over HTTP. Reported per page: the
median wall time, the median CPU time of this process per request (server and client share it, so
it stays meaningful when other processes compete for the cores) and the response size. Paged pages
should stay flat from 1k to 10k files; Health grows with N because ``status()`` walks every file.

    python benchmarks/ui_pages.py --sizes 1000 10000 --out benchmarks/out/ui_pages.json
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PAGES = [
    "/browse",
    "/browse?page=LAST",
    "/browse?kind=dated&page=20",
    "/browse?q=n00042",
    "/browse/file?path=MEMORY.md",
    "/search?q=topic7+server3",
    "/dreaming",
    "/health",
]


def build(root: Path, notes: int) -> None:
    memory = root / "memory"
    (memory / "topics").mkdir(parents=True)
    (memory / "daily").mkdir()
    for i in range(notes):
        if i % 4 == 0:
            path = memory / "topics" / f"topic-{i:06d}.md"
        else:
            path = memory / "daily" / f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}-n{i:05d}.md"
        path.write_text(f"# Note {i}\n\n- fact {i} about topic{i % 50} on server{i % 7}\n", encoding="utf-8")
    (root / "MEMORY.md").write_text("# Long-term memory\n\n- The big fact.\n", encoding="utf-8")


def measure(size: int, repeat: int) -> dict[str, Any]:
    import httpx
    import uvicorn

    from mdrecall import open_manager
    from mdrecall.http_guard import HttpSecurity
    from mdrecall.ui import build_app, inspector_config

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        build(ws, size)
        config = inspector_config(ws, {"provider": "none", "store": {"path": str(Path(tmp) / "index.sqlite")}})
        with open_manager(ws, config) as manager:
            started = time.perf_counter()
            manager.sync()
            index_s = time.perf_counter() - started
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            server = uvicorn.Server(uvicorn.Config(build_app(manager, HttpSecurity.for_binding("127.0.0.1", port)),
                                                   log_level="warning"))
            thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
            thread.start()
            while not server.started:
                time.sleep(0.02)
            last = -(-(size + 1) // 50)
            out: dict[str, Any] = {"files": size + 1, "index_s": round(index_s, 2), "pages": {}}
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                    for page in PAGES:
                        path = page.replace("LAST", str(last))
                        client.get(path)  # warm: first status(), caches
                        walls, cpus, size_bytes = [], [], 0
                        for _ in range(repeat):
                            w, c = time.perf_counter(), time.process_time()
                            response = client.get(path)
                            walls.append(time.perf_counter() - w)
                            cpus.append(time.process_time() - c)
                            assert response.status_code == 200, (path, response.status_code)
                            size_bytes = len(response.content)
                        out["pages"][page] = {
                            "wall_ms": round(statistics.median(walls) * 1000, 1),
                            "cpu_ms": round(statistics.median(cpus) * 1000, 1),
                            "bytes": size_bytes,
                        }
            finally:
                server.should_exit = True
                thread.join(10)
                sock.close()
            return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    results = {"sizes": [measure(n, args.repeat) for n in args.sizes]}
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
