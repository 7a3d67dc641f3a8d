"""A long day: the MCP server and ``mdrecall watch`` on one workspace under a steady churn of edits.

Two long-lived processes share one workspace and one index, as on a real machine: ``mdrecall mcp``
(stdio, driven by the official MCP client; its own watcher on, the default) and ``mdrecall watch``.
The workspace's ``.mdrecall.yaml`` holds the configuration both read (default provider ``local``:
the bundled model, hybrid search; ``sources: [memory, sessions]``). A churn driver writes at a
steady rate: appends to daily notes, editor-style atomic replaces, in-place edits, renames, deletes,
new topic notes (some in new subdirectories), transcript appends and ``memory_write`` calls through
the server. Every write that plants a fact (a unique token) is searched for until it is found, and
every fact a write removes until it is gone: the delay is the freshness figure, and a fact not found
(or not gone) within ``--bound`` seconds is an error. Between those, facts planted or removed long
ago are probed at random: an old fact missing, or a removed one found, is an error (a wrong answer).

Every ``--sample`` seconds: RSS, open file descriptors and threads of both processes, the WAL and
index size, search latency p50/p95 since the last sample, stale answers, errors, load average. Any
exception, tool error, line on either process's stderr, non-zero exit or wrong answer is an error.

At the end the churn stops, the processes settle (a search with a new session key indexes transcript
appends the watcher deferred, as any session start does), every fact is checked once more, both
processes stop, and the index is compared with a fresh rebuild of the same files (files, chunks, FTS
tokens, skipped files, and each chunk's vector). Trends: a series is **flat** when the mean of the
last third of the run exceeds the mean of the second third by no more than the noise (twice the
second third's standard deviation, at least 2 MiB / 1 descriptor / 1 thread); the first third is
warm-up (model load, first index, caches filling). Slopes are least squares over the last two thirds.

    nice -n 10 python benchmarks/soak.py --minutes 30 --out benchmarks/results/soak.json

tests/test_soak.py runs the same driver for ~20 s (no flatness verdict: that needs the long run).
Figures: docs/reliability.md, "Soak".

This module is longer than 500 lines because it is one experiment: the churn model, the MCP driver,
the process sampler and the final comparison share the state of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # indexcheck: "index equals a fresh rebuild", shared with the tests

WORDS = ["amber", "cobra", "delta", "ember", "fjord", "gecko", "heron", "indigo", "jasper", "kestrel", "lumen",
         "marmot", "nectar", "osprey", "pelican", "quartz", "raven", "saffron", "tundra", "umber", "walnut",
         "yarrow", "zephyr", "basalt", "cinder", "dahlia", "falcon", "garnet", "harbor", "juniper"]  # fmt: skip
TOPICS = ["deploys", "billing", "search", "hiring", "oncall", "pricing", "backups", "roadmap", "security", "design"]
TOKEN = re.compile(r"\bkx[a-z0-9]{8}\b")
SESSION_KEY = "main"
META_KEY = "mdrecall/sessionKey"
AGENT_LOG = "memory/agent-log.md"
SESSIONS = ".openclaw/sessions"
#: How long after a rename or delete a search may still cite the old file: the OS event's way to the
#: watcher (watchfiles waits 50 ms for quiet, at most 400 ms) on a loaded machine.
GRACE_S = 1.0


@dataclass
class SoakOptions:
    seconds: float = 1800.0
    ops_per_second: float = 1.0
    probes_per_second: float = 1.0
    sample_every: float = 10.0
    bound: float = 15.0  # seconds a planted fact may take to be found (or a removed one to be gone)
    provider: str = "local"
    notes: int = 30  # steady-state number of memory notes
    seed: int = 28
    settle: float = 5.0
    work: Path | None = None  # keep everything here (default: a temporary directory, removed)
    sweep_limit: int = 400  # facts checked once more at the end, of each kind (random sample past it)


@dataclass
class Fact:
    token: str
    path: str
    kind: str  # "memory" | "sessions"
    planted_at: float
    found_at: float | None = None
    removed_at: float | None = None
    gone_at: float | None = None


@dataclass
class Run:
    """Everything one run observed; ``report()`` turns it into the results JSON."""

    started: float = field(default_factory=time.monotonic)
    ops: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    searches: int = 0
    gets: int = 0
    stale: int = 0
    latencies: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)  # latencies since the last sample
    window_stale: int = 0
    found_delays: list[float] = field(default_factory=list)
    transcript_delays: list[float] = field(default_factory=list)
    deferred: int = 0  # transcript facts not found within the bound (allowed: delta thresholds)
    gone_delays: list[float] = field(default_factory=list)
    late: int = 0
    lingering: int = 0
    probes_live: int = 0
    probes_removed: int = 0
    missed: int = 0
    ghosts: int = 0
    vanished: dict[str, float] = field(default_factory=dict)  # path -> when it was renamed or deleted
    raced_paths: int = 0  # hits citing a file gone less than GRACE_S before the search
    ghost_paths: int = 0  # ... gone longer: wrong answers
    samples: list[dict[str, Any]] = field(default_factory=list)

    def error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < 100:
            self.errors.append(f"{time.monotonic() - self.started:7.1f}s {message}")


# --- the workspace and its churn ------------------------------------------------------------------


def read(path: Path) -> str:
    """A note as an editor shows it (the odd notes hold bytes that are not UTF-8)."""
    return path.read_bytes().decode("utf-8", errors="replace")


class Churn:
    """The driver's file writes. Facts are unique tokens (``kx`` + 8 characters) on their own line;
    which file holds which is read back from the files, so renames and replaces never lose track."""

    def __init__(self, ws: Path, run: Run, rng: random.Random, notes: int) -> None:
        self.ws = ws
        self.run = run
        self.rng = rng
        self.target = notes
        self.day = 0
        self.serial = 0
        self.transcript = 0

    def token(self) -> str:
        return "kx" + "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))

    def fact_line(self, token: str) -> str:
        r = self.rng
        return f"- The {r.choice(WORDS)} {r.choice(TOPICS)} codename is {token} (set by {r.choice(WORDS)}).\n"

    def filler(self) -> str:
        r = self.rng
        return f"- {r.choice(TOPICS).capitalize()}: {r.choice(WORDS)} {r.choice(WORDS)} met {r.choice(WORDS)} about {r.choice(TOPICS)}.\n"

    def plant(self, rel: str, kind: str = "memory") -> tuple[str, str]:
        token = self.token()
        self.run.facts[token] = Fact(token, rel, kind, time.monotonic())
        return token, self.fact_line(token)

    def removed(self, text: str) -> list[str]:
        now = time.monotonic()
        gone = []
        for token in TOKEN.findall(text):
            fact = self.run.facts.get(token)
            if fact is not None and fact.removed_at is None:
                fact.removed_at = now
                gone.append(token)
        return gone

    def vanish(self, path: Path) -> None:
        self.run.vanished[self.rel(path)] = time.monotonic()

    def moved(self, text: str, rel: str) -> None:
        for token in TOKEN.findall(text):
            if token in self.run.facts:
                self.run.facts[token].path = rel

    def notes(self) -> list[Path]:
        """Memory notes the churn may rename or delete (not MEMORY.md, not the agent's log)."""
        return sorted(p for p in (self.ws / "memory").rglob("*.md") if p.relative_to(self.ws).as_posix() != AGENT_LOG)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.ws).as_posix()

    def daily(self) -> Path:
        return self.ws / "memory" / f"2026-{1 + self.day // 28:02d}-{1 + self.day % 28:02d}.md"

    def seed(self) -> None:
        """A workspace already at the churn's steady state (note lengths spread up to their caps,
        full transcripts), so that trends measure the processes and not a growing workspace."""
        r = self.rng
        (self.ws / "memory").mkdir(parents=True)
        facts = lambda rel, n: "".join(self.filler() + self.plant(rel)[1] for _ in range(n))  # noqa: E731
        (self.ws / "MEMORY.md").write_text("# Memory\n\n## Decisions\n" + facts("MEMORY.md", 12))
        (self.ws / AGENT_LOG).write_text("# Agent log\n" + facts(AGENT_LOG, 12))
        for _ in range(self.target // 2):
            self.new_daily()
            with self.daily().open("a") as fh:
                fh.write(facts(self.rel(self.daily()), r.randint(0, 27)))
        while len(self.notes()) < self.target:
            self.new_topic()
        for _ in range(3):
            self.new_transcript()
            path = self.transcript_path()
            with path.open("a") as fh:
                for _ in range(r.randint(self.target, 2 * self.target)):
                    token, line = self.plant(self.rel(path), kind="sessions")
                    fh.write(json.dumps({"role": "user", "content": self.filler().strip("- \n")}) + "\n")
                    fh.write(json.dumps({"role": "assistant", "content": line.strip("- \n")}) + "\n")

    # -- operations (each returns the tokens it planted and removed) -------------------------------
    def new_daily(self, facts: list[str] | None = None) -> list[str]:
        self.day += 1
        path = self.daily()
        lines = facts if facts is not None else [self.plant(self.rel(path))[1]]
        path.write_text(f"# 2026 day {self.day}\n\n" + "".join(self.filler() for _ in range(4)) + "".join(lines))
        return TOKEN.findall("".join(lines))

    def append_daily(self) -> list[str]:
        path = self.daily()
        if not path.exists() or read(path).count("\n") > 60:
            return self.new_daily()
        token, line = self.plant(self.rel(path))
        with path.open("a") as fh:
            fh.write(self.filler() + line)
        return [token]

    def new_topic(self) -> list[str]:
        self.serial += 1
        r = self.rng
        folder = self.ws / "memory" / ("topics" if r.random() < 0.5 else f"projects/p{self.serial % 7}/{r.choice(WORDS)}")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{r.choice(TOPICS)}-{self.serial}.md"
        planted = [self.plant(self.rel(path)) for _ in range(r.randint(1, 3))]
        body = "".join(self.filler() for _ in range(r.randint(2, 12))) + "".join(line for _, line in planted)
        path.write_text(f"# {path.stem}\n\n{body}")
        return [t for t, _ in planted]

    def editor_save(self) -> tuple[list[str], list[str]]:
        """How editors save: the whole file written to a temporary name, renamed over the original.
        Drops a fact line (or the oldest lines of a long file), adds a fact, reworks a filler line."""
        r = self.rng
        pool = [*self.notes(), self.ws / "MEMORY.md", self.ws / AGENT_LOG]
        path = r.choice(pool)
        lines = read(path).replace("\x00", "").splitlines(keepends=True)  # the save repairs an odd note
        dropped: list[str] = []
        facts = [i for i, line in enumerate(lines) if TOKEN.search(line)]
        if len(lines) > 40:
            dropped, lines = lines[2:12], lines[:2] + lines[12:]
        elif facts and r.random() < 0.6:
            dropped = [lines.pop(r.choice(facts))]
        fillers = [i for i, line in enumerate(lines) if line.startswith("- ") and not TOKEN.search(line)]
        if fillers:
            lines[r.choice(fillers)] = self.filler()
        token, line = self.plant(self.rel(path))
        lines.append(line)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(lines))
        os.replace(tmp, path)
        return [token], self.removed("".join(dropped))

    def edit_in_place(self) -> None:
        """A write into the same inode (truncate and write), half the time keeping the size."""
        path = self.rng.choice(self.notes())
        text = read(path)
        title_end = text.find("\n")
        if title_end > 2 and self.rng.random() < 0.5:
            i = title_end - 1  # a letter of the title: no fact changes
            text = text[:i] + self.rng.choice("abcdefgh") + text[i + 1 :]
        else:
            text += self.filler()
        path.write_text(text)

    def rename(self) -> None:
        path = self.rng.choice(self.notes())
        self.serial += 1
        folder = self.ws / "memory" / ("topics" if self.rng.random() < 0.7 else "archive")
        folder.mkdir(parents=True, exist_ok=True)
        new = folder / f"{path.stem.split('~')[0]}~r{self.serial}.md"
        text = read(path)
        path.rename(new)
        self.vanish(path)
        self.moved(text, self.rel(new))

    def odd_note(self) -> None:
        """A note the index must skip (NUL bytes, not UTF-8) or that holds nothing; editor saves
        later turn it into text, renames move it, deletes remove it."""
        self.serial += 1
        path = self.ws / "memory" / "topics" / f"odd-{self.serial}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = self.rng.choice(["nul", "latin1", "empty"])
        body = {"nul": b"# odd\n\x00\x01 binary\n", "latin1": "# odd\ncaf\xe9 cr\xe8me\n".encode("latin-1"), "empty": b""}[kind]
        path.write_bytes(body)

    def folders(self) -> list[Path]:
        """Leaf folders of project notes (memory/projects/pN/<word>...), which move and go whole."""
        return sorted(p for p in (self.ws / "memory" / "projects").glob("p*/*") if p.is_dir() and any(p.rglob("*.md")))

    def move_folder(self) -> None:
        """A whole folder of notes moved elsewhere (a user reorganising): one event for many files."""
        folders = self.folders()
        if not folders:
            return
        folder = self.rng.choice(folders)
        self.serial += 1
        new = self.ws / "memory" / "projects" / f"p{self.serial % 7}" / f"{folder.name.split('~')[0]}~m{self.serial}"
        new.parent.mkdir(parents=True, exist_ok=True)
        texts = {p.relative_to(folder): read(p) for p in folder.rglob("*.md")}
        folder.rename(new)
        for rel, text in texts.items():
            self.vanish(folder / rel)
            self.moved(text, self.rel(new / rel))

    def delete_folder(self) -> list[str]:
        folders = self.folders()
        if not folders:
            return self.delete()
        folder = self.rng.choice(folders)
        files = list(folder.rglob("*.md"))
        text = "".join(read(p) for p in files)
        shutil.rmtree(folder)
        for path in files:
            self.vanish(path)
        return self.removed(text)

    def delete(self) -> list[str]:
        notes = [p for p in self.notes() if p != self.daily()]  # not the note daily appends go to
        path = self.rng.choice(notes)
        text = read(path)
        path.unlink()
        self.vanish(path)
        return self.removed(text)

    def transcript_path(self) -> Path:
        return self.ws / SESSIONS / SESSION_KEY / "transcripts" / f"s{self.transcript}.jsonl"

    def new_transcript(self) -> list[str]:
        self.transcript += 1
        path = self.transcript_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"role": "user", "content": f"New session {self.transcript}."}) + "\n")
        removed: list[str] = []
        for old in sorted(path.parent.glob("s*.jsonl"), key=lambda p: int(p.stem[1:]))[:-3]:
            text = read(old)
            old.unlink()
            removed += self.removed(text)
        return removed

    def transcript_append(self) -> tuple[list[str], list[str]]:
        path = self.transcript_path()
        removed = self.new_transcript() if read(path).count("\n") > 150 else []
        path = self.transcript_path()
        token, line = self.plant(self.rel(path), kind="sessions")
        messages = [{"role": "user", "content": self.filler().strip("- \n")},
                    {"role": "assistant", "content": line.strip("- \n")}]  # fmt: skip
        with path.open("a") as fh:
            fh.write("".join(json.dumps(m) + "\n" for m in messages))
        return [token], removed


