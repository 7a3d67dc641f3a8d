"""What the warm path's client and daemon share: where a daemon's socket lives, who may use it, how
a message is framed, and what must be equal for the daemon to answer.

Nothing but what the interpreter has loaded already, or nearly: the client imports this before
anything else, and ``socket``, ``json``, ``re`` and ``hashlib`` would each cost it more than the
rest of what it does (measured in instructions: docs/benchmarks.md). Hence ``_socket`` (the module
``socket`` wraps), ``marshal`` for the messages (both ends are the same Python: the build id says so,
and a message that does not load is a refusal), and CRC-based digests (equality checks between two
processes of one user, not a defence against anyone: the socket already keeps others out).

A message is one dict of str, int, bool, None, lists and dicts, marshalled, preceded by its length
(4 bytes, big endian). A request::

    {"protocol": 1, "build": "...", "argv": [...], "cwd": "...", "workspace": "/abs/path",
     "env": {"NAME": "digest", ...}, "vars": {"MDRECALL_WORKSPACE": ..., "MDRECALL_SESSION_KEY": ...},
     "tty": [stdout, stderr], "errors": [stdout, stderr]}

and the daemon's replies: ``{"fallback": reason}`` (run it yourself), ``{"committed": True}`` (the
daemon is running it now), then ``{"exit": code, "output": [[1 or 2, text], ...]}``.
"""

from __future__ import annotations

import _socket
import marshal
import os
import stat
import sys
import zlib

TYPE_CHECKING = False  # not typing's: see mdrecall/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PROTOCOL = 1

#: ``off``: never ask a daemon (benchmarks, and anyone who wants the one-shot path).
DISABLE_ENV = "MDRECALL_WARM"
#: A file: each command the client considered appends ``warm`` or ``cold: <why>`` (tests, debugging).
TRACE_ENV = "MDRECALL_WARM_TRACE"
#: The commands a daemon answers.
COMMANDS = frozenset({"search", "get", "status"})
#: Variables the daemon applies to the command it runs for a client (the client's own values).
REQUEST_VARS = ("MDRECALL_WORKSPACE", "MDRECALL_SESSION_KEY")

#: Variables whose values must be the same in the client and the daemon: everything that configures
#: mdrecall, its embedding providers and their runtimes, time zones and where files are looked for.
#: Names referenced as ``${NAME}`` by the configuration are added by the daemon.
_COMPARED_PREFIXES = (
    "MDRECALL_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TOKENIZERS_", "OPENAI_", "GEMINI_", "GOOGLE_",
    "VOYAGE_", "MISTRAL_", "OLLAMA_", "OMP_", "OPENBLAS_", "MKL_", "ORT_",
)  # fmt: skip
_COMPARED_NAMES = frozenset({"HOME", "TZ", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "PYTHONHASHSEED"})
#: Read by the client alone, or applied per request: never compared.
_NOT_COMPARED = frozenset({DISABLE_ENV, TRACE_ENV, *REQUEST_VARS})

#: Limits on one message: a request is a command line; an answer is what the command printed.
MAX_REQUEST = 1 << 20
MAX_ANSWER = 1 << 28

#: A Unix socket's path must fit ``sun_path`` (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100


def compared(name: str) -> bool:
    """Whether the daemon must see the same value of variable ``name`` as the client."""
    if name in _NOT_COMPARED:
        return False
    return name in _COMPARED_NAMES or name.startswith(_COMPARED_PREFIXES)


def digest(value: str) -> str:
    """64 bits that differ when ``value`` does (CRC-32 and Adler-32: see the module's docstring)."""
    data = value.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def env_digests(environ: Mapping[str, str]) -> dict[str, str]:
    """Every variable, by digest: the daemon compares the ones that matter (values never travel)."""
    return {name: digest(value) for name, value in environ.items()}


def available() -> bool:
    """Unix sockets, and a kernel that tells a socket's server who connected (Linux: SO_PEERCRED).
    Without the second no daemon serves: a socket's file mode alone is not the check we promise."""
    return hasattr(_socket, "AF_UNIX") and hasattr(_socket, "SO_PEERCRED")


def mdrecall_home(environ: Mapping[str, str]) -> str:
    """``$MDRECALL_HOME`` or ``~/.mdrecall``, absolute (config.mdrecall_home's rule; that module
    imports the config models, which the client must not)."""
    raw = environ.get("MDRECALL_HOME")
    home = os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".mdrecall")
    return os.path.abspath(home)


def workspace_path(workspace: str) -> str:
    """The workspace as ``open_manager`` names it: ``~`` expanded, absolute, links not resolved."""
    return os.path.abspath(os.path.expanduser(workspace))


def socket_path(workspace: str, environ: Mapping[str, str]) -> str:
    """The socket of the daemon serving ``workspace`` (absolute) with this ``MDRECALL_HOME``: in
    ``<MDRECALL_HOME>/run/``, or ``/tmp/mdrecall-<uid>/`` when that path is too long for a socket."""
    home = mdrecall_home(environ)
    key = digest(f"{PROTOCOL}\0{home}\0{workspace}")  # a clash costs nothing: the daemon checks the workspace
    path = os.path.join(home, "run", f"{key}.sock")
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        path = os.path.join("/tmp", f"mdrecall-{os.geteuid()}", f"{key}.sock")
    return path


def is_private_dir(path: str) -> bool:
    """A real directory (not a link), owned by this user, that nobody else may enter or list."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0


def make_private_dir(path: str) -> bool:
    """Create ``path`` (0700) if missing; whether it is private afterwards. A directory of ours with
    looser permissions is tightened; anything else (another owner, a link) is left alone: False."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError:
        return False
    return is_private_dir(path)


def build_id() -> str:
    """What must match for a daemon's answer to be this code's answer: the protocol, mdrecall's
    version and files (size and modification time of every module, so an upgrade or an edit makes
    old daemons unusable at once), the interpreter, and the installed packages (site-packages'
    modification times change when a package or plugin is installed or removed)."""
    import mdrecall

    parts = [str(PROTOCOL), mdrecall.__version__, sys.version, sys.prefix]
    root = os.path.dirname(os.path.abspath(mdrecall.__file__))
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    parts.append(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                continue
    for folder in sys.path:
        if folder.endswith("-packages"):
            try:
                parts.append(f"{folder}:{os.stat(folder).st_mtime_ns}")
            except OSError:
                pass
    return digest("\n".join(parts))


def send(sock: Any, message: Mapping[str, Any]) -> None:
    """``sock``: a ``socket.socket`` or an ``_socket.socket``."""
    data = marshal.dumps(dict(message))
    sock.sendall(len(data).to_bytes(4, "big") + data)


def receive(sock: Any, limit: int) -> dict[str, Any]:
    """One message; ValueError for a malformed or oversized one, ConnectionError when the peer left."""
    size = int.from_bytes(_exactly(sock, 4), "big")
    if size > limit:
        raise ValueError(f"message of {size} bytes (at most {limit})")
    try:
        message = marshal.loads(_exactly(sock, size))
    except (EOFError, TypeError) as exc:
        raise ValueError(f"not a message: {exc}") from None
    if not isinstance(message, dict):
        raise ValueError("a message must be a dict")
    return message


def peer_uid(sock: Any) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED: pid, uid, gid)."""
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder, signed=True)


def _exactly(sock: Any, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
