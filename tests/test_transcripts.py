"""Session transcript rendering: real JSONL bytes in, User/Assistant lines and JSONL line numbers out."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

from mdrecall.sources.transcripts import (
    WRAP_CHARS,
    list_transcripts,
    render_transcript,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"


def _oc(role: str, content: object, ts: object = "2026-11-14T10:00:00Z") -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content, "timestamp": ts}})


def _jsonl(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_openclaw_and_flat_records_with_line_map() -> None:
    raw = _jsonl(
        json.dumps({"type": "session", "id": "s1"}),  # 1: header, not a message
        _oc("user", "Where do we deploy?"),  # 2
        _oc("assistant", [{"type": "text", "text": "On Fly.io,"}, {"type": "text", "text": "region mad."}]),  # 3
        json.dumps({"role": "user", "content": "flat format works too", "timestamp": 1763114400}),  # 4
        json.dumps({"role": "assistant", "content": [{"type": "text", "text": "Yes."}]}),  # 5
    )
    r = render_transcript(raw)
    assert r.text.split("\n") == [
        "User: Where do we deploy?",
        "Assistant: On Fly.io, region mad.",
        "User: flat format works too",
        "Assistant: Yes.",
    ]
    assert r.line_map == [2, 3, 4, 5]
    assert r.message_count == 4
    # Seconds are promoted to milliseconds; ISO strings parsed; missing -> None.
    assert r.timestamps[2] == 1763114400 * 1000
    assert r.timestamps[0] == int(datetime(2026, 11, 14, 10, tzinfo=UTC).timestamp() * 1000)
    assert r.timestamps[3] is None


def test_tool_calls_results_and_system_traffic_are_skipped() -> None:
    raw = _jsonl(
        _oc("assistant", [{"type": "tool_use", "id": "t1", "name": "memory_search", "input": {"query": "x"}}]),  # 1
        _oc("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "TOOL OUTPUT"}]),  # 2
        json.dumps({"type": "message", "message": {"role": "toolResult", "content": "TOOL OUTPUT"}}),  # 3
        _oc("system", "You are a helpful agent"),  # 4
        _oc("user", "System: [2026-11-14 10:05:00] Exec completed (code 0)"),  # 5
        _oc("user", "[cron:daily-summary] run the summary"),  # 6
        _oc("user", "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly."),  # 7
        _oc("assistant", "HEARTBEAT_OK"),  # 8
        _oc("assistant", "NO_REPLY"),  # 9
        _oc("user", "   \n  "),  # 10
        _oc("assistant", [{"type": "image", "source": "..."}]),  # 11
        _oc("user", "the only real message"),  # 12
    )
    r = render_transcript(raw)
    assert r.text == "User: the only real message"
    assert r.line_map == [12]
    assert "TOOL OUTPUT" not in r.text


def test_inbound_metadata_envelope_is_stripped() -> None:
    text = (
        "Conversation info (untrusted metadata):\n```json\n{\"channel\": \"telegram\", \"chat_id\": 42}\n```\n"
        "Sender info (untrusted metadata):\n```json\n{\"name\": \"Mira\"}\n```\n"
        "What did we decide about Safari?"
    )
    r = render_transcript(_jsonl(_oc("user", text)))
    assert r.text == "User: What did we decide about Safari?"


def test_channel_envelopes_as_gateways_write_them_are_stripped() -> None:
    """The shape OpenClaw's chat channels put on user messages (Telegram, Discord, webchat)."""
    telegram = (
        "Conversation info (untrusted metadata):\n```json\n{\n  \"message_id\": \"87\",\n  \"sender_id\": \"8726379476\",\n"
        "  \"sender\": \"Xiao\",\n  \"timestamp\": \"Wed 2026-04-01 10:19 GMT+8\"\n}\n```\n\n"
        "Sender (untrusted metadata):\n```json\n{\n  \"label\": \"Xiao (8726379476)\",\n  \"id\": \"8726379476\",\n"
        "  \"name\": \"Xiao\",\n  \"username\": \"xiao_w\"\n}\n```\n\nWhere is the kestrel runbook?"
    )
    webchat = "Sender (untrusted metadata):\n```json\n{\n  \"label\": \"openclaw-control-ui\",\n  \"id\": \"cli\"\n}\n```\n\n[Wed 2026-04-15 15:56 GMT+1] does the skill exist ?"
    replied = ("[Sat 2026-07-04 17:45 GMT+8] Replied message (untrusted, for context):\n\n```json\n{\"body\": \"old text\", \"sender\": \"Dana 555\"}\n```\n"
               "Forwarded message context (untrusted metadata):\n```json\n{\"from\": \"Lee 777\"}\n```\nAnd this?")
    kept = "Sender (untrusted metadata): is what the gateway writes, but here it is prose."
    r = render_transcript(_jsonl(_oc("user", telegram), _oc("user", webchat), _oc("user", replied), _oc("user", kept),
                                 _oc("assistant", "Sender (untrusted metadata):\n```json\n{}\n```\nassistant text stays")))
    assert r.text.split("\n") == [
        "User: Where is the kestrel runbook?",
        "User: [Wed 2026-04-15 15:56 GMT+1] does the skill exist ?",
        "User: And this?",
        f"User: {kept}",
        "Assistant: Sender (untrusted metadata): ```json {} ``` assistant text stays",  # only user messages carry envelopes
    ]
    for leaked in ("8726379476", "Xiao", "xiao_w", "openclaw-control-ui", "Dana 555", "Lee 777"):
        assert leaked not in r.text
    assert r.line_map == [1, 2, 3, 4, 5]


