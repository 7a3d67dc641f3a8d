"""The lancedb config section: defaults, ${ENV} expansion, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdrecall.backends.lancedb.settings import default_db_path, load_settings
from mdrecall.errors import ConfigError


def test_defaults_live_under_the_index_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path / "home"))
    s = load_settings({})
    uri = s.db_uri(tmp_path / "my ws")
    assert uri == str(default_db_path(tmp_path / "my ws"))
    assert Path(uri).parent == tmp_path / "home" / "lancedb" and Path(uri).name.startswith("my_ws-")
    assert (s.duplicateThreshold, s.recallMinScore, s.recallLimit, s.maxCapturesPerTurn) == (0.93, 0.30, 3, 3)


def test_env_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LTM_BUCKET", "team-bucket")
    monkeypatch.setenv("LTM_SECRET", "s3cr3t")
    s = load_settings({"dbPath": "s3://${LTM_BUCKET}/agents", "storageOptions": {"aws_secret_access_key": "${LTM_SECRET}"}})
    assert s.db_uri(Path(".")) == "s3://team-bucket/agents"
    assert s.storage_options() == {"aws_secret_access_key": "s3cr3t"}
    monkeypatch.delenv("LTM_SECRET")
    with pytest.raises(ConfigError, match="LTM_SECRET"):
        s.storage_options()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"dbpath": "x"}, "unknown key 'lancedb.dbpath'"),
        ({"captureMaxChars": 50}, "lancedb.captureMaxChars"),
        ({"customTriggers": ["(unclosed"]}, "customTriggers"),
        ({"captureRoles": ["system"]}, "lancedb.captureRoles"),
        ({"maintenance": {"every": 3}}, "lancedb.maintenance.every"),
    ],
)
def test_bad_values_name_the_key(section: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(section)
