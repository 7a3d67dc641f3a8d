"""The guard in front of every HTTP endpoint mdrecall serves (MCP over HTTP, the web page).

DNS-rebinding defence and authentication, checked before a request reaches the app. A page in the
user's browser can reach a server on 127.0.0.1 (DNS rebinding, or a plain cross-site request), so
the ``Host`` header must name this server (loopback names, the bound address, or names allowed
explicitly) on its port; an ``Origin``, when a browser sends one, must be loopback or explicitly
allowed; and when a token is set every request must carry ``Authorization: Bearer <token>``.
Binding anything but loopback requires a token.

Both headers are parsed strictly: an origin is exactly ``scheme://host[:port]`` (RFC 6454), where
host is a bracketed IPv6 literal *as a whole* or a DNS name or IPv4 address, so
``http://[::1].evil.example`` or ``http://localhost@evil.example`` never pass for loopback; and a
request carrying ``Host``, ``Origin`` or ``Authorization`` twice (values a proxy and a browser may
read differently) is refused rather than judged by one of them.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mdrecall.errors import ConfigError, MdrecallError

TOKEN_ENV = "MDRECALL_MCP_TOKEN"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.\-]*)://"
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*)"
    r"(?::(?P<port>[0-9]{1,5}))?"
)
_SINGLE_HEADERS = {"host": 421, "origin": 403, "authorization": 401}


def check_can_listen(host: str, port: int, what: str) -> None:
    """Bind ``host:port`` once and let go, before anything is loaded or printed: a port already in
    use is one clear error (MdrecallError) instead of the server's own log line and exit code."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise MdrecallError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (check --host)") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server itself binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise MdrecallError(f"port {port} on {host} is already in use (another {what}?): choose "
                                    "another with --port") from None  # fmt: skip
            raise MdrecallError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def is_loopback_host(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def split_host_header(value: str) -> tuple[str, str | None] | None:
    """``("localhost", "8765")`` from ``localhost:8765``; ``[::1]:80`` keeps ``::1``; None if malformed."""
    value = value.strip()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        host, port = value.split(":")
    elif ":" in value:
        return None  # a bare IPv6 literal is not a valid Host header
    else:
        host, port = value, None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    if not host or any(c.isspace() or c in "/@\\" for c in host):
        return None
    return host.lower().rstrip("."), port


def parse_origin(value: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of an ``Origin`` header value, or None unless it is exactly
    ``scheme://host[:port]``. An IPv6 host comes back without brackets."""
    match = _ORIGIN.fullmatch(value.strip(" \t").lower())
    if match is None:
        return None
    host = match.group("host")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
        host = host[1:-1]
    port = match.group("port")
    if port is not None and not 0 < int(port) < 65536:
        return None
    return match.group("scheme"), host, int(port) if port is not None else None


def _normal_origin(value: str) -> str | None:
    parsed = parse_origin(value.strip().rstrip("/"))
    if parsed is None:
        return None
    scheme, host, port = parsed
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


@dataclass
class HttpSecurity:
    """What the HTTP transport accepts. ``allowed_hosts=None`` disables the Host check (token required)."""

    port: int
    allowed_hosts: frozenset[str] | None = frozenset(LOOPBACK_NAMES)
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    token: str | None = None

    @classmethod
    def for_binding(
        cls,
        host: str,
        port: int,
        *,
        token: str | None = None,
        extra_hosts: Sequence[str] = (),
        extra_origins: Sequence[str] = (),
        allow_unauthenticated: bool = False,
    ) -> HttpSecurity:
        if not is_loopback_host(host) and not token and not allow_unauthenticated:
            raise ConfigError(
                f"refusing to serve memories on {host!r} without a bearer token: pass --token (or set "
                f"{TOKEN_ENV}), bind to 127.0.0.1, or pass --allow-unauthenticated if something else guards it"
            )
        hosts: set[str] | None = set(LOOPBACK_NAMES) | {h.strip().lower() for h in extra_hosts if h.strip()}
        if _is_wildcard(host):
            if not extra_hosts:
                hosts = None  # any name this machine answers to; the token is the guard
        elif hosts is not None:
            hosts.add(host.strip("[]").lower())
        origins = set()
        for raw in extra_origins:
            if not raw.strip():
                continue
            normal = _normal_origin(raw)
            if normal is None:
                raise ConfigError(f"allowed origin {raw!r} is not scheme://host[:port] (e.g. https://app.example)")
            origins.add(normal)
        return cls(port, frozenset(hosts) if hosts is not None else None, frozenset(origins), token or None)

    def check_host(self, value: str | None) -> bool:
        if self.allowed_hosts is None:
            return True
        parsed = split_host_header(value or "")
        if parsed is None:
            return False
        host, port = parsed
        if host not in self.allowed_hosts:
            return False
        return port is None or self.port == 0 or int(port) == self.port

    def check_origin(self, value: str | None) -> bool:
        if value is None:
            return True  # not a browser, or a same-origin navigation: nothing to defend against here
        parsed = parse_origin(value)
        if parsed is None:
            return False  # "null", file://, paths, userinfo, lists of origins, junk after the host
        scheme, host, _port = parsed
        if _normal_origin(value) in self.allowed_origins:
            return True
        return scheme in ("http", "https") and is_loopback_host(host)

    def check_token(self, authorization: str | None) -> bool:
        if not self.token:
            return True
        if not authorization or not authorization[:7].lower() == "bearer ":
            return False
        return hmac.compare_digest(authorization[7:].strip().encode(), self.token.encode())


class RequestGuard:
    """ASGI middleware enforcing :class:`HttpSecurity` before any request reaches MCP."""

    def __init__(self, app: Any, security: HttpSecurity) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name = raw_name.decode("latin-1").lower()
            if name in headers and name in _SINGLE_HEADERS:
                await _plain(send, _SINGLE_HEADERS[name], f"Duplicate {name.capitalize()} header")
                return
            headers[name] = raw_value.decode("latin-1")
        if not self.security.check_host(headers.get("host")):
            await _plain(send, 421, "Invalid Host header")
            return
        if not self.security.check_origin(headers.get("origin")):
            await _plain(send, 403, "Invalid Origin header")
            return
        if not self.security.check_token(headers.get("authorization")):
            await _plain(send, 401, "Missing or invalid bearer token", [(b"www-authenticate", b'Bearer realm="mdrecall"')])
            return
        await self.app(scope, receive, send)


async def _plain(send: Any, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


__all__ = ["HttpSecurity", "LOOPBACK_NAMES", "RequestGuard", "TOKEN_ENV", "is_loopback_host", "parse_origin",
           "split_host_header"]