# --- processes ------------------------------------------------------------------------------------


def _exit_clock(pid: int) -> Callable[[], float | None]:
    """Start timing a process's exit; the returned function says after how many seconds it exited
    (a zombie counts as exited; None: still running after 10 s)."""
    started = time.monotonic()
    done: list[float] = []

    def poll() -> None:
        while time.monotonic() - started < 10:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                state = "gone"
            if state in ("Z", "X", "gone"):
                done.append(time.monotonic() - started)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    def result() -> float | None:
        thread.join(11)
        return round(done[0], 2) if done else None

    return result


def _interrupt(proc: subprocess.Popen[bytes], run: Run, patience: float = 30.0) -> float | None:
    """Ctrl-C, as a user stops ``mdrecall watch``; seconds until it exited. One that has not exited
    after ``patience`` seconds is asked for its threads' stacks (faulthandler, on SIGABRT: they go to
    its stderr and so into the errors), then killed."""
    if proc.poll() is not None:
        run.error(f"mdrecall watch had already exited ({proc.returncode})")
        return None
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(patience)
        return round(time.monotonic() - started, 2)
    except subprocess.TimeoutExpired:
        run.error(f"mdrecall watch still running {patience:.0f} s after Ctrl-C; its stacks follow")
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return None


def _children_matching(word: str) -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if ppid == me and word.encode() in cmd:
            found.append(int(entry.name))
    return found


