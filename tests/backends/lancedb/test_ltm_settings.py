"""The lancedb config section (``MemoryConfig.lancedb``): defaults, ${ENV} expansion, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdrecall.backends.lancedb.settings import LanceDBSettings, default_db_path
from mdrecall.config import load_config, mdrecall_home, parse_config
from mdrecall.errors import ConfigError


def test_defaults_live_under_the_index_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path / "home"))
    s = load_config(None, use_global=False).lancedb
    assert isinstance(s, LanceDBSettings)
    uri = s.db_uri(tmp_path / "my ws", mdrecall_home())
    assert uri == str(default_db_path(tmp_path / "my ws", mdrecall_home()))
    assert Path(uri).parent == tmp_path / "home" / "lancedb" and Path(uri).name.startswith("my_ws-")
    assert (s.duplicateThreshold, s.recallMinScore, s.recallLimit, s.maxCapturesPerTurn) == (0.93, 0.30, 3, 3)


def test_env_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LTM_BUCKET", "team-bucket")
    monkeypatch.setenv("LTM_SECRET", "s3cr3t")
    s = parse_config({"lancedb": {"dbPath": "s3://${LTM_BUCKET}/agents", "storageOptions": {"aws_secret_access_key": "${LTM_SECRET}"}}}).lancedb
    assert s.db_uri(Path("."), Path("/unused")) == "s3://team-bucket/agents"
    assert s.storage_options() == {"aws_secret_access_key": "s3cr3t"}
    monkeypatch.delenv("LTM_SECRET")
    with pytest.raises(ConfigError, match="LTM_SECRET"):
        s.storage_options()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"dbpath": "x"}, "unknown key 'lancedb.dbpath' (did you mean 'dbPath'?)"),
        ({"captureMaxChars": 50}, "lancedb.captureMaxChars"),
        ({"customTriggers": ["(unclosed"]}, "customTriggers"),
        ({"captureRoles": ["system"]}, "lancedb.captureRoles"),
        ({"maintenance": {"every": 3}}, "lancedb.maintenance.every"),
    ],
)
def test_bad_values_name_the_key(section: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"lancedb": section})
    assert message in str(exc.value)
