"""A fault-injecting HTTP proxy for an S3-compatible server (moto), on loopback, for the LanceDB tests.

LanceDB talks to the proxy (``aws_endpoint``); the proxy forwards every request to moto unless a
:class:`Fault` matching it (method and a regular expression on the path) says otherwise:

* ``status``: answer with that HTTP status and an S3 error body (503 ``SlowDown``, 500
  ``InternalError``, 429) without forwarding;
* ``delay``: wait ``seconds`` before forwarding (past the client's timeout, it gives up);
* ``cut``: read half of the request body and close the connection (an upload cut mid-way);
* ``lost``: forward the request (moto stores it) and close the connection without the answer (the
  write happened; the client cannot know);
* ``refuse``: close the connection at once (the server is down).

A fault applies ``times`` times (None: until removed), to every ``every``-th request it matches. :attr:`FaultProxy.log` records every request
and what was done with it, so a test can check that its fault was actually hit.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_S3_CODES = {503: "SlowDown", 500: "InternalError", 429: "TooManyRequests", 502: "BadGateway"}


@dataclass
class Fault:
    action: str  # status | delay | cut | lost | refuse
    path: str = r"."  # regular expression searched in the request path (bucket and key, query string)
    method: str | None = None  # None: any
    status: int = 503
    seconds: float = 0.0
    times: int | None = None  # None: every matching request until removed
    every: int = 1  # 5: the 5th, 10th, ... matching request
    hits: int = 0
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if not ((self.method is None or self.method == method) and re.search(self.path, path) is not None):
            return False
        self.seen += 1
        return self.seen % self.every == 0


@dataclass
class FaultProxy:
    upstream: str  # http://127.0.0.1:PORT of moto
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, outcome)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    @contextmanager
    def fault(self, action: str, **kwargs: Any) -> Iterator[Fault]:
        """A fault for the duration of a ``with`` block."""
        added = self.add(Fault(action, **kwargs))
        try:
            yield added
        finally:
            with self._lock:
                if added in self.faults:
                    self.faults.remove(added)

    def pick(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def record(self, method: str, path: str, outcome: str) -> None:
        with self._lock:
            self.log.append((method, path, outcome))

    def requests(self, method: str | None = None, path: str = r".") -> list[tuple[str, str, str]]:
        with self._lock:
            return [e for e in self.log if (method is None or e[0] == method) and re.search(path, e[1])]


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"  # keep-alive, as object stores are spoken to

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _handle(self) -> None:
        owner, method, path = self.owner, self.command, self.path
        fault = owner.pick(method, path)
        if fault is not None and fault.action == "refuse":
            owner.record(method, path, "refused")
            self._drop()
            return
        if fault is not None and fault.action == "cut":
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length // 2)
            owner.record(method, path, "cut")
            self._drop()
            return
        body = self._body()
        if fault is not None and fault.action == "status":
            owner.record(method, path, str(fault.status))
            code = _S3_CODES.get(fault.status, "ServiceUnavailable")
            payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                       f"<Message>injected fault</Message></Error>").encode()  # fmt: skip
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            if fault.status in (503, 429):
                self.send_header("Retry-After", "0")
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(payload)
            return
        if fault is not None and fault.action == "delay":
            time.sleep(fault.seconds)
        target = urlsplit(owner.upstream)
        upstream = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            if body or method in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            upstream.request(method, path, body=body or None, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            status, reason, response_headers = response.status, response.reason, response.getheaders()
        finally:
            upstream.close()
        if fault is not None and fault.action == "lost":
            owner.record(method, path, f"lost {status}")
            self._drop()
            return
        owner.record(method, path, "delayed" if fault is not None else str(status))
        try:
            self.send_response(status, reason)
            length = str(len(data))
            for key, value in response_headers:
                if key.lower() == "content-length" and method == "HEAD":
                    length = value  # a HEAD answer has no body but tells the object's length
                elif key.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                    self.send_header(key, value)
            self.send_header("Content-Length", length)
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(data)
        except OSError:  # the client gave up (its timeout) while we waited
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle
