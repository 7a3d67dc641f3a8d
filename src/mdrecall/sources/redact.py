"""Secret redaction for text that is about to be stored or embedded (session transcripts).

Agents paste credentials into chats; the index must never keep them. Each finding is replaced by
``[REDACTED:<kind>]`` so a search result still shows that something was there. The patterns are
deliberately a little greedy: a false positive costs one word of a snippet, a miss leaks a key.
Redaction is idempotent (markers never match again).
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARKER = "[REDACTED:{kind}]"


def _marker(kind: str) -> str:
    return MARKER.format(kind=kind)


# Order matters: specific formats first, so a key inside ``api_key=...`` is labelled by its provider,
# and the generic assignment rule only sees what is left.
_TOKEN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{16,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9\-]{10,}")),
    ("slack_token", re.compile(r"\bxapp-\d-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    ("telegram_token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_\-]{30,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{6,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*")),
]

# A complete PEM private key block, or a truncated one (BEGIN line plus whatever base64 follows).
# Newlines may already have been collapsed to spaces, so whitespace is accepted anywhere inside.
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----.*?-----END \1PRIVATE KEY\2-----",
    re.DOTALL,
)
_PRIVATE_KEY_OPEN = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:\s*(?:Proc-Type:[^\n]*|DEK-Info:[^\n]*|[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]{1,15}={1,2}))*"
)

# scheme://user:password@host -> keep the user and the host, drop the password.
_URL_CREDENTIALS = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)([^\s:/@?#]*):([^\s/@?#]+)@")

# Authorization headers and bare bearer tokens.
_BEARER = re.compile(r"\b(Bearer|Basic|Token)(\s+)(?!\[REDACTED)([A-Za-z0-9._~+/=\-]{12,})", re.IGNORECASE)

# Key names that contain "token" or "key" but hold no secret (tokenizer settings, token counts).
_HARMLESS_KEYS = ("tokeniz", "tokens", "token_count", "tokencount", "keyword", "key_id", "keyid")

# key = value / key: value / "key": "value" where the key names a secret.
_SECRET_KEY_NAME = (
    r"[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|api[_\-]?key|apikey|access[_\-]?key"
    r"|private[_\-]?key|client[_\-]?secret|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token"
    r"|session[_\-]?token|token|credentials?)[A-Za-z0-9_.\-]*"
)
_ASSIGNMENT = re.compile(
    r"(?P<key>[\"']?\b" + _SECRET_KEY_NAME + r"[\"']?)"
    r"(?P<sep>\s*(?:=|:)\s*)"
    r"(?P<quote>[\"']?)"
    r"(?!\[REDACTED)"
    r"(?P<value>[^\s\"',;&]+)",
    re.IGNORECASE,
)


# Every key name _ASSIGNMENT accepts contains one of these (a cheap pre-check).
_ASSIGNMENT_HINT = re.compile(r"pass|pwd|secret|key|token|credential", re.IGNORECASE)


def _looks_secret(value: str, separator: str) -> bool:
    """Decide whether the value of ``password: value`` is worth hiding.

    ``=`` is code or config, so almost anything counts; ``:`` is often prose ("token: see below"),
    so a value must look like a credential (a digit or symbol, or long).
    """
    if value.isdigit() and len(value) < 8:
        return False  # max_tokens=1024, chunkTokens: 400
    if value.lower() in {"none", "null", "true", "false", "yes", "no", "env", "required", "optional"}:
        return False
    if "=" in separator:
        return len(value) >= 3
    if len(value) >= 8:
        return True
    return len(value) >= 4 and any(not ch.isalpha() for ch in value)


def _replace_assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    key = match.group("key").lower()
    if any(harmless in key for harmless in _HARMLESS_KEYS):
        return match.group(0)
    if not _looks_secret(value, match.group("sep")):
        return match.group(0)
    return f"{match.group('key')}{match.group('sep')}{match.group('quote')}{_marker('secret')}"


def _replace_bearer(match: re.Match[str]) -> str:
    value = match.group(3)
    # "token authentication" is prose; a credential has a digit or a symbol, or is very long.
    if len(value) < 24 and value.isalpha():
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{_marker('bearer')}"


def _sub(pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str], text: str) -> str:
    return pattern.sub(repl, text)


def redact_secrets(text: str) -> str:
    """Return ``text`` with credentials replaced by ``[REDACTED:<kind>]`` markers."""
    if not text:
        return text
    out = _sub(_PRIVATE_KEY_BLOCK, _marker("private_key"), text)
    out = _sub(_PRIVATE_KEY_OPEN, _marker("private_key") + " ", out)
    out = _sub(_URL_CREDENTIALS, lambda m: f"{m.group(1)}{m.group(2)}:{_marker('password')}@", out)
    for kind, pattern in _TOKEN_PATTERNS:
        out = _sub(pattern, _marker(kind), out)
    out = _sub(_BEARER, _replace_bearer, out)
    if _ASSIGNMENT_HINT.search(out):  # the assignment rule is the slow one; most text has no key name
        out = _sub(_ASSIGNMENT, _replace_assignment, out)
    return out
