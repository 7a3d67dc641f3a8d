"""``-c`` overrides are one-shot: they never rewrite the workspace's shared index (issue #16, item 7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from mdrecall.cli import main
from mdrecall.testing import FakeProvider, plugin, registered


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Billing runs on Postgres 16.\n", encoding="utf-8")
    (ws / "memory" / "2026-03-01.md").write_text("# 2026-03-01\n\n- Moved search to Meilisearch.\n", encoding="utf-8")
    (ws / ".mdrecall.yaml").write_text("provider: fake\n", encoding="utf-8")
    providers = {"fake": lambda config: FakeProvider(), "other": lambda config: FakeProvider(dims=32, model="other")}
    with registered(plugin(providers=providers)):
        yield ws


def _index_files(home: Path) -> list[Path]:
    return sorted(p for p in (home / "index").glob("*.sqlite"))


def _meta(path: Path) -> dict[str, object]:
    con = apsw.Connection(str(path))
    try:
        return json.loads(con.execute("SELECT value FROM meta WHERE key = 'memory_index_meta_v1'").fetchone()[0])
    finally:
        con.close()


def _stored(path: Path) -> tuple[object, ...]:
    """Everything a rewrite would change: every table's rows (vectors as stored) and the encoding."""
    con = apsw.Connection(str(path))
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return tuple((t, sorted(map(repr, con.execute(f'SELECT * FROM "{t}"')))) for t in sorted(tables))
    finally:
        con.close()


def test_keyword_only_override_answers_from_the_shared_index_without_rebuilding_it(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "-w", str(workspace), "-q"]) == 0
    (shared,) = _index_files(tmp_path / "home")
    before, stored = _meta(shared), _stored(shared)
    assert before["provider"] == "fake"
    capsys.readouterr()
    assert main(["search", "-w", str(workspace), "-c", "provider=none", "Postgres", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "keyword-only" and out["results"][0]["path"] == "MEMORY.md"
    assert _index_files(tmp_path / "home") == [shared]  # no index of its own
    assert _meta(shared) == before  # and the shared one still holds the fake model's vectors
    assert _stored(shared) == stored  # every row as it was (float16 vectors included)


def test_a_keyword_only_override_of_a_changed_workspace_says_its_answer_is_stale(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "-w", str(workspace), "-q"]) == 0
    (workspace / "memory" / "2026-03-02.md").write_text("- The queue is called heliotrope.\n", encoding="utf-8")
    capsys.readouterr()
    main(["search", "-w", str(workspace), "-c", "provider=none", "heliotrope", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["stale"] is True and any("read-only" in w for w in out["warnings"])


def test_another_provider_override_uses_an_index_of_its_own(workspace: Path, tmp_path: Path) -> None:
    assert main(["index", "-w", str(workspace), "-q"]) == 0
    (shared,) = _index_files(tmp_path / "home")
    before = _meta(shared)
    assert main(["search", "-w", str(workspace), "-c", "provider=other", "Meilisearch"]) == 0
    files = _index_files(tmp_path / "home")
    assert len(files) == 2 and shared in files
    (own,) = [p for p in files if p != shared]
    assert ".override-" in own.name and _meta(own)["model"] == "other"
    assert _meta(shared) == before


def test_the_session_key_comes_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    transcripts = workspace / ".openclaw" / "sessions" / "chat-7" / "transcripts"
    transcripts.mkdir(parents=True)
    line = {"type": "message", "message": {"role": "user", "content": "the wifi password hint is pebble-guest"}}
    (transcripts / "t1.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    args = ["search", "-w", str(workspace), "-c", "sources=[memory,sessions]", "pebble-guest", "--json"]
    capsys.readouterr()
    assert main(args) == 1  # no session key: the transcript is hidden ...
    hidden = json.loads(capsys.readouterr().out)
    assert any("hidden from a search without a session key" in w for w in hidden["warnings"])  # ... and it says so
    monkeypatch.setenv("MDRECALL_SESSION_KEY", "chat-7")
    assert main(args) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["results"][0]["source"] == "sessions"
    assert not any("hidden" in w for w in found["warnings"])


def test_on_a_shared_store_backend_keyword_only_reads_and_another_model_is_refused(workspace: Path) -> None:
    from mdrecall.cli.options import load_cli_config
    from mdrecall.errors import ConfigError

    (workspace / ".mdrecall.yaml").write_text("provider: fake\nbackend: postgres\n", encoding="utf-8")
    config = load_cli_config(str(workspace), ["provider=none"])
    assert config.store.readOnly is True and config.backend == "postgres"
    with pytest.raises(ConfigError, match="would rewrite the shared store"):
        load_cli_config(str(workspace), ["provider=other"])
    assert load_cli_config(str(workspace), []).store.readOnly is False  # no override: the config as it is
