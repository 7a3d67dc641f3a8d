"""The postgres config section and the visibility rule (no server needed)."""

from __future__ import annotations

import pytest

from mdrecall.backends.postgres.settings import load_settings
from mdrecall.backends.postgres.visibility import classify
from mdrecall.config import parse_config
from mdrecall.errors import ConfigError


def _load(section: dict) -> object:  # type: ignore[type-arg]
    return load_settings(parse_config({"backend": "postgres", "postgres": section}))


def test_settings_validate_with_clear_errors() -> None:
    settings = _load({"dsn": "postgresql:///x", "sharedFolders": ["team/", "/memory/shared"]})
    assert settings.sharedFolders == ["team/", "memory/shared/"] and settings.hnsw.efSearch == 100  # type: ignore[attr-defined]
    for section, message in (({}, "postgres.dsn"), ({"dsn": "x", "poolMin": 5, "poolMax": 2}, "poolMin"),
                             ({"dsn": "x", "sharedFolders": ["../other"]}, "sharedFolders"),
                             ({"dsn": "x", "poolMax": 1}, "poolMax"), ({"dsn": "x", "hnsw": {"ef": 1}}, "hnsw.ef"),
                             ({"dsn": "x", "textSearchConfig": "english; drop"}, "textSearchConfig")):
        with pytest.raises(ConfigError, match=message):
            _load(section)


@pytest.mark.parametrize(("path", "source", "text", "expected"), [
    ("memory/shared/a.md", "memory", "- note\n", "team"),
    ("memory/a.md", "memory", "---\nvisibility: team\n---\n- note\n", "team"),
    ("memory/a.md", "memory", "---\ntitle: x\nvisibility: 'shared'  # for all\n---\n", "team"),
    ("memory/shared/a.md", "memory", "---\nvisibility: private\n---\n", "private"),
    ("memory/a.md", "memory", "- visibility: team (not front matter)\n", "private"),
    ("memory/a.md", "memory", "---\nvisibility: everyone\n---\n", "private"),
    ("memory/sharedx/a.md", "memory", "", "private"),
    (".openclaw/sessions/k/transcripts/t.jsonl", "sessions", "---\nvisibility: team\n---\n", "private"),
    ("memory/shared/a.md", "memory", None, "private"),
])
def test_visibility_rule(path: str, source: str, text: str | None, expected: str) -> None:
    assert classify(path, source, text, ["memory/shared/"]) == expected
