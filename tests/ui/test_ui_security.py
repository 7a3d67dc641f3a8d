"""The inspector's defences over real HTTP (uvicorn in a thread, httpx as the client): headers on every
response, Host and Origin, the token exchange, CSRF on every write, escaping, path checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from uihelpers import demo_config, demo_files, serving, write_workspace

from mdrecall import open_manager
from mdrecall.dreaming.paths import queue_path
from mdrecall.ui import inspector_config

TOKEN = "s3cret-token-for-tests"
CSRF = re.compile(r'name="csrf-token" content="([0-9a-f]+)"')


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ui-security")
    ws = write_workspace(tmp / "ws", demo_files())
    return ws, demo_config(tmp)


@pytest.fixture(scope="module")
def manager(workspace: tuple[Path, dict[str, Any]]) -> Iterator[Any]:
    ws, config = workspace
    with open_manager(ws, inspector_config(ws, config)) as m:
        m.sync()
        yield m


@pytest.fixture(scope="module")
def open_url(manager: Any) -> Iterator[str]:
    with serving(manager) as url:
        yield url


@pytest.fixture(scope="module")
def token_url(manager: Any) -> Iterator[str]:
    with serving(manager, token=TOKEN) as url:
        yield url


@contextmanager
def _session(url: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client holding a session cookie, and that session's CSRF token."""
    with httpx.Client(base_url=url, follow_redirects=False) as client:
        page = client.get("/health")
        assert page.status_code == 200
        match = CSRF.search(page.text)
        assert match, "every page carries its CSRF token"
        yield client, match.group(1)


def _assert_security_headers(response: httpx.Response) -> None:
    csp = response.headers.get("content-security-policy", "")
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert response.headers.get("x-frame-options") == "DENY"
    assert response.headers.get("x-content-type-options") == "nosniff"


@pytest.mark.parametrize("path", ["/search", "/browse", "/health", "/dreaming", "/static/app.css", "/no-such-page"])
def test_every_response_carries_the_security_headers(open_url: str, path: str) -> None:
    response = httpx.get(open_url + path)
    _assert_security_headers(response)
    if not path.startswith("/static"):
        assert response.headers["cache-control"] == "no-store"


def test_refusals_carry_the_security_headers_too(open_url: str, token_url: str) -> None:
    _assert_security_headers(httpx.get(open_url + "/search", headers={"Host": "evil.example"}))
    _assert_security_headers(httpx.get(open_url + "/search", headers={"Origin": "https://evil.example"}))
    _assert_security_headers(httpx.get(token_url + "/search"))
    _assert_security_headers(httpx.post(open_url + "/health/sync"))


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 421),  # DNS rebinding: a name that resolves to us
        ({"Host": "127.0.0.1:1"}, 421),  # another port
        ({"Origin": "https://evil.example"}, 403),
        ({"Origin": "null"}, 403),
    ],
)
def test_foreign_host_and_origin_are_refused(open_url: str, headers: dict[str, str], status: int) -> None:
    assert httpx.get(open_url + "/search?q=postgres", headers=headers).status_code == status


def test_a_write_without_csrf_token_is_refused(open_url: str, workspace: tuple[Path, dict[str, Any]]) -> None:
    with _session(open_url) as (client, csrf):
        assert client.post("/health/sync").status_code == 403
        assert client.post("/health/sync", data={"csrf": "0" * 64}).status_code == 403
        refused = client.post("/health/sync", data={"csrf": csrf}, headers={"Origin": "http://127.0.0.1:1"})
        assert refused.status_code == 403 and "Cross-origin" in refused.text  # loopback, but not this origin
        refused = client.post("/health/sync", json={"csrf": csrf})
        assert refused.status_code == 403  # only url-encoded forms
        ok = client.post("/health/sync", data={"csrf": csrf}, headers={"Origin": open_url})
        assert ok.status_code == 303 and ok.headers["location"] == "/health"
        # The header form of the token works for scripts on the page.
        assert client.post("/health/sync", headers={"X-CSRF-Token": csrf}).status_code == 303


