"""Transcript appends reaching a long-lived process's index, with transcripts among the sources.

An agent host appends to its session transcript with every message; with ``sources: [memory,
sessions]`` each append the watcher reports starts a sync. This copies the notes of a workspace
``benchmarks/speed.py`` generated (``ws-N`` in its ``--workdir``) beside a session transcript, builds a
keyword-only index of both once, then in one process with the watcher on appends ``--messages``
messages (above ``sync.sessions.deltaMessages``, so the watcher's sync indexes them) ``--appends``
times and reports, per append: the seconds from the write until the watcher's sync had indexed it
(its debounce, ``sync.watchDebounceMs`` 1.5 s, included), the sync's own seconds, whether a search
then finds the new messages and that search's wall and CPU seconds (the first to read the grown
transcript's lines), and the process's CPU over 5 s from the write.

    python benchmarks/transcript_appends.py --workdir DIR --files 100000 --out benchmarks/results/appends.json
    PYTHONPATH=/path/to/older/src python benchmarks/transcript_appends.py --workdir DIR --files 100000 --reuse COPY

``--reuse COPY`` runs on a copy (and its index) a previous run kept with ``--keep COPY``: the same files
for two code trees (each run's appends stay: the transcript grows run by run, and the output says how
many messages it held before). ``--transcript N`` starts the transcript with N messages instead of 200:

    python benchmarks/transcript_appends.py --workdir DIR --files 1000 --transcript 20000 --keep COPY

Results and their reading: docs/benchmarks.md, "Transcripts among the sources" and "A grown
transcript re-indexed from where it grew".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRANSCRIPT = ".openclaw/sessions/main/transcripts/s.jsonl"


def _config(store: Path, watch: bool) -> dict[str, Any]:
    return {"provider": "none", "store": {"path": str(store)}, "sources": ["memory", "sessions"],
            "sync": {"watch": watch}, "dreaming": {"enabled": False}}  # fmt: skip


def _message(text: str, role: str = "user") -> str:
    return json.dumps({"role": role, "content": text}) + "\n"


def prepare(workdir: Path, files: int, into: Path, messages: int = 200) -> None:
    """The notes of ``ws-FILES``, a transcript of ``messages`` messages, and a keyword index of both."""
    from mdrecall import open_manager

    source = workdir / f"ws-{files}"
    subprocess.run(["cp", "-a", str(source), str(into / "ws")], check=True)  # mtimes kept
    transcript = into / "ws" / TRANSCRIPT
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(_message(f"Message {i} about the kestrel cluster.", "user" if i % 2 == 0 else "assistant")
                                  for i in range(messages)))  # fmt: skip
    past = time.time() - 60
    os.utime(transcript, (past, past))
    started = time.perf_counter()
    with open_manager(into / "ws", _config(into / "index.sqlite", watch=False), use_global_config=False) as m:
        indexed = m.sync().files_indexed
    print(f"indexed {indexed} files in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def measure(into: Path, appends: int, messages: int) -> list[dict[str, Any]]:
    from mdrecall import open_manager

    ws = into / "ws"
    transcript = ws / TRANSCRIPT
    m = open_manager(ws, _config(into / "index.sqlite", watch=True), use_global_config=False)
    try:
        m.search("kestrel", session_key="main")
        if m.watcher is None or not m.watcher.wait_ready(120):
            raise SystemExit("the watcher did not start")
        deadline = time.monotonic() + 60
        while not m.monitor._watcher_trusted() and time.monotonic() < deadline:  # benchmark-only: a check after the attach
            m.search("kestrel", session_key="main")
            time.sleep(0.2)
        time.sleep(3)  # the attach's own check and syncs are over
        done: list[tuple[float, Any, float]] = []
        m.monitor.add_sync_reporter(lambda _paths, report, seconds: done.append((time.perf_counter(), report, seconds)))
        out = []
        for i in range(appends):
            word = f"osprey{i}x{int(time.time())}"
            c0, t0 = time.process_time(), time.perf_counter()
            with transcript.open("a", encoding="utf-8") as fh:
                fh.writelines(_message(f"Round {i}, message {j}: the {word} figure.") for j in range(messages))
            while len(done) <= i and time.perf_counter() - t0 < 60:
                time.sleep(0.01)
            if len(done) <= i:
                raise SystemExit("the watcher's sync did not come within 60 s")
            t1, report, seconds = done[i]
            s0, sc0 = time.perf_counter(), time.thread_time()
            found = any(r.path == TRANSCRIPT for r in m.search(f"{word} figure", session_key="main").results)
            search_s, search_cpu = time.perf_counter() - s0, time.thread_time() - sc0
            time.sleep(max(0.0, 5 - (time.perf_counter() - t0)))
            out.append({"indexed_after_s": round(t1 - t0, 3), "sync_s": round(seconds, 3), "found": found,
                        "search_s": round(search_s, 3), "search_cpu_s": round(search_cpu, 3),
                        "files_indexed": report.files_indexed, "files_scanned": report.files_scanned,
                        "cpu_5s": round(time.process_time() - c0, 3)})  # fmt: skip
            print(json.dumps(out[-1]), file=sys.stderr)
        return out
    finally:
        m.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, help="speed.py's --workdir (holds ws-FILES)")
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--appends", type=int, default=4)
    ap.add_argument("--messages", type=int, default=60, help="messages per append (default: above deltaMessages, 50)")
    ap.add_argument("--transcript", type=int, default=200, help="messages in the transcript before the appends (default 200)")
    ap.add_argument("--keep", type=Path, help="keep the copy and its index in this folder")
    ap.add_argument("--reuse", type=Path, help="a folder a previous --keep left")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.transcript < 0:
        ap.error(f"--transcript {args.transcript}: a number of messages, 0 or more")
    if args.reuse is not None and args.transcript != 200:
        ap.error("--transcript sets up a new copy; --reuse runs on the transcript the copy already holds")
    if args.reuse is not None:
        if not (args.reuse / "ws").is_dir() or not (args.reuse / "index.sqlite").is_file():
            ap.error(f"--reuse {args.reuse}: not a folder a previous --keep left (ws/ and index.sqlite)")
    elif args.workdir is None:
        ap.error("--workdir (or --reuse) is required")
    elif not (args.workdir / f"ws-{args.files}").is_dir():
        ap.error(f"{args.workdir / f'ws-{args.files}'} not found: generate it with "
                 f"benchmarks/speed.py --sizes {args.files} --workdir {args.workdir}")  # fmt: skip
    tmp = home = None
    if "MDRECALL_HOME" not in os.environ:  # the user's own home is left alone
        home = os.environ["MDRECALL_HOME"] = tempfile.mkdtemp(prefix="mdrecall-appends-home-")
    try:
        if args.reuse is not None:
            into = args.reuse
        elif args.keep is not None:
            into = args.keep
            into.mkdir(parents=True, exist_ok=False)
            prepare(args.workdir, args.files, into, args.transcript)
        else:
            into = tmp = Path(tempfile.mkdtemp(prefix="mdrecall-appends-"))
            prepare(args.workdir, args.files, into, args.transcript)
        with (into / "ws" / TRANSCRIPT).open("rb") as fh:
            before = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        rows = measure(into, args.appends, args.messages)
    except KeyboardInterrupt:
        print("interrupted: nothing recorded", file=sys.stderr)
        return 130
    finally:
        for folder in (tmp, home):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
    result = {"files": args.files, "messages_per_append": args.messages, "transcript_messages_before": before,
              "loadavg": os.getloadavg(), "appends": rows}  # fmt: skip
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
