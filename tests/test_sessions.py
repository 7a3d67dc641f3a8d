"""Session transcripts through the real sync: hostile input, redaction, session scoping."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from indexcheck import index_content
from mdrecall import open_manager

SECRETS = {
    "openai": "sk-proj-Q7vX2mPz9LkR4tWc8YbN1sDf",
    "anthropic": "sk-ant-api03-Zx9Wq2Lm7Np4Rt6Vb8Yc",
    "github": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-2048-4096-Q1w2E3r4T5y6U7i8",
    "bearer": "eyZ0cmVhbGx5LXNlY3JldC1iZWFyZXItdG9rZW4xMjM",
    "url_password": "hunter2-correct-horse",
    "db_password": "Pa55w0rd!Ocelot",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "pem_body": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
}


def _line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode("utf-8")


def _hostile_transcript() -> bytes:
    huge = " ".join(f"filler{i}" for i in range(15_000))  # ~260 KB in one message (twice below)
    lines = [
        _line({"role": "user", "content": f"Rotate the key {SECRETS['openai']} before the osprey launch."}),  # 1
        b'{"role": "user", "content": "this line was truncated mid-wr\n',  # 2: malformed
        b'{"role": "assistant", "content": "caf\xe9 \xff\xfe notes: the heron protocol is approved"}\n',  # 3: not UTF-8
        _line({"role": "user", "content": f"{huge} token={SECRETS['github']} {huge} the zanzibar clause"}),  # 4: huge
        _line({"type": "message", "message": {"role": "assistant", "content": [  # 5: tool call + text
            {"type": "tool_use", "name": "shell", "input": {"cmd": f"export ANTHROPIC_API_KEY={SECRETS['anthropic']}"}},
            {"type": "text", "text": "Ran the deploy; the marmot dashboard is green."},
        ]}}),
        _line({"role": "user", "content": (  # 6: a pile of credentials
            f"aws {SECRETS['aws']} slack {SECRETS['slack']} Authorization: Bearer {SECRETS['bearer']} "
            f"db postgres://admin:{SECRETS['url_password']}@db.internal:5432/app DB_PASSWORD={SECRETS['db_password']} "
            f"jwt {SECRETS['jwt']}\n-----BEGIN PRIVATE KEY-----\n{SECRETS['pem_body']}\nAbCdEf0123456789\n"
            "-----END PRIVATE KEY-----\nthe walrus vault"
        )}),
        b"\x00\x01\x02 binary garbage \xff\n",  # 7
        b"[1, 2, 3]\n",  # 8: JSON, not an object
        b"\n",  # 9: empty
        _line({"role": "tool", "content": "tool output mentions osprey too"}),  # 10: not user/assistant
        _line({"role": "assistant", "content": "Final answer: the osprey launch moved to Friday."}),  # 11
    ]
    return b"".join(lines)


def test_hostile_transcript_is_indexed_without_secrets(make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n- Nothing secret here.\n"})
    path = ws / ".openclaw/sessions/main/transcripts/2026-11-14.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(_hostile_transcript())
    rel = ".openclaw/sessions/main/transcripts/2026-11-14.jsonl"
    # Recall tracking (dreaming) is not under test here, and is slow on a 260 KB message.
    config = cfg(sources=["memory", "sessions"], dreaming={"enabled": False})
    with open_manager(ws, config) as m:
        report = m.sync()
        assert report.files_indexed == 2 and report.files_skipped == 0

        def hit(query: str) -> Any:
            results = [r for r in m.search(query, min_score=0, session_key="main").results if r.path == rel]
            assert results, f"no transcript hit for {query!r}"
            return results[0]

        # Line numbers are JSONL line numbers, also around skipped and garbage lines.
        heron = hit("heron protocol")
        assert heron.start_line <= 3 <= heron.end_line and "\ufffd" in heron.snippet
        zanzibar = hit("zanzibar clause")
        assert zanzibar.start_line <= 4 <= zanzibar.end_line
        marmot = hit("marmot dashboard")
        assert marmot.start_line <= 5 <= marmot.end_line
        walrus = hit("walrus vault")
        assert walrus.start_line <= 6 <= walrus.end_line and "[REDACTED:" in walrus.snippet
        osprey = hit("osprey launch Friday")
        assert osprey.end_line <= 11

        # No secret anywhere: not in results, not in stored text, not in the database files at all.
        for name, secret in SECRETS.items():
            for r in m.search(secret, min_score=0, session_key="main").results:
                assert secret not in r.snippet, name
        content = index_content(tmp_path / "index.sqlite")
        stored = json.dumps(content, default=str)
        raw = b"".join(p.read_bytes() for p in tmp_path.glob("index.sqlite*") if p.is_file())
        for name, secret in SECRETS.items():
            assert secret not in stored, f"{name} stored in the index"
            assert secret.encode() not in raw, f"{name} found in the database files"
        # The tool call and the tool role never made it in; the text block did.
        assert "tool output mentions" not in stored and "export ANTHROPIC_API_KEY" not in stored
        assert "marmot dashboard" in stored


def test_session_key_restricts_transcripts_but_not_memory(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n- The kestrel cluster runs in Frankfurt.\n"})
    for key, text in (("main", "The kestrel backup runs at noon."), ("ops", "Kestrel on-call is Priya this week.")):
        path = ws / f".openclaw/sessions/{key}/transcripts/s.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(_line({"role": "user", "content": text}))
    with open_manager(ws, cfg(sources=["memory", "sessions"], dreaming={"enabled": False})) as m:
        m.sync()

        def paths(**kwargs: Any) -> set[str]:
            return {r.path for r in m.search("kestrel", min_score=0, **kwargs).results}

        main = ".openclaw/sessions/main/transcripts/s.jsonl"
        ops = ".openclaw/sessions/ops/transcripts/s.jsonl"
        assert paths(session_key="main") == {"MEMORY.md", main}
        assert paths(session_key="ops") == {"MEMORY.md", ops}
        assert paths() == {"MEMORY.md"}  # no session: memory files only
        assert paths(session_key="main", sources=["sessions"]) == {main}
        assert paths(session_key="main", sources=["memory"]) == {"MEMORY.md"}


def test_overlapping_transcript_hits_are_merged(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    path = ws / ".openclaw/sessions/main/transcripts/s.jsonl"
    path.parent.mkdir(parents=True)
    messages = [f"Message {i} is about the weather in town number {i}." for i in range(40)]
    for i in (18, 19, 20, 21):
        messages[i] = f"Message {i}: the zebra crossing near the school needs new paint, zebra."
    path.write_bytes(b"".join(_line({"role": "user" if i % 2 else "assistant", "content": m}) for i, m in enumerate(messages)))
    config = cfg(sources=["memory", "sessions"], dreaming={"enabled": False}, chunking={"tokens": 48, "overlap": 24})
    with open_manager(ws, config) as m:
        hits = [r for r in m.search("zebra crossing paint", min_score=0, session_key="main").results]
        assert hits and all(r.source == "sessions" for r in hits)
        ranges = sorted((r.start_line, r.end_line) for r in hits)
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])), f"overlapping hits: {ranges}"
        # Each line is cited once: a hit overlapping a better one keeps only its other lines
        # (docs/retrieval.md), and together they cover the JSONL lines of messages 18..21.
        covered = {n for r in hits for n in range(r.start_line, r.end_line + 1)}
        assert set(range(19, 23)) <= covered
        lines = [line for r in hits for line in r.snippet.split("\n")]
        assert len(lines) == len(set(lines)) and sum("zebra" in line for line in lines) == 4


@pytest.mark.parametrize("provider", ["none", "counting"])
def test_own_transcripts_are_not_crowded_out_by_other_sessions(
    provider: str, make_ws: Callable[..., Path], cfg: Callable[..., dict], request: pytest.FixtureRequest
) -> None:
    """Session scoping filters inside retrieval: other sessions whose transcripts match a query
    better than this session's own must not push the own transcript out of the candidates (the
    filter used to run after the top 60 candidates were chosen)."""
    files: dict[str, str | bytes] = {"MEMORY.md": "# Memory\n- nothing about boats\n"}
    loud = "The fjord ferry fjord schedule: fjord ferry leaves at nine, fjord ferry returns at five."
    # Keyword search ranks 4 × 60 rows before filtering, then falls back to ranking every match: 300
    # sessions exercise that; the vector KNN masks rows before it picks, so 80 (faster to embed) do.
    for i in range(300 if provider == "none" else 80):
        files[f".openclaw/sessions/other{i:02d}/transcripts/t.jsonl"] = json.dumps({"role": "user", "content": f"{loud} ({i})"}) + "\n"
    files[".openclaw/sessions/mine/transcripts/t.jsonl"] = json.dumps(
        {"role": "user", "content": "Remember: I get seasick on the fjord crossing."}
    ) + "\n"
    ws = make_ws(files)
    if provider == "counting":
        request.getfixturevalue("counting_provider")  # real vectors: the in-memory KNN is scoped too
    with open_manager(ws, cfg(provider=provider, sources=["memory", "sessions"])) as m:
        m.sync()
        hits = m.search("fjord ferry", session_key="mine", min_score=0).results
        assert [h.path for h in hits if h.source == "sessions"] == [".openclaw/sessions/mine/transcripts/t.jsonl"]
        # Another private session with visibility "own" sees its own only; a group key sees none.
        assert {h.path for h in m.search("fjord ferry", session_key="other07", min_score=0).results if h.source == "sessions"} == {
            ".openclaw/sessions/other07/transcripts/t.jsonl"
        }
        assert [h for h in m.search("fjord ferry", session_key="agent:g:group:1", min_score=0).results if h.source == "sessions"] == []
        assert [h for h in m.search("fjord ferry", min_score=0).results if h.source == "sessions"] == []


def test_a_chunk_starting_mid_message_cites_the_message_that_matched(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """A long reply wraps over several rendered lines and chunks; the chunk that also holds the
    next, short user message starts inside the reply. Which message each of its lines came from is
    stored at index time, so the citation is the user's statement alone, not the reply with it."""
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    path = ws / ".openclaw/sessions/main/transcripts/s.jsonl"
    path.parent.mkdir(parents=True)
    reply = " ".join(f"Step {i} of the gardening plan covers soil, light and water for the beds." for i in range(60))
    messages = [
        ("user", "Can you give me a long gardening plan?"),  # 1
        ("assistant", reply),  # 2: ~4,500 characters, wrapped and split
        ("user", "Thanks. By the way, my greenhouse is 12 square metres and faces south."),  # 3
        ("assistant", "Good to know."),  # 4
    ]
    path.write_bytes(b"".join(_line({"role": r, "content": c}) for r, c in messages))
    config = cfg(sources=["memory", "sessions"], dreaming={"enabled": False})
    with open_manager(ws, config) as m:
        hits = m.search("how big is my greenhouse garden plan", min_score=0, session_key="main").results
        top = [r for r in hits if r.start_line <= 3 <= r.end_line]
        assert top, [(r.start_line, r.end_line) for r in hits]
        assert (top[0].start_line, top[0].end_line) == (3, 3), "the user's statement is cited alone"
        assert "greenhouse is 12 square metres" in top[0].snippet and "Step 59" not in top[0].snippet