def test_a_token_from_another_session_is_refused(open_url: str) -> None:
    with _session(open_url) as (_first, csrf), _session(open_url) as (second, _):
        assert second.post("/health/sync", data={"csrf": csrf}).status_code == 403


def test_a_planted_cookie_is_no_session(open_url: str) -> None:
    """Cookies ignore ports: a page on another localhost port can set one. Only ids this server
    issued count, so a planted cookie gets a fresh session, never the planted id."""
    client = httpx.Client(base_url=open_url)
    port = open_url.rsplit(":", 1)[1]
    client.cookies.set(f"mdrecall_ui_{port}", "attacker-chosen", domain="127.0.0.1")
    with client:
        response = client.get("/health")
        assert "attacker-chosen" not in response.headers.get("set-cookie", "")
        assert response.headers.get("set-cookie", "").startswith(f"mdrecall_ui_{port}=")


def test_token_exchange_sets_a_strict_cookie_and_drops_the_token(token_url: str) -> None:
    with httpx.Client(base_url=token_url, follow_redirects=False) as client:
        assert client.get("/search").status_code == 401
        assert client.get(f"/search?token={TOKEN}x").status_code == 401
        exchanged = client.get(f"/search?q=postgres&token={TOKEN}")
        assert exchanged.status_code == 303
        assert exchanged.headers["location"] == "/search?q=postgres"
        cookie = exchanged.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        page = client.get("/search?q=postgres")
        assert page.status_code == 200 and TOKEN not in page.text
        csrf = CSRF.search(page.text)
        assert csrf and client.post("/health/sync", data={"csrf": csrf.group(1)}).status_code == 303


def test_bearer_token_reads_but_cannot_write(token_url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(token_url + "/health", headers=headers).status_code == 200
    assert httpx.get(token_url + "/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(token_url + "/health/sync", headers=headers).status_code == 401


def test_memory_text_is_escaped(open_url: str) -> None:
    listing = httpx.get(open_url + "/browse").text
    assert "&#34;&gt;&lt;svg onload=1&gt;odd.md" in listing and "<svg onload" not in listing
    for path in ("/search?q=postgres+tip", "/browse/file?path=memory/pasted.md&q=postgres", "/browse/file?path=memory/pasted.md"):
        body = httpx.get(open_url + path).text
        assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in body
        assert "<script>window.__xss" not in body
        assert "onerror=" not in body.replace("onerror=&#34;", "").replace("onerror=&quot;", "")
        assert "<b>bold?</b>" not in body
        assert len(re.findall(r"<script\b", body)) == 1  # app.js, and only it


@pytest.mark.parametrize(
    "path",
    [
        "/browse/file?path=../../../../etc/passwd",
        "/browse/file?path=/etc/passwd",
        "/browse/file?path=memory/.dreams/promotion-queue.md",
        "/browse/transcript?path=../../etc/passwd",
        "/browse/transcript?path=memory/pasted.md",
    ],
)
def test_reads_stay_inside_the_memory_files(open_url: str, path: str) -> None:
    response = httpx.get(open_url + path)
    assert response.status_code == 404
    assert "root:" not in response.text


def test_a_queue_decision_needs_the_csrf_token(open_url: str, workspace: tuple[Path, dict[str, Any]]) -> None:
    ws, _ = workspace
    before = queue_path(ws).read_text(encoding="utf-8") if queue_path(ws).exists() else None
    with _session(open_url) as (client, _):
        refused = client.post("/dreaming/queue", data={"key": "anything", "action": "approve"})
    assert refused.status_code == 403
    after = queue_path(ws).read_text(encoding="utf-8") if queue_path(ws).exists() else None
    assert before == after


def test_oversized_and_undecodable_forms_are_refused(open_url: str) -> None:
    with _session(open_url) as (client, csrf):
        big = client.post("/health/sync", content=b"csrf=" + csrf.encode() + b"&x=" + b"a" * 300_000,
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert big.status_code == 403 and "too large" in big.text
        bad = client.post("/health/sync", content=b"csrf=" + csrf.encode() + b"&x=\xff\xfe",
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert bad.status_code == 403
