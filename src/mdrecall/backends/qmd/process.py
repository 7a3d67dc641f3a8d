"""One warm ``qmd mcp`` process, spoken to over stdio (MCP's JSON-RPC, one JSON object per line).

Why stdio and not QMD's HTTP daemon (``qmd mcp --http``): the process is our child, so it cannot
outlive us (QMD exits when its stdin closes), needs no port, and exposes the index to nobody else
(the HTTP endpoints are unauthenticated; any local user could read the memories through them).

Requests may be pipelined: :meth:`QmdProcess.call_tools` writes several ``tools/call`` requests at
once and waits for all the answers under one deadline (QMD answers them in order, its FTS queries
are synchronous). A reader thread matches answers to requests by id; answers to requests that
timed out are dropped. Errors are :class:`QmdError` with a ``kind`` the manager's fallback uses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-06-18"
_STDERR_KEEP = 40  # lines of QMD's stderr kept for error messages
_OUTPUT_KEEP = 2000  # characters of a failed command's output kept for its error


class QmdError(Exception):
    """QMD could not answer. ``kind``: spawn, timeout, exited, protocol, tool, or cancelled (stopped by
    ``close()``: not QMD's failure)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    message: dict[str, Any] | None = None


class QmdProcess:
    """``argv`` is the full command (``[qmd, --index, name, mcp, ...]``)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.argv = list(argv)
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._next_id = 0
        self._stderr: deque[str] = deque(maxlen=_STDERR_KEEP)
        self._eof = threading.Event()
        self.started_at: float | None = None
        self.server_info: dict[str, Any] = {}
        self.requests = 0

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and not self._eof.is_set()

    def start(self, timeout_s: float) -> None:
        """Spawn and complete the MCP handshake within ``timeout_s``."""
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=str(self.cwd),
                # Its own process group: a kill reaches anything QMD itself started.
                start_new_session=True,
            )
        except OSError as exc:
            raise QmdError("spawn", f"cannot start {self.argv[0]}: {exc}") from exc
        self.started_at = time.time()
        threading.Thread(target=self._read_stdout, name="qmd-mcp-reader", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="qmd-mcp-stderr", daemon=True).start()
        try:
            init = self._request(
                "initialize",
                {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "mdrecall", "version": "0"}},
                timeout_s,
            )
            self.server_info = dict(init.get("serverInfo") or {})
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except QmdError:
            self.kill()
            raise

    def kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._fail_pending()

    def close(self, timeout_s: float = 3.0) -> None:
        """Close stdin (QMD then exits by itself), kill it if it does not."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    # -- requests --------------------------------------------------------------------------------
    def call_tool(self, name: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return self.call_tools([(name, arguments)], timeout_s)[0]

    def call_tools(self, calls: Sequence[tuple[str, dict[str, Any]]], timeout_s: float) -> list[dict[str, Any]]:
        """Send every call at once; the tool results (``structuredContent``), in order.

        ``QmdError("tool")`` when QMD answered one with ``isError`` (a bad query, not a dead process).
        """
        deadline = time.monotonic() + timeout_s
        ids = [self._send_request("tools/call", {"name": name, "arguments": args}) for name, args in calls]
        results = [self._wait(i, deadline, f"tools/call {calls[n][0]}") for n, i in enumerate(ids)]
        out = []
        for result in results:
            if result.get("isError"):
                text = " ".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))
                raise QmdError("tool", text or "QMD reported an error")
            out.append(result.get("structuredContent") or {})
        return out

    def _request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return self._wait(self._send_request(method, params), time.monotonic() + timeout_s, method)

    def _send_request(self, method: str, params: dict[str, Any]) -> int:
        with self._pending_lock:
            self._next_id += 1
            request_id = self._next_id
            self._pending[request_id] = _Pending()
        self.requests += 1
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def _send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or not self.alive:
            raise QmdError("exited", self.exit_message())
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            with self._write_lock:
                proc.stdin.write(data)
                proc.stdin.flush()
        except (OSError, ValueError) as exc:  # broken pipe, closed file
            raise QmdError("exited", f"{self.exit_message()} ({exc})") from exc

    def _wait(self, request_id: int, deadline: float, what: str) -> dict[str, Any]:
        with self._pending_lock:
            pending = self._pending.get(request_id)
        if pending is None:
            raise QmdError("protocol", f"no request {request_id}")
        try:
            if not pending.done.wait(max(0.0, deadline - time.monotonic())):
                raise QmdError("timeout", f"QMD did not answer {what} in time")
        finally:
            with self._pending_lock:
                self._pending.pop(request_id, None)
        message = pending.message
        if message is None:
            raise QmdError("exited", self.exit_message())
        if "error" in message:
            error = message["error"] or {}
            raise QmdError("protocol", f"QMD {what} failed: {error.get('message', error)}")
        result = message.get("result")
        if not isinstance(result, dict):
            raise QmdError("protocol", f"QMD {what}: unexpected answer {str(message)[:200]}")
        return result

    # -- reader threads --------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = raw.strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    self._stderr.append(f"(stdout) {line[:300].decode('utf-8', 'replace')}")
                    continue
                if not isinstance(message, dict) or "id" not in message or "method" in message:
                    continue  # notifications and server requests: nothing mdrecall needs
                with self._pending_lock:
                    pending = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
                if pending is not None:
                    pending.message = message
                    pending.done.set()
        except (OSError, ValueError):
            pass
        finally:
            self._eof.set()
            self._fail_pending()

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        try:
            for raw in proc.stderr:
                text = raw.decode("utf-8", "replace").rstrip()
                if text:
                    self._stderr.append(text)
        except (OSError, ValueError):
            pass

    def _fail_pending(self) -> None:
        with self._pending_lock:
            waiting = list(self._pending.values())
        for pending in waiting:
            pending.done.set()  # message stays None: "exited"

    def exit_message(self) -> str:
        proc = self._proc
        code = proc.poll() if proc is not None else None
        tail = " | ".join(list(self._stderr)[-5:])
        status = f"exited with code {code}" if code is not None else "stopped answering"
        return f"QMD process {status}" + (f": {tail}" if tail else "")

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)


def run_command(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout_ms: int,
                cancel: threading.Event | None = None) -> str:  # fmt: skip
    """One short QMD command (``update``, ``embed``) to completion: its output, or QmdError. Killed
    with its whole process group past ``timeout_ms``, or as soon as ``cancel`` is set (the manager
    closed: a stopped command must not outlive it)."""
    what = "qmd " + " ".join(argv[3:])  # after [qmd, --index, name]
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, cwd=str(cwd), start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise QmdError("spawn", f"cannot start {argv[0]}: {exc}") from exc
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        try:
            out, _ = proc.communicate(timeout=max(0.0, min(0.25, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            cancelled = cancel is not None and cancel.is_set()
            if not cancelled and time.monotonic() < deadline:
                continue  # communicate() may be called again after a timeout; nothing is lost
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.communicate()
            if cancelled:
                raise QmdError("cancelled", f"{what} stopped: the manager closed") from None
            raise QmdError("timeout", f"{what} took longer than {timeout_ms} ms") from None
    text = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        raise QmdError("exited", f"{what} exited with code {proc.returncode}: {text.strip()[-_OUTPUT_KEEP:]}")
    return text
