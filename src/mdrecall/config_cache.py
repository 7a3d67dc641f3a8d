"""Validated configurations kept on disk, so that a one-shot command does not validate its config.

Validating the config tree builds pydantic's validators for its ~40 models (and pydantic then lists
its own plugins through ``importlib.metadata``): ~160 M instructions, about a tenth of a cold
``mdrecall search``, spent again by every new process on the same files. ``load_config`` keys the
validated result by everything it was made from and keeps it in ``$MDRECALL_HOME/cache/config/``;
the next process with the same inputs rebuilds it with ``model_construct``, which builds no validator.

What the key holds (a SHA-256 digest of all of it): each config file's path and exact bytes (or its
absence), the overrides (only plain JSON values: anything else is never cached), ``use_global``,
mdrecall's and pydantic's versions, and the size and modification time of the modules that define
the config models. Validation reads nothing else: no environment variable, no other file (LanceDB's
``${NAME}`` references are expanded where they are used, not when validated).

What is never cached: a config that holds a secret (a value ``mdrecall config show`` would mask: an
API key, a token, a password in a DSN), so no secret is written anywhere new; a config that does not
rebuild equal to the validated one (checked before writing: values, types and the set of keys given
explicitly); a config that fails validation. A cache file that cannot be read, does not match its
digest, or does not rebuild is ignored and the config validated again, and so is one that is not
the user's own or that others may write. ``MDRECALL_CONFIG_CACHE=off``
turns the cache off; deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel

#: Bumped when the file format changes: older files are then simply not found.
FORMAT = 1
#: Files kept; the oldest are removed when a write goes over (many distinct override sets, e.g. an app
#: that opens managers with generated configs).
MAX_FILES = 64
_PLAIN = (str, int, float, bool, type(None))
#: The modules whose models the config tree is made of: a change to any of them changes the key.
_MODEL_MODULES = (
    "mdrecall.config",
    "mdrecall.types",
    "mdrecall.backends.qmd.settings",
    "mdrecall.backends.postgres.settings",
    "mdrecall.backends.lancedb.settings",
)


def enabled() -> bool:
    return os.environ.get("MDRECALL_CONFIG_CACHE", "").strip().lower() not in ("off", "0", "false", "no")


def cache_dir(home: Path) -> Path:
    return home / "cache" / "config"


def key_for(files: Sequence[tuple[Path, str | None]], overrides: Mapping[str, Any] | None, use_global: bool) -> str | None:
    """The digest of everything a validated config is made from; None when it cannot be keyed
    (overrides holding values JSON would not give back as they are, e.g. a ``Path``)."""
    if overrides and not _is_plain_json(overrides):
        return None
    from pydantic.version import VERSION as pydantic_version

    from mdrecall import __version__

    code = []
    for name in _MODEL_MODULES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not path:
            return None
        st = os.stat(path)
        code.append([name, st.st_size, st.st_mtime_ns])
    parts = [FORMAT, __version__, pydantic_version, code, use_global,
             [[str(path), None if text is None else hashlib.sha256(text.encode()).hexdigest()] for path, text in files],
             overrides or {}]  # fmt: skip
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _is_plain_json(value: Any) -> bool:
    if type(value) is dict:
        return all(type(k) is str and _is_plain_json(v) for k, v in value.items())
    if type(value) is list:
        return all(_is_plain_json(v) for v in value)
    return type(value) in _PLAIN and value == value  # NaN never compares equal: not keyed


def read(home: Path, key: str, root: type[BaseModel]) -> BaseModel | None:
    """The config cached under ``key``, rebuilt; None when there is none or it cannot be trusted."""
    try:
        path = cache_dir(home) / f"{key}.json"
        if not _private(path):
            return None
        header, _, payload = path.read_text(encoding="utf-8").partition("\n")
        meta = json.loads(header)
        if meta.get("format") != FORMAT or meta.get("digest") != hashlib.sha256(payload.encode()).hexdigest():
            return None
        config = _rebuild(json.loads(payload), _models(root))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return config if type(config) is root else None


def write(home: Path, key: str, config: BaseModel) -> bool:
    """Keep ``config`` under ``key`` when it holds no secret and rebuilds equal; False otherwise."""
    from mdrecall.masking import masked

    try:
        payload = _dump(config)
    except TypeError:  # a value JSON cannot hold as it is
        return False
    plain = plain_values(config)
    if masked(plain) != plain:
        return False
    body = json.dumps(payload, separators=(",", ":"))
    try:
        rebuilt = _rebuild(json.loads(body), _models(type(config)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    if not same(rebuilt, config):
        return False
    folder = cache_dir(home)
    header = json.dumps({"format": FORMAT, "digest": hashlib.sha256(body.encode()).hexdigest()})
    text = f"{header}\n{body}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_atomically(folder / f"{key}.json", text)
        _prune(folder)
    except OSError:  # a read-only or full home: the config was validated, the cache is only a saving
        return False
    return True


def plain_values(model: BaseModel) -> dict[str, Any]:
    """``model.model_dump()`` for the config tree (nested models as dicts), without building pydantic's
    serializer: the config's values are plain, so this is the same mapping."""
    return {name: _plain(getattr(model, name)) for name in type(model).model_fields}