def test_lines_split_only_at_newline_so_citations_stay_aligned() -> None:
    """U+2028, U+2029 and U+0085 are legal unescaped inside JSON strings (JavaScript's JSON writer
    leaves them): they are not line breaks of the JSONL file."""
    raw = (
        json.dumps({"role": "user", "content": "before the separators"}) + "\n"
        + '{"role": "user", "content": "line\u2028separator and\u2029paragraph and\u0085next line"}\n'
        + json.dumps({"role": "assistant", "content": "the okapi answer"}) + "\n"
        + json.dumps({"role": "user", "content": "and one more\u2028with a separator"}, ensure_ascii=False) + "\n"
        + json.dumps({"role": "assistant", "content": "the last word"}) + "\n"
    ).encode("utf-8")
    assert len(raw.decode("utf-8").splitlines()) > 5  # what str.splitlines() would have made of it
    r = render_transcript(raw)
    assert r.skipped_lines == 0 and r.message_count == 5
    assert r.line_map == [1, 2, 3, 4, 5]
    lines = r.text.split("\n")
    assert lines[1].startswith("User: line") and "paragraph" in lines[1] and "next line" in lines[1]
    assert lines[2] == "Assistant: the okapi answer" and lines[4] == "Assistant: the last word"


def test_malformed_lines_are_skipped_and_counted() -> None:
    raw = b"\n".join(
        [
            _oc("user", "first").encode(),  # 1
            b'{"type": "message", "message": {"role": "user", "content": "trunc',  # 2: cut mid-write
            b"not json at all",  # 3
            b"[1, 2, 3]",  # 4: JSON but not an object
            b"",  # 5
            b'{"type": "message", "message": "not a dict"}',  # 6
            b'{"type": "message", "message": {"role": "user", "content": 42}}',  # 7
            b"{" * 5000 + b"}" * 5000,  # 8: deep nesting
            _oc("assistant", "last").encode(),  # 9
        ]
    )
    r = render_transcript(raw)
    assert r.text.split("\n") == ["User: first", "Assistant: last"]
    assert r.line_map == [1, 9]
    assert r.skipped_lines >= 3


def test_non_utf8_bytes_do_not_crash() -> None:
    good = _oc("user", "café in Lisbon").encode("utf-8")
    latin1 = _oc("assistant", "café").encode("latin-1")  # invalid UTF-8 inside a JSON string
    raw = good + b"\n" + latin1 + b"\n\xff\xfe\x00garbage\n" + _oc("user", "北京 咖啡 猫").encode("utf-8")
    r = render_transcript(raw)
    lines = r.text.split("\n")
    assert lines[0] == "User: café in Lisbon"
    assert lines[1].startswith("Assistant: caf")
    assert lines[-1] == "User: 北京 咖啡 猫"
    assert r.line_map == [1, 2, 4]


def test_huge_message_wraps_on_spaces_with_prefix() -> None:
    words = " ".join(f"word{i}" for i in range(60_000))  # ~470 KB
    raw = _jsonl(_oc("user", "short"), _oc("assistant", words))
    r = render_transcript(raw)
    lines = r.text.split("\n")
    assert lines[0] == "User: short"
    body = lines[1:]
    assert len(body) > 500
    assert all(line.startswith("Assistant: ") for line in body)
    assert all(len(line) - len("Assistant: ") <= WRAP_CHARS for line in body)
    # Wrapping only moves spaces: nothing is lost or split inside a word.
    assert " ".join(line[len("Assistant: ") :] for line in body) == words
    assert r.line_map == [1] + [2] * len(body)
    assert r.message_count == 2
    # Rendered range -> JSONL range.
    assert r.jsonl_lines(1, 3) == (1, 2)


