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


# --- the catalogue (docs/reliability.md shows it) -------------------------------------------------

from mdrecall.sources.redact import CATALOGUE, catalogue_markdown, redact_markdown  # noqa: E402


@pytest.mark.parametrize("entry", CATALOGUE, ids=[f"{k.kind}-{i}" for i, k in enumerate(CATALOGUE)])
def test_catalogue_example_is_redacted_as_documented(entry) -> None:
    assert redact_secrets(entry.example) == entry.redacted
    assert f"[REDACTED:{entry.kind}]" in entry.redacted
    assert redact_secrets(entry.redacted) == entry.redacted  # idempotent


def test_every_catalogue_example_in_one_text_is_redacted_as_alone() -> None:
    """Rules that run where their literals are, looked up again after each replacement (a marker holds
    ":" and "_"): every example in one text, in either order, comes out as each does alone."""
    for entries in (CATALOGUE, tuple(reversed(CATALOGUE))):
        for joiner in ("\n", " ; "):
            text = joiner.join(entry.example for entry in entries)
            assert redact_secrets(text) == joiner.join(redact_secrets(entry.example) for entry in entries)


def test_no_marker_holds_a_literal_of_a_later_token_format() -> None:
    """What ``_token_rules`` relies on to look at the gates of a text once."""
    from mdrecall.sources.redact import _TOKEN_PATTERNS, MARKER

    for i, (kind, _, _) in enumerate(_TOKEN_PATTERNS):
        marker = MARKER.format(kind=kind)
        for later, literals, _ in _TOKEN_PATTERNS[i + 1 :]:
            assert not any(literal in marker for literal in literals), (kind, later)


def test_docs_show_the_catalogue() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert catalogue_markdown() in docs, "regenerate the table: python -c 'from mdrecall.sources.redact import catalogue_markdown; print(catalogue_markdown())'"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("visa 4111111111111111 on file", "4111111111111111"),
        ("mc 5555-5555-5555-4444", "5555-5555-5555-4444"),
        ("amex 3782 822463 10005", "3782 822463 10005"),
        ("discover 6011111111111117.", "6011111111111117"),
        ("jcb 3530111333300000", "3530111333300000"),
        ("slack https://hooks.slack.com/workflows/T01ABCDEF/A02BCDEFG/123456789012345678/abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
        ("discord https://discord.com/api/webhooks/1234567890123456789/AbCdEfGhIjKlMnOpQrStUvWxYz_0123456789-abcdefghij", "AbCdEfGhIjKlMnOpQrStUvWxYz"),
        ("teams https://contoso.webhook.office.com/webhookb2/1a2b3c4d-0000-1111-2222-333344445555@x/IncomingWebhook/abcdef0123456789abcdef0123456789/y", "abcdef0123456789abcdef0123456789"),
        ("generic https://ci.example.com/hooks/build/Zx81kPq0Lm29Rt47Vb56Yc13", "Zx81kPq0Lm29Rt47Vb56Yc13"),
        ("psql --password=Hunter22 -h db", "Hunter22"),
        ("run with --api-key \"sk_abc_123_def\"", "sk_abc_123_def"),
        ("docker login -u ci -p Dock3rPassw0rd registry.example.com", "Dock3rPassw0rd"),
        ("redis-cli -h cache -a R3disPass info", "R3disPass"),
        ("openssl enc -aes256 -pass pass:OpenS3same -in x", "OpenS3same"),
        ("curl -u admin:CurlPa55 https://api.example.com", "CurlPa55"),
        ("unzip -P Z1pSecret archive.zip", "Z1pSecret"),
        ("export HF_TOKEN=hf_zYxWvUtSrQpOnMlKjIhGfEdCbA987654", "hf_zYxWvUtSrQpOnMlKjIhGfEdCbA987654"),
        ("//registry.npmjs.org/:_authToken=npm_zYxWvUtSrQpOnMlKjIhGfEdCbA9876543210", "npm_zYxWvUtSrQpOnMlKjIhGfEdCbA9876543210"),
        ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=QmFzZTY0S2V5SGVyZQ==;", "QmFzZTY0S2V5SGVyZQ=="),
        ("signed https://bucket.s3.amazonaws.com/f?X-Amz-Signature=0123456789abcdef0123&X-Amz-Date=1", "0123456789abcdef0123"),
    ],
)
def test_new_kinds_are_redacted(text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out and "[REDACTED:" in out
    assert redact_secrets(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "order 1234567890123456 shipped",  # 16 digits, no card brand prefix... and no valid checksum
        "4111 1111 1111 1112 fails the checksum",
        "epoch 1733000000000 and 1733000000000123",
        "call +1 415 555 0100 or 0049 30 1234 5678",
        "ISBN 978-3-16-148410-0, invoice 2026-0001-4455",
        "account 4000 1234 5678 9010 is an example without a valid checksum",
        "coordinates 52.520008, 13.404954",
        "mkdir -p /tmp/x; ssh -p 22 host; docker run -p 8080:80 img",
        "the --password flag is required; use --token to pass it",
        "see https://github.com/org/webhooks/issues/12345",
        "https://docs.example.com/hooks/overview",
    ],
)
def test_numbers_flags_and_urls_that_are_not_secrets_survive(text: str) -> None:
    assert redact_secrets(text) == text


def test_markdown_redaction_keeps_every_line() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nAbCdEf0123456789\n-----END PRIVATE KEY-----"
    text = f"# Keys\n{pem}\n- card 4111 1111 1111 1111\n- after\n"
    out = redact_markdown(text)
    assert out.count("\n") == text.count("\n")
    lines = out.split("\n")
    assert lines[1] == "[REDACTED:private_key]" and lines[5] == "- card [REDACTED:card_number]" and lines[6] == "- after"