def same(a: Any, b: Any) -> bool:
    """Equal values, the same types, and the same keys given explicitly at every level (pydantic's
    ``==`` does not compare ``model_fields_set``, which ``exclude_unset`` and the provider settings read)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseModel):
        if a.model_fields_set != b.model_fields_set or a.model_extra != b.model_extra:
            return False
        return all(same(getattr(a, name), getattr(b, name)) for name in type(a).model_fields)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return plain_values(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        cls = type(value)
        return {"$model": f"{cls.__module__}:{cls.__qualname__}", "$set": sorted(value.model_fields_set),
                "fields": {name: _dump(getattr(value, name)) for name in cls.model_fields}}  # fmt: skip
    if type(value) is dict:
        if not all(type(k) is str for k in value):
            raise TypeError("a mapping with keys other than strings")
        return {"$dict": {k: _dump(v) for k, v in value.items()}}
    if type(value) is list:
        return [_dump(v) for v in value]
    if type(value) in _PLAIN:
        return value
    raise TypeError(f"{type(value).__name__} is not kept as it is")


def _rebuild(value: Any, models: Mapping[str, type[BaseModel]]) -> Any:
    if isinstance(value, list):
        return [_rebuild(v, models) for v in value]
    if not isinstance(value, dict):
        return value
    if "$dict" in value:
        return {k: _rebuild(v, models) for k, v in value["$dict"].items()}
    cls = models[value["$model"]]
    fields = value["fields"]
    if fields.keys() != cls.model_fields.keys():  # a missing field would silently take its default
        raise KeyError(value["$model"])
    given = set(value["$set"])
    return cls.model_construct(_fields_set=given, **{k: _rebuild(v, models) for k, v in fields.items()})


def _models(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The model classes reachable from ``root``'s fields: the only classes a cache file may name."""
    found: dict[str, type[BaseModel]] = {}
    todo: list[Any] = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            name = f"{item.__module__}:{item.__qualname__}"
            if name not in found:
                found[name] = item
                todo.extend(field.annotation for field in item.model_fields.values())
        else:
            todo.extend(get_args(item))
    return found


def _private(path: Path) -> bool:
    """The file is this user's and nobody else may write it (as the config files beside it should
    be): a file another user could have written is never trusted. Windows: not checked."""
    if not hasattr(os, "getuid"):
        return True
    st = os.stat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _prune(folder: Path) -> None:
    entries = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".json"):
            try:
                entries.append((entry.stat().st_mtime_ns, entry.path))
            except OSError:
                continue
    for _, path in sorted(entries)[: max(0, len(entries) - MAX_FILES)]:
        try:
            os.unlink(path)
        except OSError:
            continue
