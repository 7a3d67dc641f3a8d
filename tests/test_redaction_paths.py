"""Secrets in a Markdown note never reach anything mdrecall stores or shows.

A daily note and a transcript carry planted credentials of the kinds the campaign found leaking
(card number, Slack webhook, ``--password VALUE``, ``mysql -pVALUE``, ``hf_…``, ``npm_…``). The note's
facts are searched on three days, so recall tracking records them and promotion stages and writes
them. Then every place a secret could land is read back as bytes: the index file and its WAL, search
snippets, ``memory_get``, the recall store, the review queue, MEMORY.md and promotion's output.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mdrecall import open_manager
from mdrecall.agent.tools import MemoryTools
from mdrecall.dreaming import apply, stage
from mdrecall.dreaming.paths import queue_path, store_path

SECRETS = {
    "webhook": "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/abcdefghijklmnopqrstuvwx",
    "card": "4111 1111 1111 1111",
    "cli_password": "Pg!secret99",
    "mysql": "MyS3cretPw",
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "npm": "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
}
# What must not appear anywhere: the secret parts (a webhook's host may stay).
NEEDLES = [
    "abcdefghijklmnopqrstuvwx", "4111 1111 1111 1111", "4111111111111111", "Pg!secret99", "MyS3cretPw",
    "AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
]

NOTE = f"""# 2026-03-02

## Kestrel
- Kestrel alerts post to {SECRETS['webhook']} for the on-call team.
- Kestrel hosting is paid with the company card {SECRETS['card']} every month.
- Kestrel backups: pg_dump --password '{SECRETS['cli_password']}' kestrel, or mysql -u root -p{SECRETS['mysql']} kestrel.
- Kestrel models pull with {SECRETS['hf']} and publish with {SECRETS['npm']}.

## Other
- The quokka migration is done.
"""
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
QUERIES = ["kestrel alerts", "kestrel hosting card", "kestrel backups", "kestrel models"]


def _leaks(data: bytes | str) -> list[str]:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return [n for n in NEEDLES if n in text]


def test_no_planted_secret_reaches_any_output(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-03-02.md").write_text(NOTE, encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    transcript = ws / ".openclaw/sessions/main/transcripts/s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(json.dumps({"role": "user", "content": line[2:]}) + "\n" for line in NOTE.split("\n") if line.startswith("- ")))
    db = tmp_path / "index.sqlite"
    config = {"provider": "none", "store": {"path": str(db)}, "sources": ["memory", "sessions"],
              "sessions": {"visibility": "all"}, "sync": {"watch": False}, "dreaming": {"timezone": "UTC"}}
    outputs: dict[str, str] = {}
    with open_manager(ws, config) as m:
        m.sync()
        snippets = []
        for day in range(3):  # three days, several queries: the Kestrel facts qualify for promotion
            for query in QUERIES:
                response = m.search(f"{query} {day}" if day else query, min_score=0, now=T0 + timedelta(days=day))
                snippets.append(json.dumps([r.to_dict() for r in response.results]))
        m.flush()
        outputs["snippets"] = "\n".join(snippets)
        tools = MemoryTools(m)
        outputs["memory_get"] = json.dumps(tools.memory_get({"path": "memory/2026-03-02.md"}))
        # Line numbers are the file's: the redacted webhook line is still line 4.
        cited = tools.memory_get({"path": "memory/2026-03-02.md#L4"})
    night = T0 + timedelta(days=2, hours=14)
    staged = stage(ws, config, night)
    outputs["stage"] = json.dumps(staged.to_dict())
    outputs["queue"] = queue_path(ws).read_text(encoding="utf-8")
    applied = apply(ws, config, night, mode="passing")
    outputs["apply"] = json.dumps(applied.to_dict())
    outputs["MEMORY.md"] = (ws / "MEMORY.md").read_text(encoding="utf-8")
    # The recall store is SQLite (its WAL too): every byte of it, as text.
    for stored in sorted(store_path(ws).parent.glob(store_path(ws).stem + ".sqlite*")):
        outputs[f"recall store {stored.name}"] = stored.read_bytes().decode("utf-8", errors="replace")
    assert any(k.startswith("recall store") for k in outputs)
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            outputs[f"index{suffix}"] = Path(f"{db}{suffix}").read_bytes().decode("utf-8", errors="replace")

    leaks = {name: _leaks(data) for name, data in outputs.items() if _leaks(data)}
    assert leaks == {}
    # The pipeline really carried the facts all the way (a test that cannot fail proves nothing).
    assert staged.added and applied.applied and "Kestrel" in outputs["MEMORY.md"] and "Kestrel" in outputs["queue"]
    assert "kestrel" in outputs["index"].lower() and "Kestrel" in outputs["snippets"]
    assert "[REDACTED:" in outputs["MEMORY.md"] and "[REDACTED:" in outputs["snippets"]
    assert cited["text"].startswith("- Kestrel alerts post to https://hooks.slack.com/[REDACTED:webhook_url]")
    # The files themselves are the user's and stay as written.
    assert (ws / "memory" / "2026-03-02.md").read_text(encoding="utf-8") == NOTE


def test_an_index_written_before_redaction_is_rebuilt_without_the_secret(tmp_path: Path) -> None:
    """Redaction changes what the same bytes index to (sync.CONTENT_VERSION is part of the index's
    identity): an index written by older code, which kept the secret, is rebuilt, not trusted."""
    import apsw

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-03-02.md").write_text(NOTE, encoding="utf-8")
    db = tmp_path / "index.sqlite"
    config = {"provider": "none", "store": {"path": str(db)}, "sync": {"watch": False}}
    with open_manager(ws, config) as m:
        m.sync()
    # What an older version left: the raw note in the chunks, under its own identity.
    con = apsw.Connection(str(db))
    with con:
        con.execute("UPDATE chunks SET text = ?", (NOTE,))
        meta = json.loads(con.execute("SELECT value FROM meta WHERE key = 'memory_index_meta_v1'").fetchone()[0])
        # The identity the code before redaction computed (no content version in it).
        from mdrecall.config import MemoryConfig
        from mdrecall.embeddings.base import provider_key

        limits = MemoryConfig().limits
        meta["scopeHash"] = provider_key({"extraPaths": [], "maxFileBytes": limits.maxFileBytes,
                                          "sessionsDir": MemoryConfig().sessions.dir})
        con.execute("UPDATE meta SET value = ? WHERE key = 'memory_index_meta_v1'", (json.dumps(meta),))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert _leaks(db.read_bytes())
    with open_manager(ws, config) as m:
        report = m.sync()
        assert report.full_rebuild and "scopeHash" in (report.rebuild_reason or "")
        assert m.search("kestrel alerts", min_score=0).results
    leaked = [name for name, data in [("index", db.read_bytes()), ("wal", Path(f"{db}-wal").read_bytes() if Path(f"{db}-wal").exists() else b"")] if _leaks(data)]
    assert leaked == []