def test_unbreakable_text_is_hard_cut() -> None:
    blob = "x" * (WRAP_CHARS * 2 + 5)
    r = render_transcript(_jsonl(_oc("user", blob)))
    segments = [line[len("User: ") :] for line in r.text.split("\n")]
    assert [len(s) for s in segments] == [WRAP_CHARS, WRAP_CHARS, 5]


def test_planted_secrets_never_rendered() -> None:
    secrets = [
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12",
        "s3cr3tPassw0rd",
        "MIIEowIBAAKCAQEA7bq98sD2mY4bQ0yZQx1c2VjcmV0",
    ]
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98sD2mY4bQ0yZQx1c2VjcmV0\n-----END PRIVATE KEY-----"
    raw = _jsonl(
        _oc("user", f"here is my key {secrets[0]} and {secrets[1]}"),
        _oc("assistant", [{"type": "text", "text": f"Don't paste {secrets[2]} or {secrets[3]} in chat."}]),
        _oc("user", f"db is postgres://app:{secrets[4]}@db:5432/x and\n{pem}"),
    )
    r = render_transcript(raw)
    for secret in secrets:
        assert secret not in r.text
    assert r.text.count("[REDACTED:") >= 6
    # A secret longer than the wrap width is still caught (redaction runs before wrapping).
    long_text = "a " * 399 + secrets[0]
    assert secrets[0] not in render_transcript(_jsonl(_oc("user", long_text))).text


def test_dreaming_transcripts_are_dropped_entirely() -> None:
    raw = _jsonl(
        json.dumps({"type": "session", "runId": "dreaming-narrative-2026-11-14"}),
        _oc("user", "narrate the day"),
        _oc("assistant", "Today Mira..."),
    )
    r = render_transcript(raw)
    assert r.text == "" and r.line_map == [] and r.message_count == 0


def test_hash_changes_with_content_and_is_stable() -> None:
    a = render_transcript(_jsonl(_oc("user", "one")))
    b = render_transcript(_jsonl(_oc("user", "one")))
    c = render_transcript(_jsonl(_oc("user", "one"), _oc("assistant", "two")))
    assert a.hash == b.hash != c.hash


def test_list_transcripts(tmp_path: Path) -> None:
    root = tmp_path / ".openclaw" / "sessions"
    for key, name in [("main", "a.jsonl"), ("main", "b.jsonl"), ("telegram-42", "x.jsonl")]:
        (root / key / "transcripts").mkdir(parents=True, exist_ok=True)
        (root / key / "transcripts" / name).write_text(_oc("user", "hi") + "\n")
    ignored = root / "main" / "transcripts"
    for name in ["a.jsonl.reset.2026-11-14T10-00-00Z", "c.checkpoint.1.jsonl", "notes.md", "sessions.json"]:
        (ignored / name).write_text("{}")
    (root / "main" / "stray.jsonl").write_text("{}")  # not under transcripts/
    outside = tmp_path / "outside.jsonl"
    outside.write_text(_oc("user", "secret elsewhere") + "\n")
    (ignored / "link.jsonl").symlink_to(outside)

    found = list_transcripts(tmp_path)
    assert [(k, p.name) for k, p in found] == [("main", "a.jsonl"), ("main", "b.jsonl"), ("telegram-42", "x.jsonl")]
    assert list_transcripts(tmp_path / "missing") == []
    # An absolute sessions dir works too.
    assert len(list_transcripts(tmp_path / "elsewhere", root)) == 3


def test_example_workspace_transcript() -> None:
    found = list_transcripts(EXAMPLE)
    assert [k for k, _ in found] == ["main"]
    r = render_transcript(found[0][1].read_bytes())
    assert r.message_count >= 6
    assert "memory_search" not in r.text  # tool call
    assert "Heartbeat check" not in r.text  # system wrapper
    assert "饼干" in r.text
    raw_lines = found[0][1].read_text(encoding="utf-8").splitlines()
    for rendered, lineno in zip(r.text.split("\n"), r.line_map):
        role, _, text = rendered.partition(": ")
        assert json.loads(raw_lines[lineno - 1])["message"]["role"] == role.lower()


