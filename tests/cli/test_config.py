"""``mdrecall config show | validate``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Run = Callable[..., tuple[int, str, str]]


def test_show_prints_the_config_in_effect_with_secrets_masked(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mdrecall.yaml").write_text("provider: openai\nproviders: {openai: {apiKey: sk-live-secret}}\nquery: {maxResults: 5}\n",
                                       encoding="utf-8")  # fmt: skip
    code, out, _ = mdrecall("config", "show", "-w", str(ws), "--json", "-c", "query.minScore=0.2")
    data = json.loads(out)
    assert code == 0 and data["files"] == [str(ws / ".mdrecall.yaml")] and data["overrides"] == ["query.minScore=0.2"]
    assert data["config"]["query"]["maxResults"] == 5 and data["config"]["query"]["minScore"] == 0.2
    assert data["config"]["providers"]["openai"]["apiKey"] == "***" and "sk-live-secret" not in out
    code, out, _ = mdrecall("config", "show", "-w", str(ws), "--changed")
    assert code == 0 and "maxResults: 5" in out and "minScore" not in out and "sk-live" not in out


def test_show_masks_secrets_by_key_everywhere_it_shows_them(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    secrets = ["sk-cli-secret", "Bearer hdr-secret", "pg-secret", "env-secret"]
    overrides = ["-c", "remote.apiKey=sk-cli-secret", "-c", "remote.headers={Authorization: Bearer hdr-secret, X-Team: blue}",
                 "-c", "query.fts.tokenizer=trigram", "-c", "extraPaths=['postgresql://bob:pg-secret@db/notes']",
                 "-c", "remote.baseUrl=https://api.example/v1"]  # fmt: skip
    code, out, _ = mdrecall("config", "show", "-w", str(ws), *overrides)
    assert code == 0 and not any(secret in out for secret in secrets), out
    header = next(line for line in out.splitlines() if line.startswith("# overrides:"))
    assert "'remote.apiKey=***'" in header and "query.fts.tokenizer=trigram" in header and "X-Team" in header
    assert "tokenizer: trigram" in out and "tokens: 200" in out  # harmless keys that contain "token" are shown
    assert "postgresql://bob:***@db/notes" in out and "baseUrl: https://api.example/v1" in out
    code, out, _ = mdrecall("config", "show", "-w", str(ws), "--json", *overrides)
    data = json.loads(out)
    assert code == 0 and not any(secret in out for secret in secrets)
    assert data["overrides"][0] == "remote.apiKey=***" and data["overrides"][2] == "query.fts.tokenizer=trigram"
    assert data["config"]["remote"]["headers"] == {"Authorization": "***", "X-Team": "blue"}
    # A value the key's type refuses is not echoed in the error either.
    code, _, err = mdrecall("config", "show", "-w", str(ws), "-c", "remote.apiKey=[env-secret]")
    assert code == 2 and "env-secret" not in err and "remote.apiKey" in err


def test_show_changed_lists_only_what_differs(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    code, out, _ = mdrecall("config", "show", "-w", str(ws), "--changed")
    assert code == 0 and out.splitlines()[1:] == ["# nothing differs from the defaults"]
    code, out, _ = mdrecall("config", "show", "-w", str(ws), "--changed", "--json", "-c", "query.maxResults=4")
    assert code == 0 and json.loads(out)["config"] == {"query": {"maxResults": 4}}


def test_validate(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert mdrecall("config", "validate", "-w", str(ws)) [0] == 0
    (ws / ".mdrecall.yaml").write_text("query:\n  maxResult: 5\n", encoding="utf-8")
    code, _, err = mdrecall("config", "validate", "-w", str(ws))
    assert code == 2 and "query.maxResult" in err and "did you mean 'maxResults'" in err and str(ws / ".mdrecall.yaml") in err
    good = tmp_path / "good.yaml"
    good.write_text("memory:\n  provider: none\n", encoding="utf-8")
    code, out, _ = mdrecall("config", "validate", str(good), "--json")
    assert code == 0 and json.loads(out) == {"ok": True, "checked": [str(good)], "errors": []}
    bad = tmp_path / "bad.yaml"
    bad.write_text("provider: [unclosed\n", encoding="utf-8")
    code, out, _ = mdrecall("config", "validate", str(good), str(bad), "--json")
    data = json.loads(out)
    assert code == 2 and not data["ok"] and len(data["errors"]) == 1 and "bad.yaml" in data["errors"][0]
