"""The validated-config cache (config_cache.py): a config read back equals the one validated, values,
types and explicitly given keys alike; anything that changes the inputs changes the key; no secret, no
invalid config and nothing untrustworthy is ever served from it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from pydantic import BaseModel

from mdrecall import config_cache
from mdrecall.config import MemoryConfig, _validate, default_config, load_config
from mdrecall.errors import ConfigError

RICH = """\
memory:
  provider: openai
  model: text-embedding-3-small
  extraPaths: [notes, ../shared]
  sources: [memory, sessions]
  remote:
    baseUrl: http://127.0.0.1:9/v1
    headers: {X-Team: search}
    batch: {enabled: true, minItems: 10}
  providers:
    voyage: {model: voyage-3, options: {truncate: true, levels: [1, 2.5, null]}}
  query:
    maxResults: 7
    hybrid: {vectorWeight: 0.6, textWeight: 0.4}
    mmr: {enabled: true, lambda: 0.5}
  chunking: {tokens: 300, overlap: 60}
  dreaming: {timezone: Europe/Berlin}
  flush: {forceFlushTranscriptBytes: 3mb}
  qmd: {mode: vsearch, extraArgs: [--no-gpu]}
  plugins: {notes: {folder: x, depth: 2}}
"""


def _files(home: Path) -> list[Path]:
    folder = config_cache.cache_dir(home)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _home() -> Path:
    return Path(os.environ["MDRECALL_HOME"])


def _ws(tmp_path: Path, text: str = RICH) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / ".mdrecall.yaml").write_text(text, encoding="utf-8")
    return ws


def _fields_sets(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {"": sorted(model.model_fields_set)}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out[name] = _fields_sets(value)
    return out


def test_a_config_read_back_equals_the_validated_one(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    overrides = {"query": {"minScore": 0.2}, "sync": {"watch": False}}
    first = load_config(ws, overrides)
    assert len(_files(_home())) == 1
    second = load_config(ws, overrides)
    assert second is not first
    assert second == first and config_cache.same(second, first)
    assert _fields_sets(second) == _fields_sets(first)
    assert second.model_dump() == first.model_dump()  # what `config show` and exclude_unset read
    assert second.model_dump(exclude_unset=True) == first.model_dump(exclude_unset=True)
    assert second.flush.forceFlushTranscriptBytes == 3 * 1024 * 1024
    assert second.dreaming.tz() is not None and second.query.mmr.lambda_ == 0.5
    # Read back, the models still validate what is assigned to them.
    with pytest.raises(ValueError, match="maxResults"):
        second.query.maxResults = 0


def test_the_cached_config_is_what_validation_gives_when_read_back(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    load_config(ws)
    path = _files(_home())[0]
    header, _, body = path.read_text(encoding="utf-8").partition("\n")
    assert json.loads(header)["format"] == config_cache.FORMAT
    rebuilt = config_cache.read(_home(), path.stem, MemoryConfig)
    validated = _validate([(ws / ".mdrecall.yaml", RICH)], None)
    assert rebuilt is not None and config_cache.same(rebuilt, validated)


def test_a_changed_file_or_override_is_validated_again(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    assert load_config(ws).query.maxResults == 7
    # Same size, same second: the key holds the bytes, not the file's stat.
    stat = (ws / ".mdrecall.yaml").stat()
    (ws / ".mdrecall.yaml").write_text(RICH.replace("maxResults: 7", "maxResults: 8"), encoding="utf-8")
    os.utime(ws / ".mdrecall.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_config(ws).query.maxResults == 8
    assert load_config(ws, {"query": {"maxResults": 9}}).query.maxResults == 9
    assert load_config(ws, {"query": {"maxResults": 9}}, use_global=False).query.maxResults == 9
    (_home() / "config.yaml").write_text("memory:\n  query: {minScore: 0.1}\n", encoding="utf-8")
    assert load_config(ws).query.minScore == 0.1
    assert load_config(ws, use_global=False).query.minScore == 0.35
    (ws / ".mdrecall.yaml").unlink()
    assert load_config(ws).query.maxResults == 10
    assert len(_files(_home())) == 7


def test_the_key_changes_with_the_code_that_defines_the_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _ws(tmp_path)
    files = [(ws / ".mdrecall.yaml", RICH)]
    key = config_cache.key_for(files, None, True)
    import mdrecall.config

    module = Path(mdrecall.config.__file__)
    st = module.stat()
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert config_cache.key_for(files, None, True) != key
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert config_cache.key_for(files, None, True) == key
    monkeypatch.setattr("mdrecall.__version__", "9.9.9")
    assert config_cache.key_for(files, None, True) != key


def test_a_config_that_holds_a_secret_is_never_written(tmp_path: Path) -> None:
    ws = _ws(tmp_path, RICH.replace("baseUrl: http://127.0.0.1:9/v1", "baseUrl: http://127.0.0.1:9/v1\n    apiKey: sk-live-0123456789"))
    assert load_config(ws).remote.apiKey == "sk-live-0123456789"
    assert load_config(ws, {"postgres": {"dsn": "postgresql://me:hunter2@db/x"}}).postgres.dsn
    assert load_config(ws, {"remote": {"headers": {"Authorization": "Bearer abc"}}}).remote.headers
    assert _files(_home()) == []
    # An environment reference is not the secret: `config show` prints it, and it may be cached.
    assert load_config(None, {"remote": {"apiKey": "${OPENAI_API_KEY}"}}).remote.apiKey == "${OPENAI_API_KEY}"
    assert len(_files(_home())) == 1
    assert "hunter2" not in "".join(p.read_text() for p in _files(_home()))


def test_an_invalid_config_is_never_cached_and_fails_each_time(tmp_path: Path) -> None:
    ws = _ws(tmp_path, "query: {maxResult: 5}\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="did you mean 'maxResults'"):
            load_config(ws)
    assert _files(_home()) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut short
        lambda text: "garbage",
        lambda text: text.replace('"maxResults":7', '"maxResults":70'),  # edited: the digest no longer matches
        lambda text: text.replace('"format": 1', '"format": 0'),
    ],
)
def test_a_damaged_cache_file_is_ignored_and_replaced(tmp_path: Path, damage: Any) -> None:
    ws = _ws(tmp_path)
    expected = load_config(ws)
    path = _files(_home())[0]
    good = path.read_text(encoding="utf-8")
    damaged = damage(good)
    assert damaged != good
    path.write_text(damaged, encoding="utf-8")
    assert config_cache.read(_home(), path.stem, MemoryConfig) is None
    got = load_config(ws)
    assert config_cache.same(got, expected) and got.query.maxResults == 7
    assert path.read_text(encoding="utf-8") == good


def test_a_cache_file_naming_a_class_outside_the_config_tree_or_missing_a_field_is_refused(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    load_config(ws)
    path = _files(_home())[0]
    header, _, body = path.read_text(encoding="utf-8").partition("\n")
    for edit in (
        lambda p: p.update({"$model": "mdrecall.errors:ConfigError"}),
        lambda p: p["fields"]["query"]["fields"].pop("maxResults"),
        lambda p: p["fields"]["query"].update({"$model": "mdrecall.config:HybridConfig"}),
    ):
        payload = json.loads(body)
        edit(payload)
        new_body = json.dumps(payload, separators=(",", ":"))
        import hashlib

        new_header = json.dumps({"format": config_cache.FORMAT, "digest": hashlib.sha256(new_body.encode()).hexdigest()})
        path.write_text(f"{new_header}\n{new_body}", encoding="utf-8")
        assert config_cache.read(_home(), path.stem, MemoryConfig) is None


def test_values_json_would_not_give_back_are_not_cached(tmp_path: Path) -> None:
    assert load_config(None, {"extraPaths": (str(tmp_path),)}).extraPaths == [str(tmp_path)]
    assert load_config(None, {"query": MappingProxyType({"maxResults": 3})}).query.maxResults == 3
    assert _files(_home()) == []
    assert config_cache.key_for([], {"query": {"minScore": float("nan")}}, True) is None
    assert config_cache.key_for([], {"sources": ("memory",)}, True) is None
    assert config_cache.key_for([], {"sources": ["memory"]}, True) is not None


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDRECALL_CONFIG_CACHE", "off")
    assert load_config(_ws(tmp_path)).query.maxResults == 7
    assert _files(_home()) == []


def test_an_unwritable_home_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "home-file"
    blocked.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("MDRECALL_HOME", str(blocked))
    assert load_config(_ws(tmp_path), use_global=False).query.maxResults == 7


def test_old_files_are_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_cache, "MAX_FILES", 3)
    for n in range(1, 7):
        load_config(None, {"query": {"maxResults": n}})
    assert len(_files(_home())) == 3
    assert load_config(None, {"query": {"maxResults": 6}}).query.maxResults == 6


def _sections(model: type[BaseModel]) -> list[type[BaseModel]]:
    return list(config_cache._models(model).values())


def test_default_config_is_what_validation_gives_for_every_section() -> None:
    assert config_cache.same(default_config(), MemoryConfig())
    from mdrecall.config import _constructed_defaults

    sections = _sections(MemoryConfig)
    assert len(sections) > 30
    for cls in sections:
        assert config_cache.same(_constructed_defaults(cls), cls()), cls.__name__


def test_plain_values_are_model_dump(tmp_path: Path) -> None:
    config = load_config(_ws(tmp_path), {"query": {"maxResults": 3}})
    assert config_cache.plain_values(config) == config.model_dump()
    assert config_cache.plain_values(MemoryConfig()) == MemoryConfig().model_dump()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_cache_file_others_may_write_is_not_trusted(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    load_config(ws)
    path = _files(_home())[0]
    assert config_cache.read(_home(), path.stem, MemoryConfig) is not None
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o666)
    assert config_cache.read(_home(), path.stem, MemoryConfig) is None
    assert load_config(ws).query.maxResults == 7  # validated again, and the file replaced: private again
    assert path.stat().st_mode & 0o777 == 0o600
    assert config_cache.read(_home(), path.stem, MemoryConfig) is not None