def proc_sample(pid: int) -> dict[str, Any]:
    """RSS (MiB), open descriptors (all, and those on the index files) and threads of ``pid``."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    fds = 0
    db_fds = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        fds += 1
        try:
            if ".sqlite" in os.readlink(fd):
                db_fds += 1
        except OSError:
            pass
    mib = lambda key: round(int(status[key].split()[0]) / 1024, 2)  # noqa: E731
    # RssAnon is the heap (what a leak grows); RssFile the mapped libraries and files.
    return {"rss_mib": mib("VmRSS"), "rss_anon_mib": mib("RssAnon"), "rss_file_mib": mib("RssFile"), "fds": fds,
            "db_fds": db_fds, "threads": int(status["Threads"])}  # fmt: skip


class StderrTail:
    """New lines on a process's stderr since the last look: every one counts as an error."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.offset = 0

    def check(self, run: Run) -> None:
        if not self.path.exists():
            return
        with self.path.open() as fh:
            fh.seek(self.offset)
            text = fh.read()
            self.offset = fh.tell()
        for line in text.splitlines():
            if line.strip():
                run.error(f"{self.name} stderr: {line.strip()[:300]}")


# --- the MCP driver -------------------------------------------------------------------------------


class Driver:
    def __init__(self, session: Any, run: Run, ws: Path, timeout: float = 120.0) -> None:
        self.session = session
        self.run = run
        self.ws = ws
        self.timeout = timeout
        self.last: dict[str, Any] = {}  # the last search's answer, in short, for error messages

    def explain(self, fact: Fact) -> str:
        """What a wrong answer about ``fact`` looked like: how long ago its file changed, the answer."""
        try:
            age = f"{time.time() - (self.ws / fact.path).stat().st_mtime:.1f}s"
        except OSError:
            age = "gone"
        return f"its file last changed {age} ago; answer {json.dumps(self.last)[:600]}"

    async def call(self, tool: str, arguments: dict[str, Any], key: str = SESSION_KEY,
                   expected: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any] | None:  # fmt: skip
        """The tool's answer (None: it failed, an error is recorded; ``expected`` names tool errors
        that are right answers, returned as they are)."""
        try:
            with anyio.fail_after(self.timeout):
                result = await self.session.call_tool(tool, arguments, meta={META_KEY: key})
        except Exception as exc:
            self.run.error(f"{tool} {arguments}: {type(exc).__name__}: {exc}")
            return None
        data = result.structured_content or {}
        if result.is_error and expected is not None and expected(data):
            return data
        if result.is_error:
            self.run.error(f"{tool} {arguments}: tool error {json.dumps(data)[:300]}")
            return None
        return data

    async def has(self, token: str, key: str = SESSION_KEY) -> bool | None:
        """Whether a search finds ``token`` (None: the search failed). A hit whose snippet does not
        show it is read with memory_get, as an agent would."""
        started = time.perf_counter()
        asked_at = time.monotonic()
        data = await self.call("memory_search", {"query": token, "minScore": 0, "maxResults": 10, "corpus": "all"}, key)
        elapsed = (time.perf_counter() - started) * 1000
        run = self.run
        run.searches += 1
        run.latencies.append(elapsed)
        run.window.append(elapsed)
        if data is None:
            return None
        if data.get("stale"):
            run.stale += 1
            run.window_stale += 1
        results = data.get("results", [])
        self.last = {"stale": data.get("stale"), "warnings": data.get("warnings"), "mode": data.get("mode"),
                     "hits": [f"{r.get('path')}#L{r.get('startLine')}-L{r.get('endLine')} {r.get('score', 0):.2f}"
                              for r in results[:5]]}  # fmt: skip
        for hit in results:
            self.check_path(hit, asked_at, data)
        if any(token in r.get("snippet", "").lower() for r in results):
            return True
        for hit in results[:3]:
            if hit.get("source") != "memory":
                continue
            run.gets += 1
            lines = hit["endLine"] - hit["startLine"] + 1
            path = hit["path"]
            got = await self.call("memory_get", {"path": path, "from": hit["startLine"], "lines": min(lines, 120)}, key,
                                  expected=lambda d, p=path: d.get("code") == "not_found" and p in run.vanished)  # fmt: skip
            if got is not None and token in got.get("text", "").lower():
                return True
        return False

    def check_path(self, hit: dict[str, Any], asked_at: float, data: dict[str, Any]) -> None:
        """A hit citing a file renamed or deleted before the search was asked: allowed while the
        change's event may still be on its way (``GRACE_S``), a wrong answer after that."""
        gone_at = self.run.vanished.get(hit.get("path", ""))
        if gone_at is None or hit.get("source") != "memory":
            return
        age = asked_at - gone_at
        if age <= GRACE_S:
            self.run.raced_paths += 1
            return
        self.run.ghost_paths += 1
        self.run.error(f"a search cited {hit['path']}, gone {age:.2f}s before it was asked (stale: {data.get('stale')}, "
                       f"warnings: {data.get('warnings')}, freshness: {data.get('freshness')})")  # fmt: skip


