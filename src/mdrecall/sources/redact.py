"""Secret redaction for text that is about to be stored, embedded or shown to an agent.

Agents paste credentials into chats and notes; the index must never keep them. Transcripts are
redacted while rendering; Markdown memory files as they are read for indexing, for ``memory_get``
and for recall tracking and promotion (``keep_lines=True``: line numbers stay those of the file, so
citations still point at the right lines). The files themselves are never changed.

Each finding is replaced by ``[REDACTED:<kind>]`` so a result still shows that something was there.
The patterns are deliberately a little greedy: a false positive costs one word of a snippet, a miss
leaks a key. Numbers are checked before they count as card numbers (a card brand's prefix and
length, and the Luhn checksum), so ids, phone numbers and timestamps survive. Redaction is
idempotent (markers never match again). :data:`CATALOGUE` lists every kind with an example; the
table in docs/reliability.md is generated from it (``catalogue_markdown()``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

MARKER = "[REDACTED:{kind}]"


def _marker(kind: str) -> str:
    return MARKER.format(kind=kind)


def _lazy(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A pattern compiled on its first use. Every rule but the card numbers' runs only on text that
    holds its trigger (a token format's prefix, a URL, "hook", "--", "bearer", a key name, a tool's
    name), which most text does not; compiled at import they cost every new process (a one-shot
    search redacts what it records) ~40 M instructions."""
    return functools.cache(lambda: re.compile(pattern, flags))


