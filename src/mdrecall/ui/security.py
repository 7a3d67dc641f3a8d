"""What stands between a browser and the inspector, outermost first.

1. :class:`SecurityHeaders` — every response, refusals included, carries a strict
   Content-Security-Policy (scripts and styles only from this server, no inline script, no framing,
   forms post only here), ``X-Frame-Options: DENY``, ``nosniff``, referrers only to this origin, no caching.
2. :class:`mdrecall.http_guard.RequestGuard` — the Host and Origin checks every mdrecall HTTP endpoint
   has (DNS rebinding; loopback by default).
3. :class:`BrowserGuard` — authentication and CSRF:

   * a browser session is a random id in an ``HttpOnly; SameSite=Strict`` cookie that only this server
     issues (it keeps the ids; a cookie planted by another page on ``localhost`` is worth nothing);
   * with a token, a session is issued only in exchange for it: ``/?token=T`` once (the URL
     ``mdrecall ui`` prints, as Jupyter does), answered with a redirect that drops it from the address
     bar; a non-browser client may send ``Authorization: Bearer T`` instead, for reading;
   * every request that is not GET/HEAD must come from a session, carry that session's CSRF token
     (an HMAC of the session id: field ``csrf`` of a url-encoded form, or header ``X-CSRF-Token``) and,
     when the browser names its Origin, come from this very origin (``check_origin`` accepts any
     loopback port; a write must come from this one). Bodies are url-encoded forms of at most
     :data:`MAX_FORM_BYTES`; the parsed form is handed to the endpoint in ``scope["state"]``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qsl, urlencode

from mdrecall.http_guard import HttpSecurity

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # Not "no-referrer": Chromium then sends "Origin: null" on same-origin form posts, which the write
    # check refuses. The token URL never stays in the address bar, so no referrer can carry it.
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]
MAX_FORM_BYTES = 256 * 1024
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
TOKEN_PARAM = "token"
SAFE_METHODS = frozenset({"GET", "HEAD"})


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class SecurityHeaders:
    """ASGI middleware adding the security headers to every response (and ``no-store`` to pages)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = str(scope.get("path", "")).startswith("/static/")

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in _HEADERS if k not in present]
                if b"cache-control" not in present:
                    # Memories are private: no page lands in a disk cache. Static assets may be cached briefly.
                    extra.append((b"cache-control", b"private, max-age=300" if static else b"no-store"))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Sessions:
    """Browser sessions this server issued (ids kept in memory, the oldest dropped past ``limit``)."""

    def __init__(self, limit: int = 256) -> None:
        self._secret = secrets.token_bytes(32)
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def new(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._ids[sid] = None
            while len(self._ids) > self._limit:
                self._ids.popitem(last=False)
        return sid

    def valid(self, sid: str | None) -> bool:
        if not sid:
            return False
        with self._lock:
            if sid in self._ids:
                self._ids.move_to_end(sid)
                return True
        return False

    def csrf_token(self, sid: str) -> str:
        return hmac.new(self._secret, sid.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, sid: str, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(self.csrf_token(sid).encode(), (value or "").encode())


async def _refuse(send: Any, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


class BrowserGuard:
    """ASGI middleware: sessions, the one-time token exchange, and CSRF on every write."""

    def __init__(self, app: Any, security: HttpSecurity, sessions: Sessions) -> None:
        self.app = app
        self.security = security
        self.sessions = sessions
        self.cookie = f"mdrecall_ui_{security.port}"  # cookies ignore ports: two servers must not share one

    def _cookie_header(self, sid: str) -> tuple[bytes, bytes]:
        return b"set-cookie", f"{self.cookie}={sid}; Path=/; HttpOnly; SameSite=Strict".encode()

    def _session_of(self, headers: dict[str, str]) -> str | None:
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie and self.sessions.valid(value):
                return value
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = scope.get("method", "GET").upper()
        sid = self._session_of(headers)
        new_sid: str | None = None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        offered = [v for k, v in query if k == TOKEN_PARAM]
        if sid is None:
            if self.security.token is None:
                new_sid = sid = self.sessions.new()
            elif offered and hmac.compare_digest(offered[0].encode(), self.security.token.encode()):
                new_sid = self.sessions.new()
                rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
                location = scope.get("path", "/") + (f"?{rest}" if rest else "")
                await send({"type": "http.response.start", "status": 303,
                            "headers": [(b"location", location.encode()), (b"content-length", b"0"), self._cookie_header(new_sid)]})
                await send({"type": "http.response.body", "body": b""})
                return
            elif not (method in SAFE_METHODS and headers.get("authorization") and self.security.check_token(headers.get("authorization"))):
                await _refuse(send, 401, "This page needs its token: open the URL `mdrecall ui` printed (it ends in ?token=...).",
                              [(b"www-authenticate", b'Bearer realm="mdrecall"')])
                return
        elif offered:
            # Already signed in: drop the token from the address bar all the same.
            rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            await send({"type": "http.response.start", "status": 303, "headers": [(b"location", location.encode()), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return

        state = scope.setdefault("state", {})
        state["sid"] = sid
        state["csrf"] = self.sessions.csrf_token(sid) if sid else ""
        if method not in SAFE_METHODS:
            refusal = self._check_write(headers, sid)
            if refusal is None:
                form, refusal = await _read_form(receive, headers)
            if refusal is not None:
                await _refuse(send, 403, refusal)
                return
            token = headers.get(CSRF_HEADER) or (form.get(CSRF_FIELD) if form else None)
            if sid is None or not self.sessions.check_csrf(sid, token):
                await _refuse(send, 403, "Missing or invalid CSRF token: reload the page and try again.")
                return
            state["form"] = form
            receive = _drained(receive)  # the body was read; the endpoint uses state["form"]

        if new_sid is None:
            await self.app(scope, receive, send)
            return
        cookie = self._cookie_header(new_sid)

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), cookie]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _check_write(self, headers: dict[str, str], sid: str | None) -> str | None:
        if sid is None:
            return "Writes need a browser session: load the page first."
        origin = headers.get("origin")
        if origin is None:
            return None  # no Origin (older browsers on same-origin posts): the CSRF token still decides
        host = headers.get("host", "").lower()
        if origin.rstrip("/").lower() not in (f"http://{host}", f"https://{host}"):
            return "Cross-origin write refused."  # also Origin: null (sandboxed frames, file:// pages)
        return None


async def _read_form(receive: Any, headers: dict[str, str]) -> tuple[dict[str, str], str | None]:
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return {}, "client went away"
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES:
            return {}, "Form too large."
        if not message.get("more_body"):
            break
    if body and kind != "application/x-www-form-urlencoded":
        return {}, "Only url-encoded forms are accepted."
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return {}, "The form is not UTF-8."
    form: dict[str, str] = {}
    for key, value in pairs:
        form.setdefault(key, value)  # the first value wins: a repeated field cannot override
    return form, None


def _drained(receive: Any) -> Any:
    """``receive`` for an app after the body was consumed: one empty body, then the real channel
    (which reports the disconnect when it comes)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return dict(await receive())

    return replay
