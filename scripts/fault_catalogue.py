#!/usr/bin/env python3
"""The fault and attack catalogue the test suite covers, counted from pytest's own collection.

    python scripts/fault_catalogue.py            # print the table
    python scripts/fault_catalogue.py --write    # put it into docs/reliability.md
    python scripts/fault_catalogue.py --check    # exit 1 if docs/reliability.md is out of date

A case is one collected test item (each parametrized case counts once); a test that loops over
scenarios internally (kill points, random SIGKILLs, stress operations) counts once. Categories are
selected by test file and test-name pattern below; an item matches the first category that claims it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reliability.md"
START, END = "<!-- fault-catalogue:start -->", "<!-- fault-catalogue:end -->"


@dataclass(frozen=True)
class Category:
    name: str
    what: str
    selectors: tuple[tuple[str, str], ...]  # (test file, regex on the test function name)


CATEGORIES: tuple[Category, ...] = (
    Category(
        "Reads outside the memory paths",
        "traversal, absolute and `~` paths, symlinks and hard links out, FIFOs and devices, NUL bytes, "
        "Windows forms, a name swapped for a link between check and read",
        (("tests/agent/test_path_attacks.py", r"refuses|never_leaks|hard_links|distinct"),
         ("tests/test_workspace.py", r"refusals|linked_out|symlinks_out")),
    ),
    Category(
        "Secrets",
        "every redaction kind, numbers and prose that must survive, secrets through indexing, snippets, "
        "`memory_get`, recall store, review queue, MEMORY.md and promotion output, old indexes rebuilt",
        (("tests/test_redact.py", r"."), ("tests/test_redaction_paths.py", r"."),
         ("tests/test_transcripts.py", r"secret"), ("tests/test_sessions.py", r"secret")),
    ),
    Category(
        "Prompt injection through memories",
        "closing or reopening `<relevant-memories>`, forged tags, entries and headers, entity smuggling, "
        "lookalike brackets (fullwidth, small forms, guillemets, math and CJK angle brackets)",
        (("tests/agent/test_prompts.py", r"escape|attack|lookalike|double_escaping"),),
    ),
    Category(
        "HTTP transport",
        "foreign Host and Origin, rebinding names, userinfo/port/bracket tricks, repeated headers, "
        "strict Origin and Host parsing, tokens",
        (("tests/test_mcp_server.py", r"http_rejects|repeated|parse_origin|split_host|loopback_binding|wildcard|"
          r"explicit_origin|bearer"),),
    ),
    Category(
        "Concurrent edits of user Markdown",
        "appends and editor saves during promotion, queue writes and review decisions, symlinked MEMORY.md, "
        "merge rules, a writer that never pauses, flush notes append-only",
        (("tests/test_markdown_write.py", r"."),
         ("tests/dreaming/test_promotion_apply.py", r"appended|symlinked|review_made|atomic"),
         ("tests/dreaming/test_queue_review.py", r"merged_not_overwritten|did_not_see"),
         ("tests/agent/test_flush.py", r"append_flush_note")),
    ),
    Category(
        "Crashes",
        "`kill -9` at every labelled point of syncs and rebuilds, SIGKILL at random moments",
        (("tests/test_crash.py", r"kill"),),
    ),
    Category(
        "Damaged index files",
        "garbage, truncation, torn header, scrambled pages, deleted WAL, damage found while in use, "
        "several processes finding it, a corrupt recall store",
        (("tests/test_crash.py", r"corrupt|damage"), ("tests/test_manager.py", r"corrupt|damage"),
         ("tests/dreaming/test_recall_store.py", r"corrupt|malformed")),
    ),
    Category(
        "Full disk and I/O errors",
        "a filled tmpfs during a sync and at open, a file size limit (`RLIMIT_FSIZE`)",
        (("tests/test_disk_full.py", r"."),),
    ),
    Category(
        "Many processes",
        "4 processes mixing writes, searches, syncs and rebuilds on one index; recall counts from many "
        "processes and threads; lock timeouts",
        (("tests/test_concurrency.py", r"."), ("tests/dreaming/test_recall_store.py", r"concurrent|lock")),
    ),
    Category(
        "Missed or late changes",
        "edits, renames and deletes without a watcher, unreadable then readable files, stale answers, "
        "stuck syncs in other threads, missed watcher events",
        (("tests/test_freshness.py", r"sees|readable|stale|does_not_wait|never_clean|missed"),),
    ),
    Category(
        "Reads by citation and long lines",
        "`memory_get` given the `path#Lx-Ly` citations search prints, a line longer than `read.maxChars` "
        "(cut, and no continuation that would skip its rest)",
        (("tests/agent/test_tools.py", r"citations_search_prints|line_longer"),),
    ),
    Category(
        "One-shot overrides and hidden scope",
        "`-c provider=none` and `-c provider=<other>` on a shared index (never rewritten; keyword-only "
        "reads it as is and says when it is stale, another provider gets its own), transcripts hidden "
        "from a search without a session key (warned), the session key from `MDRECALL_SESSION_KEY`",
        (("tests/cli/test_one_shot_overrides.py", r"."),),
    ),
    Category(
        "The warm path",
        "one-shot commands through a daemon: another user (refused by the socket's directory and by "
        "SO_PEERCRED), a daemon killed (stale socket), stopped (SIGSTOP) or of another version, another "
        "configuration, config file or environment, a second daemon for the same workspace",
        (("tests/cli/test_warm.py", r"another_user|dead_daemon|another_configuration|changed_config|"
          r"other_overrides|one_daemon_per_workspace|socket_is_private"),),
    ),
    Category(
        "The first index",
        "a model failing part-way through the first index (what it finished is kept, the next sync "
        "carries on), a search while it runs (says so, no false 'vector table missing'), an empty index, "
        "files committed a batch at a time (a stop between files keeps the ones before it)",
        (("tests/index/test_first_index.py", r"."),),
    ),
    Category(
        "QMD misbehaving",
        "the real `qmd` slow to start, with a garbled handshake, stopped (SIGSTOP) before answering or "
        "while warm, killed, missing then installed, broken, its `qmd update` stopped: every search "
        "answers within `qmd.timeoutMs` from the builtin engine, a failed start backs off, QMD comes "
        "back by itself",
        (("tests/backends/qmd/test_qmd_faults.py", r"."), ("tests/backends/qmd/test_qmd_failures.py", r".")),
    ),
    Category(
        "LanceDB on a failing object store",
        "moto behind a fault-injecting proxy: 503 SlowDown, 429, uploads cut mid-way, answers later "
        "than the client waits, commit answers lost, an outage on every path (open, list, search, "
        "store, forget, maintenance, tools, CLI), a first commit cut before its manifest, a table "
        "folder without a manifest, two processes capturing at once under lost answers",
        (("tests/backends/lancedb/test_ltm_s3_faults.py", r"."), ("tests/backends/lancedb/test_ltm_s3_race.py", r".")),
    ),
    Category(
        "Hostile transcripts",
        "malformed and truncated JSONL, invalid UTF-8, huge messages, tool traffic, channel envelopes, "
        "U+2028/U+2029/U+0085 inside strings",
        (("tests/test_transcripts.py", r"malformed|non_utf8|huge|unbreakable|tool_calls|envelope|lines_split|dreaming"),
         ("tests/test_sessions.py", r"hostile")),
    ),
    Category(
        "Postgres under faults",
        "the server restarted in the middle of a sync and of a rebuild, `pg_terminate_backend` on idle and "
        "busy connections, statement timeouts under another session's locks, the server down, a full disk "
        "under the store's tables (a tmpfs tablespace), a read-only store, 4 agents syncing through a clean "
        "restart and a crash",
        (("tests/backends/postgres/test_faults.py", r"."),),
    ),
    Category(
        "A long day",
        "the MCP server and `mdrecall watch` on one workspace under steady churn (appends, editor saves, "
        "renames, whole folders moved and deleted, notes the index must skip, transcript appends, "
        "`memory_write`): planted facts found, removed ones gone, no stale citation, index = fresh rebuild; "
        "an embedding batch cut by Ctrl-C stops",
        (("tests/test_soak.py", r"."), ("tests/embeddings/test_onnx_encoder.py", r"failed_batch")),
    ),
)


def collect() -> list[str]:
    files = sorted({f for c in CATEGORIES for f, _ in c.selectors})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True,
    )
    items = [line.strip() for line in done.stdout.splitlines() if "::" in line]
    if done.returncode != 0 or not items:
        raise SystemExit(f"collection failed:\n{done.stdout}\n{done.stderr}")
    return items


def classify(items: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {c.name: [] for c in CATEGORIES}
    for item in items:
        path, _, test = item.partition("::")
        name = test.split("[", 1)[0]
        for category in CATEGORIES:
            if any(path == f and re.search(pattern, name) for f, pattern in category.selectors):
                found[category.name].append(item)
                break
    return found


def table(found: dict[str, list[str]]) -> str:
    rows = ["| category | what is attacked or broken | cases | test files |", "|---|---|---|---|"]
    for category in CATEGORIES:
        files = sorted({i.partition("::")[0].removeprefix("tests/") for i in found[category.name]})
        rows.append(f"| {category.name} | {category.what} | {len(found[category.name])} | "
                    + ", ".join(f"`{f}`" for f in files) + " |")
    total = sum(len(v) for v in found.values())
    rows.append(f"| **total** | | **{total}** | |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"update the table in {DOCS.relative_to(ROOT)}")
    parser.add_argument("--check", action="store_true", help=f"fail if {DOCS.relative_to(ROOT)} is out of date")
    args = parser.parse_args()
    found = classify(collect())
    empty = [name for name, items in found.items() if not items]
    if empty:
        print(f"no test matches these categories any more: {', '.join(empty)}", file=sys.stderr)
        return 1
    generated = table(found)
    if not (args.write or args.check):
        print(generated)
        return 0
    docs = DOCS.read_text(encoding="utf-8")
    if START not in docs or END not in docs:
        print(f"{DOCS}: markers {START} / {END} missing", file=sys.stderr)
        return 1
    head, rest = docs.split(START, 1)
    _old, tail = rest.split(END, 1)
    updated = f"{head}{START}\n{generated}\n{END}{tail}"
    if args.check:
        if updated != docs:
            print(f"{DOCS} is out of date: run python scripts/fault_catalogue.py --write", file=sys.stderr)
            return 1
        return 0
    DOCS.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
