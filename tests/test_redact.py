"""Secret redaction: every planted credential disappears, ordinary prose survives."""

from __future__ import annotations

import pytest

from mdrecall.sources.redact import redact_secrets

# (secret that must vanish, text it is planted in, expected marker kind)
PLANTED = [
    ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "my key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z ok", "openai_key"),
    ("sk-9fJ2kQ7xLm4nPq8rSt3vWy6zAb1cDe5f", "OPENAI key sk-9fJ2kQ7xLm4nPq8rSt3vWy6zAb1cDe5f.", "openai_key"),
    ("sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", "use sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe please", "anthropic_key"),
    ("AKIAIOSFODNN7EXAMPLE", "aws id AKIAIOSFODNN7EXAMPLE in the config", "aws_access_key"),
    ("ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12", "token ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12 for CI", "github_token"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "fine-grained: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "github_token",
    ),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token"),
    ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY here", "google_api_key"),
    ("sk_live_51H8xYzAbCdEfGhIjKlMnOpQr", "stripe sk_live_51H8xYzAbCdEfGhIjKlMnOpQr", "stripe_key"),
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
        "jwt",
    ),
    ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "Authorization: Bearer Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "bearer"),
    ("s3cr3tPassw0rd", "postgres://pebble:s3cr3tPassw0rd@db.internal:5432/pebble", "password"),
    ("hunter2", "password=hunter2", "secret"),
    ("correct-horse-battery", "DB_PASSWORD: correct-horse-battery", "secret"),
    ("q8Zr!pL2", '{"api_key": "q8Zr!pL2"}', "secret"),
    ("a1b2c3d4e5f6", "client_secret = 'a1b2c3d4e5f6'", "secret"),
]


@pytest.mark.parametrize(("secret", "text", "kind"), PLANTED)
def test_planted_secret_is_removed(secret: str, text: str, kind: str) -> None:
    out = redact_secrets(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


def test_private_key_block_multiline_and_collapsed() -> None:
    body = "MIIEowIBAAKCAQEA7bq98sD2mY4bQ0yZQx1c2VjcmV0a2V5bWF0ZXJpYWwxMjM0NTY3\nOD" + "kwYWJjZGVm" * 6
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    for text in (f"here it is:\n{pem}\nthanks", f"here it is: {pem.replace(chr(10), ' ')} thanks"):
        out = redact_secrets(text)
        assert "MIIEowIBAAKCAQEA" not in out
        assert "kwYWJjZGVm" not in out
        assert "[REDACTED:private_key]" in out
        assert out.endswith("thanks")


def test_truncated_private_key_is_removed() -> None:
    text = "oops -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQ=="
    out = redact_secrets(text)
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA" not in out
    assert "QyNTUxOQ==" not in out
    assert "[REDACTED:private_key]" in out


def test_url_keeps_user_and_host() -> None:
    out = redact_secrets("redis://default:Xy7pQ2mN9vB4@fly-pebble.upstash.io:6379")
    assert out == "redis://default:[REDACTED:password]@fly-pebble.upstash.io:6379"


def test_all_secrets_in_one_blob() -> None:
    blob = "\n".join(text for _, text, _ in PLANTED)
    out = redact_secrets(blob)
    for secret, _, _ in PLANTED:
        assert secret not in out


def test_idempotent() -> None:
    blob = "\n".join(text for _, text, _ in PLANTED)
    once = redact_secrets(blob)
    assert redact_secrets(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "We chose the tokenizer: unicode61 for CJK.",
        "chunkTokens: 400 and max_tokens=1024",
        "The password policy is documented in the wiki.",
        "Token authentication is handled by the gateway.",
        "See https://docs.example.com/path?x=1 for details.",
        "Decision: use Postgres full-text search, revisit above 100k recipes.",
        "王磊在北京工作，喜欢绿茶。",
        "email mira@example.com about the release",
        "keyword search and ssh git@github.com:pebble/pebble.git",
    ],
)
def test_prose_is_untouched(text: str) -> None:
    assert redact_secrets(text) == text