def _chunk_rows(db: Path) -> list[tuple[Any, ...]]:
    import apsw

    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return sorted(con.execute("SELECT id, path, start_line, end_line, text, line_numbers FROM chunks").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("provider", ["none", "local"])
def test_a_growing_transcript_is_indexed_as_a_rebuild_indexes_it(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], provider: str
) -> None:
    """Each sync renders and chunks only what was appended since the last (a line written in two
    parts, a long message wrapped over lines and split to fit the model included); the rows are
    those a fresh index of the same file has, line numbers and all."""
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    transcript = ws / ".openclaw/sessions/main/transcripts/s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(b"")
    options = {"sources": ["memory", "sessions"], "provider": provider, "chunking": {"tokens": 80, "overlap": 20}}
    words = ["kestrel", "deploy", "Oslo", "rollback", "canary", "heron"]
    with open_manager(ws, cfg(**options)) as m:
        m.sync()
        for step in range(12):
            with transcript.open("ab") as handle:
                for i in range(4):
                    n = step * 10 + i
                    size = 600 if n % 7 == 3 else 8 + n % 13  # now and then a message wrapped over lines
                    handle.write(_line({"role": "user" if n % 2 else "assistant",
                                        "content": " ".join(words[(n + k) % 6] + str(k % 5) for k in range(size))}))  # fmt: skip
                if step % 3 == 1:
                    handle.write(b'{"role": "user", "content": "written in two')  # finished next step
                elif step % 3 == 2:
                    handle.write(b' parts"}\n')
            assert m.sync().files_indexed == 1
        kept = m._syncer.chunker._kept  # the chunks were resumed, not packed whole each time
        assert any(key.endswith("s.jsonl") for key in kept)
    with open_manager(ws, cfg(db="rebuilt.sqlite", **options)) as m:
        m.sync()
    incremental, rebuilt = _chunk_rows(ws.parent / "index.sqlite"), _chunk_rows(ws.parent / "rebuilt.sqlite")
    assert len(incremental) > 40
    assert incremental == rebuilt
    assert index_content(ws.parent / "index.sqlite") == index_content(ws.parent / "rebuilt.sqlite")  # the keyword index too


def test_a_transcript_no_longer_indexed_leaves_nothing_kept_in_memory(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """A removed (or forgotten) transcript's rendering and chunks, kept to resume its next re-index,
    are dropped with its rows."""
    ws = make_ws({"MEMORY.md": "# Memory\n"})
    transcript = ws / ".openclaw/sessions/main/transcripts/s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(b"".join(_line({"role": "user", "content": f"the vault code is Kq{i}"}) for i in range(30)))
    with open_manager(ws, cfg(sources=["memory", "sessions"])) as m:
        m.sync()
        (source,) = m.extra_sources
        renderer, chunker = source.renderer, m._syncer.chunker  # type: ignore[attr-defined]
        key = ".openclaw/sessions/main/transcripts/s.jsonl"
        assert key in renderer._kept and key in chunker._kept
        transcript.unlink()
        assert m.sync().files_removed == 1
        assert key not in renderer._kept and key not in chunker._kept
