"""``mdrecall ui`` as a person runs it: a real process printing its one-time URL; refused bindings."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from uihelpers import demo_files, write_workspace

from mdrecall.cli import main


def test_ui_is_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--token" in out and "--no-token" in out and "--port" in out


def test_a_public_binding_without_token_is_refused_before_anything_opens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = write_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n"})
    index = tmp_path / "index.sqlite"
    code = main(["ui", "-w", str(ws), "--host", "0.0.0.0", "--no-token", "-c", f"store.path={index}"])
    assert code == 2
    assert "refusing to serve memories on '0.0.0.0' without a bearer token" in capsys.readouterr().err
    assert not index.exists()
    assert main(["ui", "-w", str(ws), "--token", "t", "--no-token"]) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_process_prints_a_one_time_url_that_signs_the_browser_in(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", demo_files())
    port = _free_port()
    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home")}
    env.pop("MDRECALL_UI_TOKEN", None)
    args = [sys.executable, "-m", "mdrecall", "ui", "-w", str(ws), "--port", str(port),
            "-c", "provider=none", "-c", f"store.path={tmp_path / 'index.sqlite'}"]
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(rf"(http://127\.0\.0\.1:{port}/)\?token=([\w-]+)", line)
        assert match, line
        base, token = match.groups()
        deadline = time.monotonic() + 30
        while True:
            try:
                refused = httpx.get(base + "search")
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "the inspector did not start"
                time.sleep(0.1)
        assert refused.status_code == 401
        with httpx.Client(follow_redirects=True) as browser:
            page = browser.get(f"{base}search?q=postgres&token={token}")
            assert page.status_code == 200 and str(page.url) == f"{base}search?q=postgres"
            assert "16 runs on db-2, port 5433." in page.text
            assert browser.get(base + "health").status_code == 200  # the cookie, not the token, from now on
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=20) == 130  # interrupted, as every command exits on Ctrl-C
        finally:
            if proc.poll() is None:
                proc.kill()


def test_a_keyword_only_override_reads_the_shared_index_without_rewriting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mdrecall ui -c provider=none`` over a workspace indexed with a provider: the inspector answers
    keyword-only from the shared index and never rebuilds it (as every command's ``-c`` does)."""
    from uihelpers import serving

    from mdrecall import open_manager
    from mdrecall.cli.ui import inspector_config_for
    from mdrecall.testing import FakeProvider, plugin, registered
    from mdrecall.ui import inspector_config

    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path / "home"))
    ws = write_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\n- Billing runs on Postgres 16.\n",
                                           ".mdrecall.yaml": "provider: fake\n"})
    with registered(plugin(providers={"fake": lambda config: FakeProvider()})):
        assert main(["index", "-w", str(ws), "-q"]) == 0
        (shared,) = sorted((tmp_path / "home" / "index").glob("*.sqlite"))
        before = shared.stat().st_size, sorted((tmp_path / "home" / "index").iterdir())
        config = inspector_config_for(str(ws), ("provider=none",))
        assert config.store.readOnly and Path(config.store.path) == shared  # type: ignore[attr-defined]
        with open_manager(ws, inspector_config(ws, config)) as manager, serving(manager) as url:
            page = httpx.get(url + "/search?q=postgres").text
            assert 'data-mode="keyword-only"' in page and "Billing runs on" in page
            status = manager.status()
            assert status.details["meta"]["provider"] == "fake" and not status.details.get("rebuildNeeded")
            with httpx.Client(base_url=url, follow_redirects=True) as client:
                csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', client.get("/health").text)
                assert csrf
                done = client.post("/health/sync", data={"csrf": csrf.group(1)}).text
                assert "Not synced: the index is read-only here (store.readOnly)." in done
        assert (shared.stat().st_size, sorted((tmp_path / "home" / "index").iterdir())) == before