def test_secrets_never_reach_the_index_or_results(tmp_path: Path) -> None:
    """End to end: planted secrets in a transcript are absent from search results and the database files."""
    from mdrecall import open_manager

    secrets = [
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12",
        "AKIAIOSFODNN7EXAMPLE",
        "s3cr3tPassw0rd",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ]
    ws = tmp_path / "ws"
    transcripts = ws / ".openclaw" / "sessions" / "main" / "transcripts"
    transcripts.mkdir(parents=True)
    (ws / "memory").mkdir()
    (ws / "memory" / "notes.md").write_text("# Notes\nnothing secret here\n", encoding="utf-8")
    raw = _jsonl(
        _oc("user", f"deploy key for the flamingo project is {secrets[0]}"),
        _oc("assistant", f"Stored. The flamingo CI uses {secrets[1]} and AWS id {secrets[2]}."),
        "garbage line {{{",
        _oc("user", f"flamingo db: postgres://app:{secrets[3]}@db:5432/x slack {secrets[4]}"),
    ) + b"\xff\xfe broken bytes\n"
    (transcripts / "s.jsonl").write_bytes(raw)
    db_path = tmp_path / "index" / "index.sqlite"
    config = {"provider": "none", "sources": ["memory", "sessions"], "store": {"path": str(db_path)}}
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
        resp = m.search("flamingo", session_key="main", min_score=0.0)
        hits = list(resp)
        assert hits, "the transcript is indexed and searchable"
        assert all(h.path.endswith("s.jsonl") for h in hits)
        assert {h.start_line for h in hits} <= {1, 2, 4}  # JSONL line numbers, not rendered lines
        for secret in secrets:
            assert not list(m.search(secret, session_key="main", min_score=0.0))
            for h in hits:
                assert secret not in h.snippet
    blobs = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
    for secret in secrets:
        assert secret.encode() not in blobs


def _random_record(rng: random.Random, i: int) -> str:
    kind = rng.random()
    if kind < 0.06:
        return "{not json"  # a malformed line, counted
    if kind < 0.09:
        return ""
    if kind < 0.12:  # a host record of a type nobody knows, counted per type
        return json.dumps({"sessionId": "s", "userType": "external", "cwd": "/w", "uuid": f"u{i}", "type": "hologram-sync",
                           "timestamp": "2025-07-01T10:01:30.000Z"})  # fmt: skip
    if kind < 0.15:
        return json.dumps({"type": "tool_result", "content": "ignored"})
    role = rng.choice(["user", "assistant"])
    words = rng.choice([3, 12, 160])  # 160 words: wrapped over two lines or more
    text = " ".join(rng.choice(["kestrel", "deploy", "Oslo", "line\u2028sep", "ghp_" + "a1" * 18, "北京"]) for _ in range(words))
    if rng.random() < 0.5:
        return _oc(role, text, rng.choice(["2026-11-14T10:00:00Z", 1763114400, None]))
    return json.dumps({"role": role, "content": [{"type": "text", "text": text}]})


def _fields(r) -> tuple:  # type: ignore[no-untyped-def]
    return (r.text, r.line_map, r.message_count, r.timestamps, r.skipped_lines, r.unknown_records, r.hash)


def test_rendering_only_the_appended_lines_gives_the_whole_rendering() -> None:
    """A transcript rendered again after appends (a last line written in two parts included),
    rewrites, truncations and a dreaming record renders exactly as rendering it whole."""
    from mdrecall.sources.transcripts import TranscriptRenderer

    rng = random.Random(5)
    renderer = TranscriptRenderer()
    for trial in range(6):
        text = ""
        for step in range(30):
            action = rng.random()
            if action < 0.6:
                text += "".join(_random_record(rng, step) + "\n" for _ in range(rng.randint(1, 5)))
            elif action < 0.75:  # a line written in two parts: rendered while unfinished, then finished
                line = _random_record(rng, step) + "\n"
                cut = rng.randrange(len(line))
                text += line[:cut]
                assert _fields(renderer.render(f"t{trial}", text)) == _fields(render_transcript(text))
                text += line[cut:]
            elif action < 0.85:  # rewritten earlier (a host compacting its log)
                lines = text.split("\n")
                lines[rng.randrange(len(lines))] = _random_record(rng, step)
                text = "\n".join(lines)
            elif action < 0.95:  # truncated
                text = text[: rng.randrange(len(text) + 1)]
            elif trial == 5:  # a dreaming run's record: the whole transcript renders empty, whatever follows
                text += json.dumps({"type": "session", "runId": "dreaming-narrative-2026-11-14"}) + "\n"
            assert _fields(renderer.render(f"t{trial}", text)) == _fields(render_transcript(text)), (trial, step)
    assert render_transcript(text).text == ""  # the dreaming transcript


def test_the_renderer_keeps_a_bounded_number_of_files() -> None:
    from mdrecall.sources.transcripts import TranscriptRenderer

    renderer = TranscriptRenderer(max_files=3, max_chars=400)
    for key in "abcd":
        renderer.render(key, _jsonl(_oc("user", f"hello from {key}")).decode())
    assert list(renderer._kept) == ["b", "c", "d"]
    renderer.render("e", _jsonl(_oc("user", "x" * 400)).decode())  # longer than max_chars: not kept
    assert "e" not in renderer._kept
    renderer.render("f", _jsonl(_oc("user", "y" * 250)).decode())  # kept, the oldest dropped to fit
    assert list(renderer._kept) == ["f"]
