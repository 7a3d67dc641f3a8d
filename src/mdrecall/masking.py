"""Secrets kept out of everything that shows configuration (``mdrecall config show``, its JSON, the
overrides it was given, config errors): by key, at any depth, plus passwords inside URLs and
connection strings. By key, not by word: ``query.fts.tokenizer`` and ``chunking.tokens`` are shown.
"""

from __future__ import annotations

import re
from typing import Any

#: Endings of the keys whose values are never printed (compared lower-case, without ``-`` or ``_``):
#: ``apiKey``, ``x-api-key``, ``authToken``, ``aws_secret_access_key``, ``password``, ``Authorization``.
#: By key, not by word: ``query.fts.tokenizer`` and ``chunking.tokens`` are shown.
SECRET_KEY_ENDINGS = ("apikey", "token", "password", "passwd", "secret", "secretkey", "accesskey", "privatekey",
                      "credentials", "authorization", "cookie")  # fmt: skip
#: ``scheme://user:password@host`` in any value (a DSN, a base URL).
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/\s:@]*:)(?P<secret>[^@\s/]+)(?=@)", re.IGNORECASE)
#: ``password=...`` in a libpq connection string.
_KV_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<secret>'[^']*'|\S+)", re.IGNORECASE)
#: A value that only names an environment variable (``${OPENAI_API_KEY}``): shown, it is not the secret.
_ENV_REFERENCE = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")
MASK = "***"


def is_secret_key(key: object) -> bool:
    normal = str(key).lower().replace("-", "").replace("_", "")
    return normal.endswith(SECRET_KEY_ENDINGS)


def _masked_text(text: str) -> str:
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _KV_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def masked(value: Any, key: object = None) -> Any:
    """``value`` with every secret replaced by ``***``: the values of secret keys (at any depth,
    header names included), and passwords inside URLs and connection strings."""
    if key is not None and is_secret_key(key) and value not in (None, "", {}, []):
        if isinstance(value, str) and _ENV_REFERENCE.match(value):
            return value
        return MASK if not isinstance(value, dict | list) else _mask_all(value)
    if isinstance(value, dict):
        return {k: masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    if isinstance(value, str):
        return _masked_text(value)
    return value


def _mask_all(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    return MASK if value not in (None, "") else value


def masked_override(item: str) -> str:
    """One ``-c KEY=VALUE`` as it may be shown: the value masked when the key (or a key inside a
    mapping value, or a URL password) is a secret."""
    import json

    import yaml

    key, sep, raw = item.partition("=")
    if not sep:
        return item
    last = key.strip().split(".")[-1]
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        return f"{key}={MASK}" if is_secret_key(last) else _masked_text(item)
    shown = masked(value, last)
    if shown == value:
        return item
    return f"{key}={shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)}"


__all__ = ["MASK", "SECRET_KEY_ENDINGS", "is_secret_key", "masked", "masked_override"]