# Order matters: specific formats first, so a key inside ``api_key=...`` is labelled by its provider,
# and the generic assignment rule only sees what is left. Each format comes with the literal text
# every match contains: a pattern runs only when one is in the text (``in`` is a fast C scan; a regex
# starting with ``\b`` is tried at every position, which made redaction cost ~0.5 s per MB).
_TOKEN_PATTERNS: list[tuple[str, tuple[str, ...], Callable[[], re.Pattern[str]]]] = [
    ("anthropic_key", ("sk-ant-",), _lazy(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("stripe_key", ("_live_", "_test_"), _lazy(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    ("openai_key", ("sk-",), _lazy(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{16,}")),
    ("aws_access_key", ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
     _lazy(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")),
    ("github_token", ("github_pat_",), _lazy(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _lazy(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("slack_token", ("xox",), _lazy(r"\bxox[abposre]-[A-Za-z0-9\-]{10,}")),
    ("slack_token", ("xapp-",), _lazy(r"\bxapp-\d-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", ("AIza",), _lazy(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    ("telegram_token", (":AA",), _lazy(r"\b\d{8,10}:AA[A-Za-z0-9_\-]{30,}")),
    ("jwt", ("eyJ",), _lazy(r"\beyJ[A-Za-z0-9_\-]{6,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*")),
    ("huggingface_token", ("hf_", "api_org_"), _lazy(r"\b(?:hf|api_org)_[A-Za-z0-9]{30,}")),
    ("npm_token", ("npm_",), _lazy(r"\bnpm_[A-Za-z0-9]{30,}")),
    ("pypi_token", ("pypi-AgE",), _lazy(r"\bpypi-AgE[A-Za-z0-9_\-]{40,}")),
    ("gitlab_token", ("glpat-", "gloas-", "gldt-", "glrt-", "glptt-", "glft-"),
     _lazy(r"\bgl(?:pat|oas|dt|rt|ptt|ft)-[A-Za-z0-9_\-]{20,}")),
    ("sendgrid_key", ("SG.",), _lazy(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}")),
    ("google_oauth_token", ("ya29.",), _lazy(r"\bya29\.[A-Za-z0-9_\-]{20,}")),
    ("digitalocean_token", ("_v1_",), _lazy(r"\bdo[por]_v1_[a-f0-9]{64}\b")),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), _lazy(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    ("age_secret_key", ("AGE-SECRET-KEY-1",), _lazy(r"\bAGE-SECRET-KEY-1[0-9A-Z]{50,}")),
]

#: Characters from the rarest in prose: each literal above is gated by the first of them it holds.
_RARE_FIRST = "_:JzqxGK9-.A"


def _gates(literals: tuple[str, ...]) -> frozenset[str]:
    """One character of each literal (the rarest it holds): text without any of them holds none of
    the literals, which one scan per character tells for many literals at once (a third of redacting
    a transcript was looking for each literal in every message)."""
    return frozenset(next((ch for ch in _RARE_FIRST if ch in literal), literal[0]) for literal in literals)


_PATTERN_GATES = [_gates(literals) for _, literals, _ in _TOKEN_PATTERNS]
_TOKEN_GATES = tuple(sorted(frozenset().union(*_PATTERN_GATES)))
#: gate character -> the token patterns (indexes, in order) one of whose literals holds it
_PATTERNS_BY_GATE = {ch: tuple(i for i, gates in enumerate(_PATTERN_GATES) if ch in gates) for ch in _TOKEN_GATES}


def _token_rules(text: str) -> str:
    """The token formats, in order, each run where one of its literals is in the text; only the
    formats whose gate characters the text holds are looked at (none, for most messages). What a
    format puts in, its marker, holds no literal of a format after it (tests/test_redact.py), and a
    literal across a marker's edge would hold its "[" or "]", which none does: so the gates of the text
    as given stand for the text as each format finds it."""
    out = text
    for i in sorted({i for ch in _TOKEN_GATES if ch in text for i in _PATTERNS_BY_GATE[ch]}):
        kind, literals, pattern = _TOKEN_PATTERNS[i]
        if any(literal in out for literal in literals):
            out = pattern().sub(_marker(kind), out)
    return out


# Webhook URLs carry their secret in the path: keep the scheme and host (which service), drop the rest.
_WEBHOOK_URLS = _lazy(
    r"\b(https?://(?:hooks\.slack\.com|(?:ptb\.|canary\.)?discord(?:app)?\.com/api(?:/v\d+)?/webhooks"
    r"|[A-Za-z0-9.\-]*\.webhook\.office\.com|hooks\.zapier\.com|maker\.ifttt\.com/trigger))"
    r"(?!/\[REDACTED)(/[^\s\"'<>)\]]+)"
)


# Any other URL with "hook" in its host or path and a long token-like path segment.
_GENERIC_WEBHOOK = _lazy(
    r"\b(https?://[A-Za-z0-9.\-]+(?::\d+)?)(?!/\[REDACTED)"
    r"(/(?=[^\s\"'<>]*hook)(?=[^\s\"'<>]*/[A-Za-z0-9_\-]{20,})[^\s\"'<>)\]]+)"
    r"|\b(https?://[A-Za-z0-9.\-]*hook[A-Za-z0-9.\-]*(?::\d+)?)(?!/\[REDACTED)(/(?=[^\s\"'<>]*/?[A-Za-z0-9_\-]{20,})[^\s\"'<>)\]]+)",
    re.IGNORECASE,
)
# Signed URLs and tokens in query strings (?sig=…, &X-Amz-Signature=…, ?access_token=…).
_QUERY_SECRET = _lazy(
    r"([?&](?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential"
    r"|access_token|id_token|refresh_token|token|api_key|apikey|key|secret|client_secret|password|passwd|auth)=)"
    r"(?!\[REDACTED)([^\s&#\"'<>]{6,})",
    re.IGNORECASE,
)

# Credentials passed on a command line, as people paste them into notes and chats.
_FLAG_NAMES = (
    r"(?:[a-z0-9]+-)*(?:password|passwd|pass|pwd|passphrase|secret|token|api-key|apikey|access-key|secret-key"
    r"|auth-token|client-secret|private-key)"
)
# --password VALUE / --db-password 'VALUE' (the "=" form is an assignment, handled below).
_LONG_FLAG = _lazy(r"(?<![\w-])(--" + _FLAG_NAMES + r")([ \t]+)(?!-)(?!\[REDACTED)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)",
                  re.IGNORECASE)
# Tools whose short flags take a password: mysql -pVALUE (attached), sshpass/docker login -p VALUE,
# redis-cli -a VALUE, zip/unzip/7z -P VALUE, openssl -pass pass:VALUE.
_SHORT_FLAG = _lazy(
    r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n|;&]*?[ \t]-p)(?!\[REDACTED)([^\s'\"]+|'[^'\n]*'|\"[^\"\n]*\")"
    r"|(\b(?:sshpass|docker[ \t]+login|podman[ \t]+login|helm[ \t]+registry[ \t]+login)\b[^\n|;&]*?[ \t]-p[ \t]*)(?!-)(?!\[REDACTED)([^\s'\"]+|'[^'\n]*'|\"[^\"\n]*\")"
    r"|(\bredis-cli\b[^\n|;&]*?[ \t]-a[ \t]+)(?!\[REDACTED)([^\s'\"]+|'[^'\n]*'|\"[^\"\n]*\")"
    r"|(\b(?:zip|unzip|7z|7za)\b[^\n|;&]*?[ \t]-[pP][ \t]*)(?!-)(?!\[REDACTED)([^\s'\"]+|'[^'\n]*'|\"[^\"\n]*\")"
    r"|(\bopenssl\b[^\n|;&]*?[ \t]-pass(?:in|out)?[ \t]+pass:)(?!\[REDACTED)([^\s'\"]+)"
    r"|(\bcurl\b[^\n|;&]*?[ \t](?:-u|--user)[ \t]+['\"]?[^\s:'\"]+:)(?!\[REDACTED)([^\s'\"]+)"
)

# Card numbers: 13-19 digits, optionally in groups separated by single spaces or dashes.
# (Starting with a digit, not a lookbehind, lets the scan skip to digits; the character before a
# match is checked in _replace_card.)
_CARD_CANDIDATE = re.compile(r"\d(?:[ \-]?\d){12,18}(?![\d.,]\d|\d|-\d|/\d)")

# A complete PEM private key block, or a truncated one (BEGIN line plus whatever base64 follows).
# Newlines may already have been collapsed to spaces, so whitespace is accepted anywhere inside.
_PRIVATE_KEY_BLOCK = _lazy(
    # ((?: BLOCK)?), not ( BLOCK)?: a backreference to a group that did not take part never matches,
    # which made plain "PRIVATE KEY" (PKCS#8) blocks fall through to the open-ended rule below.
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----.*?-----END \1PRIVATE KEY\2-----",
    re.DOTALL,
)
_PRIVATE_KEY_OPEN = _lazy(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:\s*(?:Proc-Type:[^\n]*|DEK-Info:[^\n]*|[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]{1,15}={1,2}))*"
)

# scheme://user:password@host -> keep the user and the host, drop the password.
_URL_CREDENTIALS = _lazy(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)([^\s:/@?#]*):([^\s/@?#]+)@")

# Authorization headers and bare bearer tokens.
_BEARER = _lazy(r"\b(Bearer|Basic|Token)(\s+)(?!\[REDACTED)([A-Za-z0-9._~+/=\-]{12,})", re.IGNORECASE)

# Key names that contain "token" or "key" but hold no secret (tokenizer settings, token counts).
_HARMLESS_KEYS = ("tokeniz", "tokens", "token_count", "tokencount", "keyword", "key_id", "keyid")

# key = value / key: value / "key": "value" where the key names a secret.
_SECRET_KEY_NAME = (
    r"[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|api[_\-]?key|apikey|access[_\-]?key"
    r"|private[_\-]?key|account[_\-]?key|client[_\-]?secret|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token"
    r"|session[_\-]?token|token|credentials?)[A-Za-z0-9_.\-]*"
)
_ASSIGNMENT = _lazy(
    r"(?P<key>[\"']?\b" + _SECRET_KEY_NAME + r"[\"']?)"
    r"(?P<sep>\s*(?:=|:)\s*)"
    r"(?P<quote>[\"']?)"
    r"(?!\[REDACTED)"
    r"(?P<value>[^\s\"',;&]+)",
    re.IGNORECASE,
)



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


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_brand(digits: str) -> bool:
    """Whether ``digits`` has the prefix and length of a real card brand's numbers."""
    n = len(digits)
    two, four, six = int(digits[:2]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4":  # Visa
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 222100 <= six <= 272099:  # Mastercard
        return n == 16
    if two in (34, 37):  # American Express
        return n == 15
    if four == 6011 or two == 65 or 644 <= int(digits[:3]) <= 649 or 622126 <= six <= 622925:  # Discover
        return 16 <= n <= 19
    if 3528 <= four <= 3589:  # JCB
        return 16 <= n <= 19
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:  # Diners Club
        return 14 <= n <= 19
    if two == 62:  # UnionPay
        return 16 <= n <= 19
    if two in (50, 56, 57, 58, 63, 67) or digits[0] == "6":  # Maestro
        return 12 <= n <= 19
    return False


def _replace_card(match: re.Match[str]) -> str:
    text = match.group(0)
    before = match.string[match.start() - 1] if match.start() else ""
    if before and before in "0123456789.,-/:":
        return text  # the tail of a longer number, a decimal, a date or a time
    separators = {ch for ch in text if not ch.isdigit()}
    if len(separators) > 1:
        return text  # "1234 5678-..." mixes separators: a list of numbers, not one card
    digits = "".join(ch for ch in text if ch.isdigit())
    if separators:
        groups = re.split(r"[ \-]", text)
        # Printed cards group their digits in fours (Amex/Diners: 4-6-5 / 4-6-4); anything else with
        # separators is a list of numbers.
        if not (all(len(g) == 4 for g in groups[:-1]) and 1 <= len(groups[-1]) <= 4) and [len(g) for g in groups] not in ([4, 6, 5], [4, 6, 4]):
            return text
    if 13 <= len(digits) <= 19 and _card_brand(digits) and _luhn_ok(digits):
        return _marker("card_number")
    return text


def _replace_webhook(match: re.Match[str]) -> str:
    host = match.group(1) or match.group(3)
    return f"{host}/{_marker('webhook_url')}"


def _replace_long_flag(match: re.Match[str]) -> str:
    value = match.group(3)
    # "the --password flag is required" is prose: an unquoted value must look like a credential.
    if value[0] not in "'\"" and not _looks_secret(value, ":"):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{_marker('secret')}"


def _replace_flag_pairs(match: re.Match[str]) -> str:
    groups = match.groups()
    for i in range(0, len(groups), 2):
        if groups[i] is not None:
            return f"{groups[i]}{_marker('secret')}"
    return match.group(0)


def _sub(
    pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str], text: str, keep_lines: bool = False
) -> str:
    if not keep_lines:
        return pattern.sub(repl, text)

    def same_lines(match: re.Match[str]) -> str:
        out = repl(match) if callable(repl) else match.expand(repl)
        # A multi-line match (a PEM block) keeps its line breaks, so line numbers after it stay true.
        return out + "\n" * (match.group(0).count("\n") - out.count("\n"))

    return pattern.sub(same_lines, text)


def _on_lines(text: str, needles: tuple[str, ...], fn: Callable[[str], str], *, lowered: bool = False,
              with_next: bool = False) -> str:
    """``fn`` applied to the lines that contain one of ``needles`` (and, ``with_next``, the line after
    each: ``password:`` on one line, the value on the next); the rest of ``text`` is not scanned."""
    hay = text.lower() if lowered else text
    spans: list[tuple[int, int]] = []
    for needle in needles:
        at = hay.find(needle)
        while at != -1:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            if with_next and end != -1:
                end = text.find("\n", end + 1)
            end = len(text) if end == -1 else end
            spans.append((start, end))
            at = hay.find(needle, end)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_start, cur_end = spans[0]
    for start, end in spans[1:] + [(len(text) + 1, len(text) + 1)]:
        if start <= cur_end:
            cur_end = max(cur_end, end)
            continue
        out.append(text[pos:cur_start])
        out.append(fn(text[cur_start:cur_end]))
        pos = cur_end
        cur_start, cur_end = start, end
    out.append(text[pos:])
    return "".join(out)


def _url_rules(text: str) -> str:
    text = _WEBHOOK_URLS().sub(_replace_webhook, text)
    if "hook" in text.lower():
        text = _GENERIC_WEBHOOK().sub(_replace_webhook, text)
    if "@" in text:
        text = _URL_CREDENTIALS().sub(lambda m: f"{m.group(1)}{m.group(2)}:{_marker('password')}@", text)
    if "=" in text:
        text = _QUERY_SECRET().sub(lambda m: f"{m.group(1)}{_marker('secret')}", text)
    return text


_SHORT_FLAG_TOOLS = ("mysql", "mariadb", "sshpass", "login", "redis-cli", "zip", "7z", "openssl", "curl")
_ASSIGNMENT_WORDS = ("pass", "pwd", "secret", "key", "token", "credential")


def _assignments(text: str, keep_lines: bool) -> str:
    if "=" not in text and ":" not in text:
        return text
    return _sub(_ASSIGNMENT(), _replace_assignment, text, keep_lines)


def redact_secrets(text: str, *, keep_lines: bool = False) -> str:
    """Return ``text`` with credentials replaced by ``[REDACTED:<kind>]`` markers.

    ``keep_lines=True`` keeps every line break, so line ``n`` of the result is line ``n`` of the input
    (for Markdown files, whose chunks and citations are line numbers).
    """
    if not text:
        return text
    out = text
    if "PRIVATE KEY" in out:
        out = _sub(_PRIVATE_KEY_BLOCK(), _marker("private_key"), out, keep_lines)
        out = _sub(_PRIVATE_KEY_OPEN(), _marker("private_key") + " ", out, keep_lines)
    if "://" in out:
        out = _on_lines(out, ("://",), _url_rules)
    out = _token_rules(out)
    out = _on_lines(out, ("bearer", "basic", "token"), lambda t: _BEARER().sub(_replace_bearer, t), lowered=True)
    if "--" in out:
        out = _on_lines(out, ("--",), lambda t: _LONG_FLAG().sub(_replace_long_flag, t))
    out = _on_lines(out, _SHORT_FLAG_TOOLS, lambda t: _SHORT_FLAG().sub(_replace_flag_pairs, t))
    # The assignment rule is the slow one: only on lines naming a key (and the line after, for YAML)
    # that have a separator at all.
    out = _on_lines(out, _ASSIGNMENT_WORDS, lambda t: _assignments(t, keep_lines), lowered=True, with_next=True)
    out = _CARD_CANDIDATE.sub(_replace_card, out)
    return out


def redact_markdown(text: str) -> str:
    """Redaction for Markdown memory files: every line stays on its line (citations stay true)."""
    return redact_secrets(text, keep_lines=True)


# --- the catalogue -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    kind: str
    pattern: str  # in words, for the docs
    example: str  # text containing a (fake) secret
    redacted: str  # what redact_secrets makes of it


CATALOGUE: tuple[Kind, ...] = (
    Kind("openai_key", "`sk-…`, `sk-proj-…` (16+ characters)", "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "key [REDACTED:openai_key]"),
    Kind("anthropic_key", "`sk-ant-…`", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm", "[REDACTED:anthropic_key]"),
    Kind("aws_access_key", "`AKIA…`, `ASIA…` + 16", "id AKIAIOSFODNN7EXAMPLE", "id [REDACTED:aws_access_key]"),
    Kind("github_token", "`ghp_…`, `gho_…`, `github_pat_…`", "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12", "[REDACTED:github_token]"),
    Kind("gitlab_token", "`glpat-…`, `gldt-…`, `glrt-…`", "glpat-xYz12AbC34dEf56GhI78j", "[REDACTED:gitlab_token]"),
    Kind("slack_token", "`xoxb-…`, `xoxp-…`, `xapp-…`", "xoxb-123456789012-1234567890123-AbCdEfGh", "[REDACTED:slack_token]"),
    Kind("webhook_url", "Slack, Discord, Teams, Zapier, IFTTT webhook URLs; any URL with `hook` and a 20+ character path token (host kept)",
         "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
         "post to https://hooks.slack.com/[REDACTED:webhook_url]"),
    Kind("google_api_key", "`AIza…`", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "[REDACTED:google_api_key]"),
    Kind("google_oauth_token", "`ya29.…`", "ya29.a0AfH6SMBx3Q9zEXAMPLEtoken123", "[REDACTED:google_oauth_token]"),
    Kind("stripe_key", "`sk_live_…`, `rk_test_…`, `pk_live_…`", "sk_live_51H8xYzAbCdEfGhIjKl", "[REDACTED:stripe_key]"),
    Kind("telegram_token", "`123456789:AA…` bot tokens", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "[REDACTED:telegram_token]"),
    Kind("huggingface_token", "`hf_…`, `api_org_…` (30+)", "HF_TOKEN hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "HF_TOKEN [REDACTED:huggingface_token]"),
    Kind("npm_token", "`npm_…` (30+)", "//registry.npmjs.org/:_authToken npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
         "//registry.npmjs.org/:_authToken [REDACTED:npm_token]"),
    Kind("pypi_token", "`pypi-AgE…`", "pypi-AgEIcHlwaS5vcmcCJGE0ZjM1YTExLTk2YmEtNDUxNi1iYzU2", "[REDACTED:pypi_token]"),
    Kind("sendgrid_key", "`SG.….…`", "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", "[REDACTED:sendgrid_key]"),
    Kind("digitalocean_token", "`dop_v1_…` (64 hex)", "dop_v1_" + "a1" * 32, "[REDACTED:digitalocean_token]"),
    Kind("shopify_token", "`shpat_…` (32 hex)", "shpat_" + "0f" * 16, "[REDACTED:shopify_token]"),
    Kind("age_secret_key", "`AGE-SECRET-KEY-1…`", "AGE-SECRET-KEY-1" + "QYZ" * 20, "[REDACTED:age_secret_key]"),
    Kind("jwt", "`eyJ….eyJ….…`", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "[REDACTED:jwt]"),
    Kind("bearer", "`Bearer …`, `Basic …`, `Token …` (12+)", "Authorization: Bearer Zm9vYmFyYmF6cXV4MTIz", "Authorization: Bearer [REDACTED:bearer]"),
    Kind("password", "`scheme://user:PASSWORD@host` (user and host kept)", "postgres://app:s3cr3tPassw0rd@db:5432/app",
         "postgres://app:[REDACTED:password]@db:5432/app"),
    Kind("private_key", "`-----BEGIN … PRIVATE KEY-----` blocks, also truncated or newline-collapsed",
         "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
         "[REDACTED:private_key]"),
    Kind("secret", "`password=…`, `api_key: …`, `\"client_secret\": \"…\"`, `DB_PASSWORD: …`, `AccountKey=…`",
         "DB_PASSWORD=hunter2 and {\"api_key\": \"q8Zr!pL2\"}", "DB_PASSWORD=[REDACTED:secret] and {\"api_key\": \"[REDACTED:secret]\"}"),
    Kind("secret", "URL query secrets: `?sig=`, `X-Amz-Signature=`, `access_token=`, `key=` (6+)",
         "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig=AbCdEf0123456789",
         "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig=[REDACTED:secret]"),
    Kind("secret", "CLI flags: `--password VALUE`, `--db-token 'VALUE'`", "pg_dump --password 'tr0ub4dor&3' app",
         "pg_dump --password [REDACTED:secret] app"),
    Kind("secret", "CLI short flags of password-taking tools: `mysql -pVALUE`, `sshpass -p VALUE`, `docker login -p VALUE`, "
         "`redis-cli -a VALUE`, `zip -P VALUE`, `openssl -pass pass:VALUE`, `curl -u user:VALUE`",
         "mysql -u root -pS3cretPw app; sshpass -p hunter22 ssh db", "mysql -u root -p[REDACTED:secret] app; sshpass -p [REDACTED:secret] ssh db"),
    Kind("card_number", "13–19 digits (plain, or grouped by spaces/dashes) with a card brand's prefix and length and a valid Luhn checksum",
         "card 4111 1111 1111 1111, exp 12/29", "card [REDACTED:card_number], exp 12/29"),
)


def catalogue_markdown() -> str:
    """The catalogue as the Markdown table docs/reliability.md shows."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", "\\n")

    rows = ["| kind | what is found | example | becomes |", "|---|---|---|---|"]
    for k in CATALOGUE:
        rows.append(f"| `{k.kind}` | {cell(k.pattern)} | `{cell(k.example)}` | `{cell(k.redacted)}` |")
    return "\n".join(rows)