async def watch_fact(driver: Driver, fact: Fact, bound: float, removal: bool) -> None:
    """Search until a planted fact is found (or a removed one is gone); record the delay. A fact
    appended to a transcript may wait for the delta thresholds (by design, docs/reliability.md,
    "Growing transcripts"): its delay is recorded apart, and only the final sweep requires it."""
    run = driver.run
    strict = removal or fact.kind == "memory"
    since = fact.removed_at if removal else fact.planted_at
    assert since is not None
    while True:
        if not removal and fact.removed_at is not None:
            return  # removed before it was seen: its removal is watched instead
        found = await driver.has(fact.token)
        now = time.monotonic()
        if found is not None and found != removal:
            if removal:
                fact.gone_at = now
                run.gone_delays.append(now - since)
            else:
                fact.found_at = now
                (run.found_delays if strict else run.transcript_delays).append(now - since)
            return
        if now - since > bound:
            if not strict:
                run.deferred += 1
            elif removal:
                run.lingering += 1
                run.error(f"removed fact {fact.token} ({fact.path}) still found {now - since:.1f}s after its removal: {driver.explain(fact)}")
            else:
                run.late += 1
                run.error(f"planted fact {fact.token} ({fact.path}) not found {now - since:.1f}s after it was written: {driver.explain(fact)}")
            return
        await anyio.sleep(0.2 if strict else 1.0)


