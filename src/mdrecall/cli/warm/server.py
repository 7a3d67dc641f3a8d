"""The daemon side of the warm path: a Unix socket in a long-lived process (``mdrecall watch``) that
runs one-shot clients' ``search``, ``get`` and ``status`` as they would have run them.

How an answer is made the same as the client's own: the command line goes through the same Click
commands and error handling (:func:`mdrecall.cli.app.run`) in the client's working directory, with
the client's ``MDRECALL_WORKSPACE``/``MDRECALL_SESSION_KEY`` (``options.REQUEST_ENVIRON``), its
terminal flags, and what the command prints captured in order; the manager it gets
(``options.DAEMON``) is lent only when the command's workspace, effective configuration
(config files and ``-c`` as the client's process would read them now) and configuring environment
variables are the daemon's, and otherwise the daemon declines before the command touches anything.
``search`` and ``get`` use the daemon's long-lived manager (a one-shot configuration: no watcher,
as the client would have opened it; the watch's own manager keeps the index fresh; it checks the
files before every search as a new process does, one ``stat`` each, and walks them in full every
few minutes rather than every second). A command whose
answer depends on being a new process gets a manager of its own, opened and closed for it: ``status``
(it reports the process: what it synced, recorded, loaded) and a search with a session key (a new
process starts that session: ``sync.onSessionStart``).

One command runs at a time (the working directory is the process's); a client waits at most
``client.TAKE_TIMEOUT`` for its turn, then runs the command itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from mdrecall.cli.warm import protocol

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager

#: Waiting for a connected client's request.
REQUEST_TIMEOUT = 2.0
#: Connections handled at once (each waits for its turn; more are closed: their clients run the
#: command themselves).
MAX_CONNECTIONS = 16
#: How often the long-lived manager walks the files in full (:meth:`WarmServer._open` says why).
SERVING_RECONCILE_MS = 300_000
#: Values mdrecall's own processes give these variables when unset (``os.environ.setdefault`` in
#: cli/app.py and the local provider): a client that never ran them has the same effective value.
_PROCESS_DEFAULTS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class NotServed(BaseException):
    """The daemon must not answer this request; raised inside the command before it does anything.
    A BaseException: the command's own error handling (``except Exception``) must not turn it into
    an answer."""


class _Routed(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` while the daemon serves: a thread running a client's command
    writes into that command's capture, every other thread to the process's own stream."""

    def __init__(self, original: Any, number: int, local: threading.local) -> None:
        self.original = original
        self.number = number
        self._local = local

    def _capture(self) -> _Capture | None:
        capture: _Capture | None = getattr(self._local, "capture", None)
        return capture

    def write(self, text: str) -> int:
        capture = self._capture()
        if capture is None:
            if self.original is None:  # a process without the stream (pythonw, closed descriptors)
                return len(text)
            written: int = self.original.write(text)
            return written
        if not isinstance(text, str):  # as a text stream refuses bytes (Click probes with b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            capture.chunks.append([self.number, text])
        return len(text)

    def flush(self) -> None:
        if self._capture() is None:
            self.original.flush()

    def isatty(self) -> bool:
        capture = self._capture()
        return bool(self.original.isatty()) if capture is None else capture.tty[self.number - 1]

    def fileno(self) -> int:
        if self._capture() is not None:
            raise io.UnsupportedOperation("a captured stream has no file descriptor")
        descriptor: int = self.original.fileno()
        return descriptor

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8" if self._capture() is not None else str(self.original.encoding)

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        capture = self._capture()
        return capture.errors[self.number - 1] if capture is not None else self.original.errors

    def writable(self) -> bool:
        return True


class _Capture:
    def __init__(self, tty: Sequence[bool], errors: Sequence[str | None]) -> None:
        self.chunks: list[list[Any]] = []
        self.tty = [bool(t) for t in tty]
        self.errors = list(errors)


def _client_gone(conn: socket.socket) -> bool:
    """Whether the client hung up while its request waited (it then runs the command itself)."""
    timeout = conn.gettimeout()
    conn.setblocking(False)  # a socket with a timeout would wait for data to peek at
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        conn.settimeout(timeout)


def config_key(config: MemoryConfig) -> str:
    """The effective configuration, with the paths a process resolves against its working directory
    resolved (the same ``store.path: x.sqlite`` is another index elsewhere)."""
    paths = (config.store.path, config.store.vector.extensionPath, config.local.model)
    resolved = [os.path.abspath(os.path.expanduser(p)) if p else None for p in paths]
    return json.dumps([config.model_dump(mode="json"), resolved], sort_keys=True, default=str)


