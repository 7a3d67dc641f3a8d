"""What a first keyword-only index costs: one code tree against another, in the same run.

Two workspaces, made once in ``--workdir`` and reused:

* ``notes``: benchmarks/speed.py's generated notes (``ws-FILES``: one-chunk notes, 70 % daily);
* ``transcript``: one session transcript of ``--messages`` messages, user and assistant in turn,
  written from the bench conversations' word bigrams (speed.py's ``WordModel``): a message is 1 to 12
  sentences, one in eight a pasted block of 20 to 60 lines (a log, a listing), so rendered lines are
  short and long (up to the renderer's wrap) as an agent's are.

Each ``--src LABEL=PATH`` names a source tree (``src/`` of a checkout; ``git archive <commit> src |
tar -x -C DIR`` gives an older one). Per round, every tree indexes every workspace from nothing in a
new process (``mdrecall index -c provider=none``, the transcript with ``sources: [memory,
sessions]``), in turn, so load drifts hit them alike; CPU = user + system of the child
(``RUSAGE_CHILDREN``) and wall, median and min over ``--runs`` rounds. After the rounds, every chunk
row (path, lines, hash, text) of each tree's last index is compared with the first tree's: a change
that is only faster must print "identical".

    python benchmarks/index_cost.py --workdir DIR --src before=/tmp/before/src --src after=src --runs 5

Results and their reading: docs/benchmarks.md, "Indexing a workspace".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed


def make_transcript(root: Path, messages: int, seed: int = 7) -> Path:
    """The ``transcript`` workspace (reused when its marker says the same size and seed)."""
    marker = root / ".generated.json"
    wanted = {"messages": messages, "seed": seed, "version": 1}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return root
    if root.exists():
        shutil.rmtree(root)
    model = speed.WordModel.from_bench(speed.bench_dir())
    rng = random.Random(seed)
    folder = root / ".openclaw" / "sessions" / "main" / "transcripts"
    folder.mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The team meets on Mondays.\n", encoding="utf-8")
    start = 1_764_000_000_000
    with (folder / "session.jsonl").open("w", encoding="utf-8") as out:
        for i in range(messages):
            if i % 8 == 7:
                body = "\n".join(f"{n:04d} " + model.sentence(rng, 12) for n in range(rng.randint(20, 60)))
            else:
                body = " ".join(model.sentence(rng) for _ in range(rng.randint(1, 12)))
            role = "user" if i % 2 == 0 else "assistant"
            record = {"type": "message", "message": {"role": role, "content": body, "timestamp": start + i * 30_000}}
            out.write(json.dumps(record) + "\n")
    marker.write_text(json.dumps(wanted), encoding="utf-8")
    return root


def _index(tree: str, workspace: Path, store: Path, sessions: bool, home: Path) -> tuple[float, float]:
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MDRECALL_", "PYTHON"))}
    env |= {"PYTHONPATH": str(Path(tree).resolve()), "MDRECALL_HOME": str(home), "MDRECALL_WARM": "off"}
    argv = [sys.executable, "-m", "mdrecall", "index", "-w", str(workspace), "-c", "provider=none", "-c", f"store.path={store}"]
    if sessions:
        argv += ["-c", "sources=[memory, sessions]"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise SystemExit(f"mdrecall index from {tree} failed (exit {done.returncode}): " + " / ".join(tail))
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def _rows(store: Path) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute("SELECT path, source, start_line, end_line, hash, text FROM chunks ORDER BY path, start_line, end_line, hash"))
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--src", action="append", required=True, help="LABEL=PATH of a source tree (repeatable)")
    ap.add_argument("--files", type=int, default=10_000, help="notes in the notes workspace")
    ap.add_argument("--messages", type=int, default=8_000, help="messages in the transcript")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.files < 1 or args.messages < 1 or args.runs < 1:
        ap.error("--files, --messages and --runs must be at least 1")
    if any("=" not in item or item.startswith("=") for item in args.src):
        ap.error("--src takes LABEL=PATH, e.g. --src after=src")
    trees = dict(item.split("=", 1) for item in args.src)
    for label, tree in trees.items():
        if not (Path(tree) / "mdrecall" / "__init__.py").is_file():
            ap.error(f"--src {label}={tree}: no mdrecall package there")
    args.workdir.mkdir(parents=True, exist_ok=True)
    notes = args.workdir / f"ws-{args.files}"
    speed.generate_workspace(notes, args.files)
    transcript = make_transcript(args.workdir / f"transcript-{args.messages}", args.messages)
    size = (transcript / ".openclaw" / "sessions" / "main" / "transcripts" / "session.jsonl").stat().st_size
    workspaces = {"notes": (notes, False), "transcript": (transcript, True)}
    home = args.workdir / "home"
    timings: dict[str, dict[str, list[tuple[float, float]]]] = {w: {t: [] for t in trees} for w in workspaces}
    load_start = os.getloadavg()
    for _ in range(args.runs):
        for name, (workspace, sessions) in workspaces.items():
            for label, tree in trees.items():
                timings[name][label].append(_index(tree, workspace, args.workdir / f"index-{name}-{label}.sqlite", sessions, home))
    results: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": os.getloadavg()},
        "options": {"files": args.files, "messages": args.messages, "transcript_bytes": size, "runs": args.runs, "trees": trees},
    }
    print(f"load average {load_start[0]:.1f} -> {os.getloadavg()[0]:.1f}; {args.runs} rounds; "
          f"notes: {args.files} files; transcript: {args.messages} messages, {size / 1e6:.1f} MB")  # fmt: skip
    for name in workspaces:
        first = next(iter(trees))
        reference = _rows(args.workdir / f"index-{name}-{first}.sqlite")
        for label in trees:
            cpu = [c for c, _ in timings[name][label]]
            wall = [w for _, w in timings[name][label]]
            same = _rows(args.workdir / f"index-{name}-{label}.sqlite") == reference
            results[f"{name}/{label}"] = {"cpu_s_median": round(statistics.median(cpu), 3), "cpu_s_min": round(min(cpu), 3),
                                          "wall_s_median": round(statistics.median(wall), 3), "wall_s_min": round(min(wall), 3),
                                          "chunks": len(reference), "identical_to_first": same}  # fmt: skip
            print(f"{name:10s} {label:10s} CPU median {statistics.median(cpu):6.2f} s (min {min(cpu):6.2f}), wall median "
                  f"{statistics.median(wall):6.2f} s (min {min(wall):6.2f}); {len(reference)} chunks, "
                  f"{'identical' if same else 'DIFFERENT'} rows")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    import interruptible

    interruptible.run(main, "no figures written")