async def churn_loop(driver: Driver, churn: Churn, opts: SoakOptions, deadline: float, tg: Any) -> None:
    run = driver.run
    rng = churn.rng
    period = 1.0 / opts.ops_per_second
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        count = len(churn.notes())
        grow = 8 if count < churn.target else 2
        shrink = 8 if count > churn.target else 2
        ops: dict[str, float] = {"append_daily": 30, "editor_save": 14, "edit_in_place": 6, "rename": 8,
                                 "move_folder": 3, "delete": shrink, "delete_folder": shrink / 4, "odd_note": 1, "new_topic": grow, "transcript": 14, "memory_write": 5}  # fmt: skip
        op = rng.choices(list(ops), weights=list(ops.values()))[0]
        planted: list[str] = []
        removed: list[str] = []
        try:
            if op == "append_daily":
                planted = churn.append_daily()
            elif op == "editor_save":
                planted, removed = churn.editor_save()
            elif op == "edit_in_place":
                churn.edit_in_place()
            elif op == "rename":
                churn.rename()
            elif op == "delete":
                removed = churn.delete()
            elif op == "odd_note":
                churn.odd_note()
            elif op == "move_folder":
                churn.move_folder()
            elif op == "delete_folder":
                removed = churn.delete_folder()
            elif op == "new_topic":
                planted = churn.new_topic()
            elif op == "transcript":
                planted, removed = churn.transcript_append()
            else:
                token, line = churn.plant(AGENT_LOG)
                written = await driver.call("memory_write", {"text": line.strip("- \n"), "target": AGENT_LOG})
                planted = [token] if written is not None else []
                if written is None:
                    churn.run.facts.pop(token)
        except OSError as exc:  # the driver is the only writer: any failure here is a bug in the driver
            run.error(f"churn {op}: {type(exc).__name__}: {exc}")
        run.ops[op] = run.ops.get(op, 0) + 1
        for token in planted:
            fact = run.facts[token]
            fact.planted_at = time.monotonic()  # the write has completed
            tg.start_soon(watch_fact, driver, fact, opts.bound, False)
        for token in removed:
            tg.start_soon(watch_fact, driver, run.facts[token], opts.bound, True)
        next_at += period
        await anyio.sleep(max(0.0, next_at - time.monotonic()))


async def probe_loop(driver: Driver, opts: SoakOptions, deadline: float) -> None:
    """Old facts, at random: one confirmed long ago must be found at once, one removed long ago must
    never come back."""
    run = driver.run
    rng = random.Random(opts.seed + 1)
    while time.monotonic() < deadline:
        await anyio.sleep(1.0 / opts.probes_per_second)
        now = time.monotonic()
        settled = now - opts.bound
        live = [f for f in run.facts.values() if f.found_at is not None and f.found_at < settled and f.removed_at is None]
        gone = [f for f in run.facts.values() if f.gone_at is not None and f.gone_at < settled]
        if live and rng.random() < 0.5:
            fact = rng.choice(live)
            run.probes_live += 1
            found = await driver.has(fact.token)
            if found is False and fact.removed_at is None:
                run.missed += 1
                run.error(f"old fact {fact.token} ({fact.path}) not found: {driver.explain(fact)}")
        elif gone:
            fact = rng.choice(gone)
            run.probes_removed += 1
            if await driver.has(fact.token):
                run.ghosts += 1
                run.error(f"removed fact {fact.token} ({fact.path}) found again: {driver.explain(fact)}")


async def sample_loop(driver: Driver, opts: SoakOptions, pids: dict[str, int], store: Path, tails: list[StderrTail],
                      deadline: float) -> None:  # fmt: skip
    run = driver.run
    while True:
        sample: dict[str, Any] = {"t": round(time.monotonic() - run.started, 1), "load1": os.getloadavg()[0]}
        for name, pid in pids.items():
            try:
                sample[name] = proc_sample(pid)
            except (OSError, KeyError) as exc:
                run.error(f"{name} process {pid} gone ({type(exc).__name__})")
        for suffix, key in (("", "db_bytes"), ("-wal", "wal_bytes")):
            try:
                sample[key] = (store.parent / (store.name + suffix)).stat().st_size
            except FileNotFoundError:
                sample[key] = 0
        window = sorted(run.window)
        sample["searches"] = len(window)
        sample["search_ms_p50"] = round(_pct(window, 50), 1) if window else None
        sample["search_ms_p95"] = round(_pct(window, 95), 1) if window else None
        sample["stale"] = run.window_stale
        run.window = []
        run.window_stale = 0
        status = await driver.call("memory_status", {})
        if status is not None:
            watcher = (status.get("watcher") or {}) if isinstance(status.get("watcher"), dict) else {}
            sample["files"] = status.get("files")
            sample["chunks"] = status.get("chunks")
            sample["watcher_errors"] = watcher.get("errors")
            sample["watcher_restarts"] = watcher.get("restarts")
        for tail in tails:
            tail.check(run)
        sample["errors"] = run.error_count
        run.samples.append(sample)
        if time.monotonic() >= deadline:
            return
        await anyio.sleep(min(opts.sample_every, max(0.0, deadline - time.monotonic())))