def _starts_a_session(config: MemoryConfig) -> bool:
    """Whether the command is a search with a session key that a new process would treat as that
    session's start (``sync.onSessionStart``: a sync first, transcripts in full). The long-lived
    manager starts each session once, so such a search gets a manager of its own, as in a new process."""
    ctx = click.get_current_context(silent=True)
    key = ctx.params.get("session_key") if ctx is not None else None
    return bool(key) and config.sync.onSessionStart


def _relative_paths(config: MemoryConfig) -> list[str]:
    """Settings holding a path relative to the working directory that the engine opens again later
    (a lock file, another connection): the daemon changes its directory while it serves."""
    named = {"store.path": config.store.path, "store.vector.extensionPath": config.store.vector.extensionPath}
    return [key for key, value in named.items() if value and not os.path.isabs(os.path.expanduser(value))]


class WarmServer:
    """Serves one workspace with the configuration a one-shot command given ``overrides`` would read.

    :meth:`start` opens the long-lived manager and the socket in a background thread (so the caller
    is not held up by a model load); ``say`` reports what happened, one line at a time.
    """

    def __init__(self, workspace: str, overrides: Sequence[str], say: Callable[[str], None]) -> None:
        self.workspace = protocol.workspace_path(workspace)
        self.overrides = tuple(overrides)
        self.path = protocol.socket_path(self.workspace, os.environ)
        self._say = say
        self._cwd = os.getcwd()
        self._turn = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._local = threading.local()
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self._manager: MemorySearchManager | None = None
        self._key = ""
        self._build = ""
        self._routed: tuple[_Routed, _Routed] | None = None

    # -- life -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="mdrecall-warm", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Whether the socket is listening (False: not yet, or the warm path is off: ``say`` said why)."""
        return self._ready.wait(timeout) and self._listener is not None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)  # it removes the socket (and leaves a model load it is in to finish)
        with self._turn:  # a command still running finishes first
            if self._manager is not None:
                self._manager.close()
                self._manager = None
            self._unroute()

    def __enter__(self) -> WarmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _main(self) -> None:
        try:
            if self._open():
                self._listen()
        except Exception as exc:  # never take the watch down with it
            self._say(f"warm path off: {type(exc).__name__}: {exc}")
        finally:
            self._close_socket()
            self._ready.set()

    def _open(self) -> bool:
        if not protocol.available():
            self._say("warm path off: this system cannot tell a socket's server who connects (no SO_PEERCRED)")
            return False
        from mdrecall.cli.options import load_cli_config, load_model, open_cli_manager

        config = load_cli_config(self.workspace, self.overrides)
        relative = _relative_paths(config)
        if relative:
            self._say(f"warm path off: {', '.join(relative)} is a relative path (make it absolute to serve one-shot commands)")
            return False
        folder = os.path.dirname(self.path)
        if not protocol.make_private_dir(folder):
            self._say(f"warm path off: {folder} is not a directory only this user can enter")
            return False
        if not self._take_lock():
            self._say(f"warm path off: another process serves this workspace ({self.path})")
            return False
        self._key = config_key(config)
        self._build = protocol.build_id()
        # A new process trusts the snapshot its index's last sync stored (a stat of every file, no
        # walk, whatever sync.reconcileIntervalMs says); a long-lived manager without a watcher walks
        # the files whenever its last walk is older than that (1 s by default: every search, 0.3 s
        # of CPU at 10k files). Walking only every few minutes keeps the daemon's checks as thorough
        # as a new process's (its stat check runs before every search) at a third of the cost.
        reconcile = max(config.sync.reconcileIntervalMs, SERVING_RECONCILE_MS)
        manager = open_cli_manager(self.workspace, self.overrides, sync={"reconcileIntervalMs": reconcile})
        try:
            load_model(manager, quiet=True)  # the first client's search must not pay for it
        except BaseException:
            manager.close()
            raise
        with self._turn:
            if self._stop.is_set():  # closed meanwhile
                manager.close()
                return False
            self._manager = manager
        return True

    def _take_lock(self) -> bool:
        """One daemon per socket: the holder of ``<socket>.lock`` owns the socket's path, so a socket
        file found there by the holder was left by a daemon that died and is replaced."""
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def _listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a stale socket: its daemon died without removing it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o600)  # the directory (0700) already keeps others out meanwhile
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        listener.listen(MAX_CONNECTIONS)
        listener.settimeout(0.5)
        self._listener = listener
        self._route()
        self._ready.set()
        self._say(f"answering one-shot search, get and status here (socket {self.path})")
        while not self._stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    break
                raise
            if not self._slots.acquire(blocking=False):
                conn.close()  # too many waiting: that client runs the command itself
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), name="mdrecall-warm-request", daemon=True).start()

    def _close_socket(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _route(self) -> None:
        self._routed = (_Routed(sys.stdout, 1, self._local), _Routed(sys.stderr, 2, self._local))
        sys.stdout, sys.stderr = self._routed

    def _unroute(self) -> None:
        if self._routed is not None:
            out, err = self._routed
            if sys.stdout is out:
                sys.stdout = out.original
            if sys.stderr is err:
                sys.stderr = err.original
            self._routed = None

    # -- one client -------------------------------------------------------------------------------
    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            with conn:
                uid = protocol.peer_uid(conn)
                if uid != os.geteuid():
                    self._say(f"refused a connection from uid {uid}: only this user's commands are answered")
                    return
                conn.settimeout(REQUEST_TIMEOUT)
                try:
                    request = protocol.receive(conn, protocol.MAX_REQUEST)
                except (OSError, ValueError, UnicodeDecodeError):
                    return
                answer = self._answer(conn, request)
                with contextlib.suppress(OSError):
                    protocol.send(conn, answer)
        finally:
            self._slots.release()

    def _answer(self, conn: socket.socket, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("protocol") != protocol.PROTOCOL or request.get("build") != self._build:
            return {"fallback": "another version of mdrecall"}
        argv, cwd = request.get("argv"), request.get("cwd")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(cwd, str)):
            return {"fallback": "a malformed request"}
        if request.get("workspace") != self.workspace:
            return {"fallback": "another workspace"}
        with self._turn:
            if self._stop.is_set() or self._manager is None:
                return {"fallback": "the daemon is stopping"}
            if _client_gone(conn):
                return {"fallback": "the client left"}
            try:
                os.chdir(cwd)
            except OSError as exc:
                return {"fallback": f"cannot work in {cwd}: {exc.strerror or exc}"}
            try:
                return self._run(conn, request, argv)
            finally:
                os.chdir(self._cwd)

    def _run(self, conn: socket.socket, request: dict[str, Any], argv: list[str]) -> dict[str, Any]:
        from mdrecall.cli.app import run
        from mdrecall.cli.options import DAEMON, REQUEST_ENVIRON

        environ = self._request_environ(request)
        capture = _Capture(request.get("tty") or [False, False], request.get("errors") or ["strict", "strict"])
        lend = self._lender(conn, request)
        env_token, daemon_token = REQUEST_ENVIRON.set(environ), DAEMON.set(lend)
        self._local.capture = capture
        try:
            code = run(argv)
        except NotServed as exc:
            return {"fallback": str(exc)}
        finally:
            self._local.capture = None
            REQUEST_ENVIRON.reset(env_token)
            DAEMON.reset(daemon_token)
        return {"exit": code, "output": capture.chunks}

    @staticmethod
    def _request_environ(request: dict[str, Any]) -> dict[str, str]:
        """The variables options read, as the client has them (absent: unset there)."""
        given = request.get("vars") or {}
        return {name: given[name] for name in protocol.REQUEST_VARS if isinstance(given.get(name), str)}

    def _lender(self, conn: socket.socket, request: dict[str, Any]) -> Callable[[str, Sequence[str], bool], Any]:
        @contextlib.contextmanager
        def lend(workspace: str, overrides: Sequence[str], keep_open: bool) -> Iterator[MemorySearchManager]:
            from mdrecall.cli.options import load_cli_config, open_cli_manager

            if protocol.workspace_path(workspace) != self.workspace:
                raise NotServed("another workspace")
            try:
                config = load_cli_config(workspace, overrides)
            except Exception:  # the client says it itself, with its own environment's words
                raise NotServed("the configuration cannot be read here") from None
            if config_key(config) != self._key:
                raise NotServed("another configuration (-c overrides, config files or provider)")
            differing = self._differing_variable(request, config)
            if differing:
                raise NotServed(f"another value of ${differing}")
            try:
                protocol.send(conn, {"committed": True})  # from here on the client waits for this answer
            except OSError:
                raise NotServed("the client left") from None
            if keep_open and not _starts_a_session(config):
                assert self._manager is not None
                yield self._manager
            else:
                with open_cli_manager(workspace, overrides) as manager:
                    yield manager

        return lend

    def _differing_variable(self, request: dict[str, Any], config: MemoryConfig) -> str | None:
        theirs = request.get("env")
        if not isinstance(theirs, dict):
            return "(the environment)"
        ours = protocol.env_digests(os.environ)
        names = {n for n in (*theirs, *ours) if protocol.compared(n)}
        names |= set(_ENV_REFERENCE.findall(json.dumps(config.model_dump(mode="json"), default=str)))
        for name in sorted(names):
            default = _PROCESS_DEFAULTS.get(name)
            fallback = protocol.digest(default) if default is not None else None
            if (theirs.get(name) or fallback) != (ours.get(name) or fallback):
                return name
        return None
