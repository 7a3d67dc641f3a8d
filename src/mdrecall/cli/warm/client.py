"""The one-shot side of the warm path: command line → request → socket → what the daemon printed.

:func:`answer` returns the exit code of a command a daemon ran for us, or None when the command must
run here: it is not one a daemon answers, no daemon serves this workspace, or the one there is dead,
stale, another version, another configuration or slow to take the request. Nothing is printed on
the way to None, so the command that then runs here says exactly what it would have said anyway.
"""

from __future__ import annotations

import _socket
import codecs
import os
import sys

from mdrecall.cli.warm import protocol

TYPE_CHECKING = False  # not typing's: see mdrecall/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: Connecting to a live daemon's socket takes microseconds; a full backlog (a daemon that stopped
#: accepting) must not hold the command up.
CONNECT_TIMEOUT = 0.25
#: Until the daemon has checked the request and started the command (or answered it): milliseconds
#: for an idle daemon; longer means it is busy with another command or stopped.
TAKE_TIMEOUT = 1.0
#: Once it runs the command: as long as the command itself may take (a first search may sync).
ANSWER_TIMEOUT = 300.0

#: Options of search, get and status that take a value (their values are not options).
_TAKES_VALUE = frozenset({
    "-w", "--workspace", "-c", "--config", "-n", "--min-score", "--corpus", "--session-key", "--now", "--as-of",
    "--format", "--from", "--lines",
})  # fmt: skip


class _Cold(Exception):
    """Why this command runs here."""


def answer(args: Sequence[str]) -> int | None:
    environ = os.environ
    try:
        code = _ask(args, environ)
    except _Cold as exc:
        _trace(environ, f"cold: {exc}")
        return None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    _trace(environ, "warm")
    return code


def requested_workspace(args: Sequence[str], environ: Mapping[str, str]) -> str:
    """The ``-w`` value of ``COMMAND ARGS...`` as Click reads it, else ``$MDRECALL_WORKSPACE`` or
    ``.``. A wrong guess costs nothing but the warm path: the daemon checks the workspace Click
    parsed before it answers."""
    i = 1
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if arg in ("-w", "--workspace"):
            return args[i + 1] if i + 1 < len(args) else "."
        if arg.startswith("--workspace="):
            return arg.partition("=")[2]
        if arg.startswith("-w") and not arg.startswith("--"):
            return arg[2:]
        i += 2 if arg in _TAKES_VALUE else 1
    return environ.get("MDRECALL_WORKSPACE", ".")


def _ask(args: Sequence[str], environ: Mapping[str, str]) -> int:
    _check_command(args, environ)
    out, err = sys.stdout, sys.stderr
    try:
        tty = [bool(out.isatty()), bool(err.isatty())]
        if not all(codecs.lookup(s.encoding).name == "utf-8" for s in (out, err)):
            raise _Cold("output is not UTF-8")
        errors = [out.errors, err.errors]
    except (AttributeError, ValueError, TypeError, LookupError):  # no stream, a closed or odd one
        raise _Cold("output streams the daemon cannot stand in for") from None
    try:
        cwd = os.getcwd()
    except OSError:
        raise _Cold("no current directory") from None
    workspace = protocol.workspace_path(os.path.join(cwd, os.path.expanduser(requested_workspace(args, environ))))
    path = protocol.socket_path(workspace, environ)
    if not os.path.exists(path):
        raise _Cold("no daemon for this workspace")
    if not protocol.is_private_dir(os.path.dirname(path)):
        raise _Cold(f"{os.path.dirname(path)} is not a private directory")
    request = {
        "protocol": protocol.PROTOCOL, "build": protocol.build_id(), "argv": list(args), "cwd": cwd,
        "workspace": workspace, "env": protocol.env_digests(environ), "tty": tty, "errors": errors,
        "vars": {name: environ.get(name) for name in protocol.REQUEST_VARS},
    }  # fmt: skip
    reply = _exchange(path, request)
    output = reply.get("output")
    code = reply.get("exit")
    if not isinstance(code, int) or not isinstance(output, list) or not all(_is_chunk(c) for c in output):
        raise _Cold("a malformed answer")
    return _print(output, code)


def _is_chunk(chunk: Any) -> bool:
    return isinstance(chunk, list) and len(chunk) == 2 and chunk[0] in (1, 2) and isinstance(chunk[1], str)


def _check_command(args: Sequence[str], environ: Mapping[str, str]) -> None:
    if environ.get(protocol.DISABLE_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        raise _Cold(f"{protocol.DISABLE_ENV}=off")
    if not args or args[0] not in protocol.COMMANDS:
        raise _Cold("not a command a daemon answers")
    if any(arg in ("-h", "--help") for arg in args):
        raise _Cold("help is formatted for this terminal")
    if "MDRECALL_DEBUG" in environ or any(name.startswith("_MDRECALL_COMPLETE") for name in environ):
        raise _Cold("tracebacks or shell completion asked for")
    if not protocol.available():
        raise _Cold("no Unix sockets with peer credentials here")


def _exchange(path: str, request: dict[str, Any]) -> dict[str, Any]:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(path)
        except OSError as exc:  # refused: a socket left by a daemon that died
            raise _Cold(f"no daemon answers ({exc.strerror or exc})") from None
        try:
            uid = protocol.peer_uid(sock)
            if uid != os.geteuid():  # its directory says it is ours; this says it of the process
                raise _Cold(f"the socket is served by uid {uid}")
            sock.settimeout(TAKE_TIMEOUT)
            protocol.send(sock, request)
            reply = protocol.receive(sock, protocol.MAX_ANSWER)
            if reply.get("committed") is True:
                sock.settimeout(ANSWER_TIMEOUT)
                reply = protocol.receive(sock, protocol.MAX_ANSWER)
        except TimeoutError:
            raise _Cold("the daemon did not answer in time") from None
        except (OSError, ValueError) as exc:  # it died, or said something we cannot read
            raise _Cold(f"the daemon failed ({type(exc).__name__}: {exc})") from None
    finally:
        sock.close()
    if "fallback" in reply:
        raise _Cold(f"the daemon declined: {reply['fallback']}")
    return reply


def _print(output: list[Any], code: int) -> int:
    """Write what the daemon's command printed, in its order, as it would have been written here."""
    streams = {1: sys.stdout, 2: sys.stderr}
    try:
        last = None
        for number, text in output:
            stream = streams[number]
            if last is not None and last is not stream:
                last.flush()  # keep the order of stdout and stderr on a shared terminal
            stream.write(text)
            last = stream
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `mdrecall search ... | head`: as the command itself ends (cli/app.py)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    return code


def _trace(environ: Mapping[str, str], line: str) -> None:
    target = environ.get(protocol.TRACE_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError:
        pass
