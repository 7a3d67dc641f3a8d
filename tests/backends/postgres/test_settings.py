"""The postgres config section and the visibility rule (no server needed)."""

from __future__ import annotations

import pytest

from mdrecall.backends.postgres.settings import PostgresSettings, connection_settings
from mdrecall.backends.postgres.status import redacted_dsn
from mdrecall.backends.postgres.visibility import classify
from mdrecall.config import load_config, parse_config
from mdrecall.errors import ConfigError


def _load(section: dict) -> PostgresSettings:  # type: ignore[type-arg]
    return connection_settings(parse_config({"backend": "postgres", "postgres": section}))


def test_settings_validate_with_clear_errors() -> None:
    settings = _load({"dsn": "postgresql:///x", "sharedFolders": ["team/", "/memory/shared"]})
    assert settings.sharedFolders == ["team/", "memory/shared/"] and settings.hnsw.efSearch == 100
    for section, message in (({}, "postgres.dsn"), ({"dsn": "x", "poolMin": 5, "poolMax": 2}, "poolMin"),
                             ({"dsn": "x", "sharedFolders": ["../other"]}, "sharedFolders"),
                             ({"dsn": "x", "poolMax": 1}, "poolMax"), ({"dsn": "x", "hnsw": {"ef": 1}}, "hnsw.ef"),
                             ({"dsn": "x", "textSearchConfig": "english; drop"}, "textSearchConfig")):
        with pytest.raises(ConfigError, match=message):
            _load(section)


def test_the_section_is_part_of_the_one_config_tree(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".mdrecall.yaml").write_text("backend: postgres\npostgres:\n  dsn: postgresql:///team\n  poolMax: 8\n")
    config = load_config(tmp_path, {"postgres": {"hnsw": {"efSearch": 200}}}, use_global=False)
    assert isinstance(config.postgres, PostgresSettings)
    assert (config.postgres.dsn, config.postgres.poolMax, config.postgres.hnsw.efSearch) == ("postgresql:///team", 8, 200)
    assert parse_config({}).postgres.dsn is None  # other backends need nothing of it
    with pytest.raises(ConfigError, match="did you mean 'sharedFolders'"):
        parse_config({"postgres": {"sharedFolder": ["x/"]}})
    with pytest.raises(ConfigError) as err:  # a bad value never echoes the DSN's password
        parse_config({"postgres": {"dsn": "postgresql://a:s3cret@h/db", "poolMin": 5, "poolMax": 2}})
    assert "s3cret" not in str(err.value) and "poolMax" in str(err.value)


def test_status_shows_the_dsn_without_its_password() -> None:
    assert redacted_dsn("postgresql://agent:s3cret@db.example:5433/team?sslmode=require") == \
        "user=agent dbname=team host=db.example port=5433 sslmode=require"
    assert "s3cret" not in (redacted_dsn("host=/tmp dbname=x user=a password=s3cret") or "")


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
