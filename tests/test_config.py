"""Config: seed defaults, validation messages that name the bad key, and file precedence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.config import MemoryConfig, load_config, parse_config
from mdrecall.errors import ConfigError


def test_defaults_match_the_seed() -> None:
    cfg = MemoryConfig()
    assert cfg.backend == "builtin"
    assert cfg.provider == "auto"
    assert cfg.cache.enabled is True
    assert cfg.query.hybrid.enabled is True
    assert (cfg.query.hybrid.vectorWeight, cfg.query.hybrid.textWeight) == (0.7, 0.3)
    assert cfg.query.hybrid.fusion == "weighted"
    assert cfg.query.mmr.enabled is False and cfg.query.mmr.lambda_ == 0.7
    assert cfg.query.fts.tokenizer == "unicode61"
    # Decay is opt-in (as in the reference); see docs/benchmarks.md for why.
    assert cfg.query.temporalDecay.enabled is False and cfg.query.temporalDecay.halfLifeDays == 30
    assert (cfg.query.maxResults, cfg.query.minScore, cfg.query.maxInjectedChars) == (10, 0.35, 4000)
    assert cfg.sync.onSearch is True and cfg.sync.onSessionStart is True
    assert cfg.limits.maxFileBytes == 10 * 1024 * 1024
    assert (cfg.read.maxLines, cfg.read.maxChars) == (120, 12_000)
    assert cfg.extraPaths == []
    assert cfg.sources == ["memory"]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"query": {"maxResult": 5}}, "query.maxResult"),
        ({"query": {"hybrid": {"vectorWeight": 1.5}}}, "query.hybrid.vectorWeight"),
        ({"query": {"fts": {"tokenizer": "porter"}}}, "query.fts.tokenizer"),
        ({"query": {"temporalDecay": {"halfLifeDays": 0}}}, "query.temporalDecay.halfLifeDays"),
        ({"chunking": {"tokens": "lots"}}, "chunking.tokens"),
        ({"limits": {"maxFileBytes": -1}}, "limits.maxFileBytes"),
        ({"extraPath": ["notes"]}, "extraPath"),
        ({"store": {"vector": {"extension": "x.so"}}}, "store.vector.extension"),
    ],
)
def test_validation_error_names_the_bad_key(data: dict, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert named in str(info.value)


def test_overlap_must_be_smaller_than_tokens() -> None:
    with pytest.raises(ConfigError, match=r"chunking\.overlap"):
        parse_config({"chunking": {"tokens": 50, "overlap": 50}})


def test_mmr_accepts_the_seed_spelling_lambda() -> None:
    cfg = parse_config({"query": {"mmr": {"enabled": True, "lambda": 0.5}}})
    assert cfg.query.mmr.enabled and cfg.query.mmr.lambda_ == 0.5


def test_precedence_defaults_global_workspace_overrides(tmp_path: Path, _isolated_home: Path) -> None:
    (_isolated_home / "config.yaml").write_text(
        "memory:\n  provider: none\n  query:\n    maxResults: 3\n    minScore: 0.2\n  chunking:\n    tokens: 300\n",
        encoding="utf-8",
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    # Workspace file without the ``memory:`` wrapper: the top level is the memory section.
    (ws / ".mdrecall.yaml").write_text("query:\n  maxResults: 5\nchunking:\n  overlap: 10\n", encoding="utf-8")
    cfg = load_config(ws, {"query": {"minScore": 0.5}})
    assert cfg.provider == "none"  # global
    assert cfg.chunking.tokens == 300  # global, deep-merged with the workspace's chunking section
    assert cfg.chunking.overlap == 10  # workspace
    assert cfg.query.maxResults == 5  # workspace beats global
    assert cfg.query.minScore == 0.5  # overrides beat both
    assert cfg.query.hybrid.vectorWeight == 0.7  # untouched default survives the merges

    without_global = load_config(ws, None, use_global=False)
    assert without_global.provider == "auto" and without_global.chunking.tokens == 200
    assert without_global.query.maxResults == 5


def test_workspace_config_dir_variant(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".mdrecall").mkdir(parents=True)
    (ws / ".mdrecall" / "config.yaml").write_text("memory:\n  query:\n    maxResults: 7\n", encoding="utf-8")
    assert load_config(ws).query.maxResults == 7


def test_bad_key_in_a_file_names_file_and_key(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mdrecall.yaml").write_text("query:\n  hybrid:\n    textWieght: 0.4\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(ws)
    message = str(info.value)
    assert "query.hybrid.textWieght" in message
    assert ".mdrecall.yaml" in message


def test_invalid_yaml_names_the_file(tmp_path: Path, _isolated_home: Path) -> None:
    (_isolated_home / "config.yaml").write_text("memory: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(None)
    assert str(_isolated_home / "config.yaml") in str(info.value)


def test_non_mapping_file_is_rejected(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mdrecall.yaml").write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(ws)


def test_open_manager_reads_the_workspace_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = tmp_path / "idx.sqlite"
    (ws / ".mdrecall.yaml").write_text(f"provider: none\nstore:\n  path: {store}\nquery:\n  maxResults: 4\n", encoding="utf-8")
    with open_manager(ws) as m:
        assert m.config.provider == "none" and m.config.query.maxResults == 4
        m.sync()
    assert store.exists()


def test_open_manager_rejects_bad_override(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="query.minScore"):
        open_manager(tmp_path, {"query": {"minScore": 3}})


def test_default_store_path_is_outside_the_workspace(tmp_path: Path, _isolated_home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# hi\n", encoding="utf-8")
    with open_manager(ws, {"provider": "none"}) as m:
        m.sync()
        db_path = Path(m.status().location)
    assert db_path.is_file()
    assert _isolated_home in db_path.parents
    assert ws not in db_path.parents
    assert not any(p.suffix == ".sqlite" for p in ws.rglob("*"))
    assert os.path.commonpath([db_path, ws]) != str(ws)
