"""Shared by the inspector tests: a demo workspace, the inspector served by uvicorn in a thread, and
headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mdrecall.embeddings.base import ProviderBase

CHROMIUM = os.environ.get("MDRECALL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
#: Screenshots of every run land here (CI keeps them as artefacts); MDRECALL_UI_DOCS_IMG=1 also
#: refreshes the ones docs/ui.md shows, under docs/img/.
ARTIFACTS = Path(os.environ.get("MDRECALL_TEST_ARTIFACTS", REPO / ".artifacts")) / "ui"
DOCS_IMG = REPO / "docs" / "img"

XSS_NOTE = (
    "# Pasted from a web page\n\n"
    "Postgres tip: <script>window.__xss = 1</script> use port 5433.\n"
    '<img src=x onerror="window.__xss = 2"> and "><b>bold?</b>\n'
)

ODD_NAME = 'memory/"><svg onload=1>odd.md'
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


def days_ago(days: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)


def demo_files() -> dict[str, str]:
    """A small workspace with every kind of memory: evergreen, dated, a transcript, an oversize file."""
    today = days_ago(0).date()
    recent = (today - timedelta(days=3)).isoformat()
    older = (today - timedelta(days=40)).isoformat()
    transcript = "\n".join([
        '{"type": "message", "message": {"role": "user", "content": "Where does Postgres run again?", "timestamp": 1764000000000}}',
        '{"type": "message", "message": {"role": "assistant", "content": "On db-2, port 5433. The admin key is ' + SECRET + '", "timestamp": 1764000001000}}',
        '{"type": "message", "message": {"role": "user", "content": "Thanks, and the staging cluster?", "timestamp": 1764000002000}}',
        '{"type": "message", "message": {"role": "assistant", "content": "It is called kestrel.", "timestamp": 1764000003000}}',
    ]) + "\n"
    return {
        "MEMORY.md": "# Long-term memory\n\n## People\n- Dana Whitfield is the contact at Acme.\n- The user prefers short answers.\n",
        f"memory/{recent}.md": (
            f"# {recent}\n\nStandup at 9:30, nothing unusual.\n\n## Infra\n- Postgres 16 runs on db-2, port 5433.\n"
            "- The staging cluster is called kestrel.\n\n## Acme\n- Acme wants the delivery by June 3.\n- Budget for Acme is 40k EUR.\n"
        ),
        f"memory/{older}.md": f"# {older}\n\n## Infra\n- Postgres 14 ran on db-1 before the migration.\n",
        "memory/projects/acme.md": "# Acme\n\nThe Acme project: a data platform. Deliverables are tracked in Linear.\n",
        "memory/pasted.md": XSS_NOTE,
        ODD_NAME: "# A note with an odd name\n\nIts name is markup; the page must show it as text.\n",
        "memory/runbook.md": LONG_NOTE,
        "memory/huge.md": "# Huge\n\n" + ("filler line that makes this note too large to index\n" * 500),
        ".openclaw/sessions/main/transcripts/2026-11-20.jsonl": transcript,
    }


LONG_NOTE = "# Runbook\n\n" + "\n\n".join(
    f"## Step {i}\n\nCheck the {topic} on db-{i % 3 + 1}, then write down what changed and who was told about it."
    for i, topic in enumerate(["backups", "replication lag", "disk usage", "connection pool", "vacuum", "certificates",
                               "alerts", "dashboards", "failover", "restore drill", "access list", "slow queries"] * 2, 1)
) + "\n"


def demo_config(tmp: Path, provider: str = "none", **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "provider": provider,
        "store": {"path": str(tmp / "index.sqlite")},
        "sources": ["memory", "sessions"],
        "sessions": {"visibility": "all"},
        "limits": {"maxFileBytes": 16_000},
        "sync": {"watch": False},
        "dreaming": {"timezone": "UTC"},
    }
    config.update(extra)
    return config


def write_workspace(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def record_recalls(workspace: Path, config: dict[str, Any]) -> None:
    """Real recalls: searches through a manager with recall tracking on, spread over three days, so
    the Postgres and kestrel facts pass the promotion thresholds; then stage them for review.

    Keyword-only, on an index of its own: recalls are keyed by file and lines, not by index, and
    fifteen query embeddings would only slow the tests down."""
    from mdrecall import open_manager
    from mdrecall.dreaming import stage

    store = dict(config["store"], path=str(Path(config["store"]["path"]).with_name("recalls.sqlite")))
    keyword_only = {**config, "provider": "none", "store": store}
    queries = ["where does postgres run", "postgres port", "which port for the database postgres",
               "staging cluster name kestrel", "what is kestrel"]
    with open_manager(workspace, keyword_only) as manager:
        manager.sync()
        for day in (3, 2, 1):
            for query in queries:
                manager.search(query, now=days_ago(day))
        manager.flush()
    stage(workspace, config, days_ago(0))


class SharedModel(ProviderBase):
    """The session's local model under another provider id, so a test manager gets real vectors
    without loading the model again (registered as a provider plugin with mdrecall.testing)."""

    id = "ui-local"

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.model = inner.model
        self.languages = inner.languages

    @property
    def dims(self) -> int | None:
        return int(self._inner.dims)

    @property
    def identity(self) -> dict[str, Any]:
        return {**self._inner.identity, "provider": self.id}

    @property
    def max_input_tokens(self) -> int:
        return int(self._inner.max_input_tokens)

    @property
    def max_batch_items(self) -> int:
        return int(self._inner.max_batch_items)

    def count_tokens(self, text: str) -> int:
        return int(self._inner.count_tokens(text))

    def count_tokens_many(self, texts: Any) -> list[int]:
        return list(self._inner.count_tokens_many(texts))

    def embed_documents(self, texts: Any) -> list[list[float]]:
        return list(self._inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return list(self._inner.embed_query(text))


@contextmanager
def serving(manager: Any, *, token: str | None = None) -> Iterator[str]:
    """The inspector for ``manager`` on 127.0.0.1 (a free port), in a thread; yields its base URL."""
    import uvicorn

    from mdrecall.http_guard import HttpSecurity
    from mdrecall.ui import build_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build_app(manager, HttpSecurity.for_binding("127.0.0.1", port, token=token))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the inspector did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must run the browser tests, not skip them
        pytest.skip(message)


@dataclass
class Browser:
    context: Any
    playwright: Any

    def page(self) -> Any:
        page = self.context.new_page()
        page.set_default_timeout(15_000)
        return page


@contextmanager
def chromium(tmp: Path) -> Iterator[Browser]:
    """One headless Chromium with a fresh profile (``tmp``)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1200, "height": 900}, device_scale_factor=1,
        )
        try:
            yield Browser(context, playwright)
        finally:
            context.close()


def screenshot(page: Any, name: str, *, docs: bool = False, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    if docs and os.environ.get("MDRECALL_UI_DOCS_IMG") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / f"ui-{name}.png")
    return path