# --- the run --------------------------------------------------------------------------------------


def _commit() -> str | None:
    """The commit of the mdrecall that ran (``MDRECALL_SOAK_COMMIT`` when run from an exported tree)."""
    if os.environ.get("MDRECALL_SOAK_COMMIT"):
        return os.environ["MDRECALL_SOAK_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def _summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    return {"n": len(values), "p50": round(_pct(values, 50), 3), "p95": round(_pct(values, 95), 3), "max": round(max(values), 3)}


def config_text(opts: SoakOptions, store: Path) -> str:
    return (f"provider: {opts.provider}\nsources: [memory, sessions]\nstore:\n  path: {store}\n")  # fmt: skip


def trend(samples: list[dict[str, Any]], get: Callable[[dict[str, Any]], float | None], floor: float) -> dict[str, Any]:
    """Second vs last third of the run (the first is warm-up), and the slope per hour over both."""
    points = [(s["t"], v) for s in samples if (v := get(s)) is not None]
    if len(points) < 6:
        return {"flat": None, "why": "fewer than 6 samples"}
    third = (points[-1][0] - points[0][0]) / 3
    start = points[0][0]
    second = [v for t, v in points if start + third <= t < start + 2 * third]
    last = [v for t, v in points if t >= start + 2 * third]
    tail = [(t, v) for t, v in points if t >= start + third]
    if len(second) < 2 or len(last) < 2:
        return {"flat": None, "why": "too few samples per third"}
    mt = statistics.fmean(t for t, _ in tail)
    mv = statistics.fmean(v for _, v in tail)
    denom = sum((t - mt) ** 2 for t, _ in tail)
    slope = sum((t - mt) * (v - mv) for t, v in tail) / denom * 3600 if denom else 0.0
    tolerance = max(floor, 2 * statistics.stdev(second))
    growth = statistics.fmean(last) - statistics.fmean(second)
    return {"first": round(points[0][1], 2), "end": round(points[-1][1], 2), "max": round(max(v for _, v in points), 2),
            "second_third_mean": round(statistics.fmean(second), 2), "last_third_mean": round(statistics.fmean(last), 2),
            "growth": round(growth, 2), "tolerance": round(tolerance, 2), "slope_per_hour": round(slope, 2),
            "flat": growth <= tolerance}  # fmt: skip


def _vectors(db: Path) -> dict[str, Any]:
    import apsw
    import numpy as np

    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = con.execute("SELECT c.id, e.embedding FROM chunks c LEFT JOIN embedding_cache e ON e.rowid = c.vector_id")
        return {cid: None if blob is None else np.frombuffer(blob, dtype=np.float16).astype(np.float32) for cid, blob in rows}
    finally:
        con.close()


def compare_with_rebuild(ws: Path, store: Path, opts: SoakOptions, work: Path) -> dict[str, Any]:
    import numpy as np

    from indexcheck import diff, fresh_index, index_content, integrity

    live = index_content(store)
    fresh_db = work / "fresh.sqlite"
    started = time.monotonic()
    fresh = fresh_index(ws, {"provider": opts.provider, "sources": ["memory", "sessions"], "sync": {"watch": False},
                             "dreaming": {"enabled": False}}, fresh_db)  # fmt: skip
    out: dict[str, Any] = {"integrity": integrity(store), "rebuild_s": round(time.monotonic() - started, 1),
                           "files": len(live["files"]), "chunks": len(live["chunks"]), "fts_rows": live["fts_rows"],
                           "skipped": len(live["skipped"]), "diff": diff(live, fresh)}  # fmt: skip
    if opts.provider != "none":
        a, b = _vectors(store), _vectors(fresh_db)
        missing = sorted(c for c, v in a.items() if v is None)
        worst = min((float(np.dot(a[c], b[c]) / (np.linalg.norm(a[c]) * np.linalg.norm(b[c])))
                     for c in a if a[c] is not None and b.get(c) is not None), default=1.0)  # fmt: skip
        out["vectors"] = {"chunks_without_vector": len(missing), "min_cosine_to_rebuild": round(worst, 6)}
        if missing or worst < 0.999:
            out["diff"] += f"\nvectors: {len(missing)} chunk(s) without a vector, lowest cosine to the rebuild {worst:.4f}"
    out["equal"] = out["diff"] == "" and out["integrity"] == "ok"
    return out


async def _sweep(driver: Driver, opts: SoakOptions) -> dict[str, int]:
    """Every fact once more (a random sample past ``sweep_limit``): live ones found, removed ones gone."""
    run = driver.run
    rng = random.Random(opts.seed + 2)
    live = [f for f in run.facts.values() if f.removed_at is None]
    gone = [f for f in run.facts.values() if f.removed_at is not None]
    out = {"live_checked": 0, "live_missing": 0, "removed_checked": 0, "removed_found": 0}
    for fact in rng.sample(live, min(len(live), opts.sweep_limit)):
        out["live_checked"] += 1
        if not await driver.has(fact.token):
            out["live_missing"] += 1
            run.error(f"after settling, fact {fact.token} ({fact.path}) not found: {driver.explain(fact)}")
    for fact in rng.sample(gone, min(len(gone), opts.sweep_limit)):
        out["removed_checked"] += 1
        if await driver.has(fact.token):
            out["removed_found"] += 1
            run.error(f"after settling, removed fact {fact.token} ({fact.path}) still found: {driver.explain(fact)}")
    return out


async def _wait_clean(driver: Driver, seconds: float) -> dict[str, Any]:
    """memory_status until it says the index matches the files (its last answer)."""
    deadline = time.monotonic() + seconds
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = await driver.call("memory_status", {}) or {}
        if status.get("clean"):
            break
        await anyio.sleep(1.0)
    return status


async def _settle(driver: Driver, opts: SoakOptions) -> dict[str, Any]:
    """Let the watchers finish; then a new session's first search indexes what was deferred."""
    await anyio.sleep(opts.settle)
    before = await driver.call("memory_status", {}) or {}
    await driver.has("kxsettle00", key="soak-settle")  # a new session key: its first search syncs in full
    status = await _wait_clean(driver, 120)
    return {"pending_before": before.get("pendingChanges"), "clean": status.get("clean"),
            "pending_after": status.get("pendingChanges")}  # fmt: skip


async def _drive(opts: SoakOptions, ws: Path, work: Path, store: Path, env: dict[str, str]) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    run = Run()
    churn = Churn(ws, run, random.Random(opts.seed), opts.notes)
    churn.seed()
    watch_err = work / "watch.stderr"
    with (work / "watch.stdout").open("w") as out, watch_err.open("w") as err:
        # Ctrl-C must reach it as a user's would: a background job inherits SIGINT ignored, and
        # Python then keeps it ignored (mdrecall watch would never see the interrupt).
        watch = subprocess.Popen([sys.executable, "-m", "mdrecall", "watch", "-w", str(ws)], stdout=out, stderr=err, env=env,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    server_err = work / "mcp.stderr"
    params = StdioServerParameters(command=sys.executable, args=["-m", "mdrecall", "mcp", "-w", str(ws)], env=env)
    result: dict[str, Any] = {}
    try:
        with server_err.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                servers = _children_matching("mcp")
                if len(servers) != 1:
                    raise RuntimeError(f"expected one MCP server process, found {servers}")
                pids = {"server": servers[0], "watcher": watch.pid}
                driver = Driver(session, run, ws)
                started = time.monotonic()
                await driver.has("kxwarmup00")  # answers at once (from the files while the first index runs)
                result["first_search_s"] = round(time.monotonic() - started, 1)
                first = await _wait_clean(driver, 900)  # the churn starts on a complete index
                result["first_index_s"] = round(time.monotonic() - started, 1)
                if not first.get("clean"):
                    run.error(f"the first index was not complete after 900 s: {first.get('pendingChanges')}")
                seeded = len(run.facts)
                for fact in run.facts.values():  # indexed by the first search: from now on they must be found
                    fact.found_at = fact.planted_at = time.monotonic()
                tails = [StderrTail(server_err, "mcp"), StderrTail(watch_err, "watch")]
                run.started = time.monotonic()
                deadline = run.started + opts.seconds
                async with anyio.create_task_group() as tg:
                    tg.start_soon(sample_loop, driver, opts, pids, store, tails, deadline)
                    tg.start_soon(probe_loop, driver, opts, deadline)
                    await churn_loop(driver, churn, opts, deadline, tg)
                result["churn_s"] = round(time.monotonic() - run.started, 1)
                result["seeded_facts"] = seeded
                result["settle"] = await _settle(driver, opts)
                result["sweep"] = await _sweep(driver, opts)
                result["server_pid"] = pids["server"]
                result["server_alive_at_end"] = Path(f"/proc/{pids['server']}").exists()
                exited = _exit_clock(pids["server"])  # the client closes the server's stdin: it must exit
        # A figure, not an error: the server's own shutdown takes ~0.1 s; the rest is the interpreter
        # unloading onnxruntime and the modules (~0.8 s at a load of 5), past the SDK's 2 s grace
        # (then SIGTERM: nothing is left to lose by then) only on a machine loaded far beyond its cores.
        result["server_exit_s"] = exited()
    finally:
        result["watch_exit_s"] = _interrupt(watch, run)
    result["watch_rc"] = watch.returncode
    if watch.returncode != 0:
        run.error(f"mdrecall watch exited {watch.returncode}")
    for tail in (StderrTail(server_err, "mcp"), StderrTail(watch_err, "watch")):
        tail.check(run)  # whatever came after the last sample, shutdown included (checked from the start)
    syncs = (work / "watch.stdout").read_text().count("] sync after ")
    result["watch_syncs"] = syncs
    result["run"] = run
    return result


def run_soak(opts: SoakOptions) -> dict[str, Any]:
    work = opts.work if opts.work is not None else Path(tempfile.mkdtemp(prefix="mdrecall-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    ws = work / "workspace"
    store = work / "index.sqlite"
    for stale in (ws, work / "home"):
        shutil.rmtree(stale, ignore_errors=True)
    for leftover in work.glob("*.sqlite*"):
        leftover.unlink()
    ws.mkdir()
    (ws / ".mdrecall.yaml").write_text(config_text(opts, store))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDRECALL_")}
    env["MDRECALL_HOME"] = str(work / "home")
    env["PYTHONFAULTHANDLER"] = "1"  # a hung process can be asked for its stacks (SIGABRT)
    env["PYTHONUNBUFFERED"] = "1"  # watch's output is whole even when it is killed
    load_start = os.getloadavg()
    try:
        outcome = anyio.run(_drive, opts, ws, work, store, env)
        run: Run = outcome.pop("run")
        final = compare_with_rebuild(ws, store, opts, work)
        if not final["equal"]:
            run.error(f"index differs from a fresh rebuild: {final['diff'][:500]}")
        return report(opts, run, outcome, final, load_start)
    finally:
        if opts.work is None:
            shutil.rmtree(work, ignore_errors=True)


def report(opts: SoakOptions, run: Run, outcome: dict[str, Any], final: dict[str, Any], load_start: tuple[float, ...]) -> dict[str, Any]:
    samples = run.samples
    series: dict[str, tuple[Callable[[dict[str, Any]], float | None], float]] = {}
    for proc in ("server", "watcher"):
        for key, floor in (("rss_mib", 2.0), ("rss_anon_mib", 2.0), ("fds", 1.0), ("threads", 1.0)):
            series[f"{proc}_{key}"] = ((lambda s, p=proc, k=key: s.get(p, {}).get(k)), floor)
    series["wal_mib"] = ((lambda s: s["wal_bytes"] / 2**20), 1.0)
    series["index_mib"] = ((lambda s: s["db_bytes"] / 2**20), 1.0)
    series["search_ms_p50"] = ((lambda s: s["search_ms_p50"]), 5.0)
    trends = {name: trend(samples, get, floor) for name, (get, floor) in series.items()}
    watched = [k for k in trends if k.endswith(("_rss_mib", "fds", "threads"))]
    loads = [s["load1"] for s in samples]
    flat = None if any(trends[k]["flat"] is None for k in watched) else all(trends[k]["flat"] for k in watched)
    removed = [f for f in run.facts.values() if f.removed_at is not None]
    return {
        "command": "python benchmarks/soak.py " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("soak.py") else None,
        "commit": _commit(),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "nice": os.nice(0),
                    "load1_start": round(load_start[0], 2), "load1_mean": round(statistics.fmean(loads), 2) if loads else None,
                    "load1_max": round(max(loads), 2) if loads else None},  # fmt: skip
        "duration_s": outcome.get("churn_s"),
        "first_search_s": outcome.get("first_search_s"),
        "first_index_s": outcome.get("first_index_s"),
        "ops": run.ops,
        "writes": sum(run.ops.values()),
        "watch_syncs": outcome.get("watch_syncs"),
        "searches": run.searches,
        "gets": run.gets,
        "search_ms": _summary(run.latencies),
        "stale_answers": run.stale,
        "seed": {"notes": opts.notes, "facts": outcome.get("seeded_facts")},
        "freshness": {"planted": len(run.facts) - (outcome.get("seeded_facts") or 0), "found_delay_s": _summary(run.found_delays), "late": run.late,
                      "removed": len(removed), "gone_delay_s": _summary(run.gone_delays), "lingering": run.lingering,
                      "transcript_found_delay_s": _summary(run.transcript_delays), "transcript_deferred": run.deferred,
                      "bound_s": opts.bound},  # fmt: skip
        "probes": {"old_live": run.probes_live, "missed": run.missed, "old_removed": run.probes_removed, "ghosts": run.ghosts},
        "cited_gone_files": {"within_grace": run.raced_paths, "after_grace": run.ghost_paths, "grace_s": GRACE_S},
        "settle": outcome.get("settle"),
        "sweep": outcome.get("sweep"),
        "final": final,
        "processes": {"server_pid": outcome.get("server_pid"), "server_alive_at_end": outcome.get("server_alive_at_end"),
                      "server_exit_s": outcome.get("server_exit_s"), "watch_rc": outcome.get("watch_rc"),
                      "watch_exit_s": outcome.get("watch_exit_s")},  # fmt: skip
        "trends": trends,
        "verdict": {"errors": run.error_count, "index_equals_rebuild": final["equal"], "flat": flat,
                    "flat_rule": "last third's mean - second third's mean <= max(floor, 2 * stdev of the second third); "
                                 "floors: 2 MiB RSS, 1 descriptor, 1 thread"},  # fmt: skip
        "errors": run.errors,
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--ops-per-second", type=float, default=1.0)
    parser.add_argument("--probes-per-second", type=float, default=1.0)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--bound", type=float, default=15.0, help="seconds a fact may take to appear or vanish")
    parser.add_argument("--provider", default="local", help="local (the bundled model, hybrid) or none (keyword-only)")
    parser.add_argument("--notes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    opts = SoakOptions(seconds=args.minutes * 60, ops_per_second=args.ops_per_second, probes_per_second=args.probes_per_second,
                       sample_every=args.sample, bound=args.bound, provider=args.provider, notes=args.notes, seed=args.seed,
                       work=args.keep)  # fmt: skip
    # The commit the processes start on: HEAD may move while a long run goes on.
    os.environ["MDRECALL_SOAK_COMMIT"] = _commit() or ""
    result = run_soak(opts)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    short = {k: result[k] for k in ("duration_s", "writes", "searches", "search_ms", "stale_answers", "freshness", "probes",
                                    "sweep", "verdict")}  # fmt: skip
    short["trends"] = {k: {f: v.get(f) for f in ("first", "end", "growth", "tolerance", "slope_per_hour", "flat")}
                       for k, v in result["trends"].items()}  # fmt: skip
    print(json.dumps(short, indent=1))
    print("\n".join(result["errors"][:20]))
    sys.exit(0 if result["verdict"]["errors"] == 0 and result["verdict"]["index_equals_rebuild"] else 1)


if __name__ == "__main__":
    main()
