"""The guard in front of every HTTP endpoint mdrecall serves (MCP over HTTP, the web page).

DNS-rebinding defence and authentication, checked before a request reaches the app: the ``Host``
header must name this server (loopback names, the bound address, or names allowed explicitly) on its
port; an ``Origin``, when a browser sends one, must be loopback or explicitly allowed; and when a
token is set every request must carry ``Authorization: Bearer <token>``. Binding anything but
loopback requires a token.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mdrecall.errors import ConfigError

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_ENV = "MDRECALL_MCP_TOKEN"



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
        origins = {o.strip().rstrip("/").lower() for o in extra_origins if o.strip()}
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
        origin = value.strip().rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
            _ = parts.port  # raises on a malformed port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not hostname or parts.path or parts.username is not None:
            return False
        return is_loopback_host(hostname)

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
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
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
