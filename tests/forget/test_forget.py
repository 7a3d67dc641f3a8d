"""``forget`` on the builtin engine, keyword-only (vectors are test_no_byte_left.py's): what each kind of
target removes, the two-step confirmation, dry runs, concurrent edits, transcripts, bad targets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from forgethelpers import NOTE, NOTE_PATH, TOKEN, TRANSCRIPT_PATH, files_under

from mdrecall import open_manager
from mdrecall.contract import MemorySearchManager
from mdrecall.errors import StoreError
from mdrecall.forget import ConfirmationRequired, ForgetTargetError, NothingToForget, apply_plan, forget, plan_forget


@pytest.fixture
def manager(fact_ws: Path, tmp_path: Path) -> Iterator[MemorySearchManager]:
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False},
              "sources": ["memory", "sessions"], "sessions": {"visibility": "all"}}  # fmt: skip
    with open_manager(fact_ws, config, use_global_config=False) as opened:
        opened.sync()
        yield opened


def _chunk_texts(manager: MemorySearchManager) -> list[str]:
    conn = apsw.Connection(str(manager.db_path))
    try:
        return sorted(str(r[0]) for r in conn.execute("SELECT text FROM chunks"))
    finally:
        conn.close()


def _found(manager: MemorySearchManager, query: str) -> list[str]:
    return [h.snippet for h in manager.search(query, min_score=0).results]


def test_chosen_lines_go_from_the_note_and_the_index_and_nothing_else_does(manager: MemorySearchManager) -> None:
    ws = manager.workspace
    report = forget(manager, f"{NOTE_PATH}#L4", yes=True)
    assert report.verified and report.plan.kind == "lines"
    assert (ws / NOTE_PATH).read_text(encoding="utf-8") == NOTE.replace(f"- The vault code is {TOKEN}, keep it secret.\n", "")
    assert not any(TOKEN in s for s in _chunk_texts(manager) if "Fly Postgres" in s)
    assert any("Fly Postgres" in s for s in _found(manager, "Fly Postgres"))
    # The transcript was not named: it still says it, in its own words.
    assert TOKEN in (ws / TRANSCRIPT_PATH).read_text(encoding="utf-8")
    index = next(s for s in report.stores if s.store == "index")
    assert index.removed["chunks holding the lines"] == 1 and "vacuumed" in index.notes


def test_a_dry_run_changes_nothing(manager: MemorySearchManager) -> None:
    ws = manager.workspace
    before = {p: p.read_bytes() for p in files_under(ws)}
    chunks = _chunk_texts(manager)
    report = forget(manager, TOKEN, dry_run=True)
    assert report.dry_run and not report.applied and report.plan.line_count == 2
    assert {p: p.read_bytes() for p in files_under(ws)} == before
    assert _chunk_texts(manager) == chunks


def test_deleting_needs_a_confirmation_and_the_token_names_exactly_the_lines(manager: MemorySearchManager) -> None:
    ws = manager.workspace
    with pytest.raises(ConfirmationRequired) as asked:
        forget(manager, TOKEN)
    token = asked.value.plan.token
    assert asked.value.plan.to_dict()["lineCount"] == 2 and TOKEN in (ws / NOTE_PATH).read_text(encoding="utf-8")
    assert plan_forget(manager, TOKEN).token == token  # the same lines, the same token
    # An append elsewhere does not change what the token names; a wrong token deletes nothing.
    with (ws / NOTE_PATH).open("a", encoding="utf-8") as fh:
        fh.write("- Added while the user was reading the list.\n")
    with pytest.raises(ConfirmationRequired) as wrong:
        forget(manager, TOKEN, confirm="0000000000000000")
    assert wrong.value.changed and TOKEN in (ws / NOTE_PATH).read_text(encoding="utf-8")
    assert forget(manager, TOKEN, confirm=token).verified
    text = (ws / NOTE_PATH).read_text(encoding="utf-8")
    assert TOKEN not in text and "Added while the user was reading" in text
    # Once the lines changed (here: gone), the old token names nothing any more.
    with pytest.raises(NothingToForget):
        forget(manager, TOKEN, confirm=token)


def test_an_edit_made_between_the_plan_and_the_removal_is_kept(manager: MemorySearchManager) -> None:
    ws = manager.workspace
    plan = plan_forget(manager, f"{NOTE_PATH}#L4")
    note = ws / NOTE_PATH
    note.write_text(note.read_text(encoding="utf-8").replace("Lunch with Dana", "Lunch with Dana and Ravi")
                    + "- A line someone appended meanwhile.\n", encoding="utf-8")  # fmt: skip
    report = apply_plan(manager, plan)
    text = note.read_text(encoding="utf-8")
    assert TOKEN not in text and "Lunch with Dana and Ravi" in text and "appended meanwhile" in text
    assert "an edit made meanwhile was merged in, not lost" in report.stores[0].notes
    assert any("Ravi" in s for s in _found(manager, "Ravi"))  # the merged text is what got indexed


def test_appends_racing_with_the_forget_are_all_kept(manager: MemorySearchManager) -> None:
    note = manager.workspace / NOTE_PATH
    stop = threading.Event()
    written: list[str] = []

    def append() -> None:
        i = 0
        while not stop.is_set() or i < 5:
            line = f"- concurrent note {i}"
            with note.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            written.append(line)
            i += 1
            time.sleep(0.002)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        forget(manager, TOKEN, yes=True)
    finally:
        stop.set()
        writer.join()
    text = note.read_text(encoding="utf-8")
    assert TOKEN not in text
    assert [line for line in written if line not in text] == []


def test_a_transcript_record_is_redacted_in_place_and_the_host_keeps_appending(manager: MemorySearchManager) -> None:
    path = manager.workspace / TRANSCRIPT_PATH
    size = path.stat().st_size
    original = path.read_text(encoding="utf-8").split("\n")
    with path.open("a", encoding="utf-8") as host:  # the agent host holds its transcript open for appending
        report = forget(manager, f"{TRANSCRIPT_PATH}#L2", yes=True)
        host.write(json.dumps({"type": "message", "message": {"role": "user", "content": "Appended after the forget."}}) + "\n")
    assert report.verified
    lines = path.read_text(encoding="utf-8").split("\n")
    assert [len(x) for x in lines[:4]] == [len(x) for x in original[:4]] and lines[2:4] == original[2:4]
    assert json.loads(lines[1]) == {"type": "mdrecall.forgotten"} and TOKEN not in path.read_text(encoding="utf-8")
    assert sum(len(x) + 1 for x in lines[:4]) == size  # same bytes, same line numbers
    assert "Appended after the forget." in lines[4]
    manager.sync()
    assert any("Appended after the forget" in s for s in _found(manager, "Appended after the forget"))
    assert not any(TOKEN in s for s in _chunk_texts(manager) if s.startswith(("User:", "Assistant:")))
    transcript = next(s for s in report.stores if s.store == "transcript")
    assert transcript.removed == {"records redacted in place": 1}


def test_whole_files(manager: MemorySearchManager) -> None:
    ws = manager.workspace
    report = forget(manager, NOTE_PATH, yes=True)
    assert report.plan.kind == "file" and not (ws / NOTE_PATH).exists()
    assert "file deleted" in report.stores[0].notes
    assert not any("Fly Postgres" in s for s in _chunk_texts(manager))
    forget(manager, TRANSCRIPT_PATH, yes=True)
    records = [json.loads(line) for line in (ws / TRANSCRIPT_PATH).read_text(encoding="utf-8").splitlines()]
    assert records[0]["type"] == "session" and all(r == {"type": "mdrecall.forgotten"} for r in records[1:])
    assert not any(s.startswith(("User:", "Assistant:")) for s in _chunk_texts(manager))


def test_a_session_forgets_only_transcripts_it_may_see(fact_ws: Path, tmp_path: Path) -> None:
    config = {"provider": "none", "store": {"path": str(tmp_path / "own.sqlite")}, "sync": {"watch": False},
              "sources": ["memory", "sessions"]}  # fmt: skip (visibility: own, the default)
    with open_manager(fact_ws, config, use_global_config=False) as opened:
        other = plan_forget(opened, TOKEN, session_key="someone-else", all_sessions=False)
        assert [s.path for s in other.selections] == [NOTE_PATH]
        own = plan_forget(opened, TOKEN, session_key="main", all_sessions=False)
        assert [s.path for s in own.selections] == [NOTE_PATH, TRANSCRIPT_PATH]
        with pytest.raises(ForgetTargetError, match="not one this session may see"):
            plan_forget(opened, f"{TRANSCRIPT_PATH}#L2", session_key="someone-else", all_sessions=False)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("memory/nope.md", "does not exist"),
        (f"{NOTE_PATH}#L4-L40", "has 5 line(s); L4-L40 goes past its end"),
        (f"{NOTE_PATH}#L0", "1 ≤ first ≤ last"),
        ("../outside.md", "outside the workspace"),
        (".openclaw/sessions/main/transcripts/other.jsonl", "not a session transcript"),
        (f"{TRANSCRIPT_PATH}#L1", "no message in those lines"),
        ("ab", "too short"),
        ("   ", "nothing to forget"),
        ("ltm:0b2f5b7e-4d7a-4c8e-9a51-6b8f5f2b1a10", "no long-term memory"),
    ],
)
def test_a_bad_target_is_refused_and_changes_nothing(manager: MemorySearchManager, target: str, message: str) -> None:
    before = {p: p.read_bytes() for p in files_under(manager.workspace)}
    with pytest.raises(ForgetTargetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        forget(manager, target, yes=True)
    assert {p: p.read_bytes() for p in files_under(manager.workspace)} == before


def test_a_text_matching_too_much_is_refused(manager: MemorySearchManager) -> None:
    (manager.workspace / "memory" / "list.md").write_text("".join(f"- item {i}\n" for i in range(600)), encoding="utf-8")
    with pytest.raises(ForgetTargetError, match="matches 600 lines"):
        plan_forget(manager, "item")


def test_a_read_only_store_is_not_forgotten_in(fact_ws: Path, tmp_path: Path, manager: MemorySearchManager) -> None:
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite"), "readOnly": True}, "sync": {"watch": False}}
    with open_manager(fact_ws, config, use_global_config=False) as readonly:
        with pytest.raises(StoreError, match="read-only"):
            forget(readonly, TOKEN, yes=True)
    assert TOKEN in (fact_ws / NOTE_PATH).read_text(encoding="utf-8")


# --- the command ------------------------------------------------------------------------------------


@pytest.fixture
def cli(fact_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:  # fmt: skip
    from mdrecall.cli import main

    (fact_ws / ".mdrecall.yaml").write_text(json.dumps({"provider": "none", "store": {"path": str(tmp_path / "cli.sqlite")},
                                                        "sources": ["memory", "sessions"], "sessions": {"visibility": "all"}}))  # fmt: skip
    monkeypatch.delenv("MDRECALL_WORKSPACE", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["forget", "-w", str(fact_ws), *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_the_command_shows_asks_and_forgets(cli: Callable[..., tuple[int, str, str]], fact_ws: Path) -> None:
    code, out, err = cli(TOKEN, "--dry-run")
    assert code == 0 and "would forget 2 line(s) in 2 file(s)" in out and f"{NOTE_PATH}\n" in out
    token = out.rsplit("--confirm ", 1)[1].split()[0]
    code, out, err = cli(TOKEN)  # no terminal, no --yes: nothing happens
    assert code == 1 and "nothing forgotten yet" in err and f"--confirm {token}" in err
    assert TOKEN in (fact_ws / NOTE_PATH).read_text(encoding="utf-8")
    code, out, err = cli(TOKEN, "--confirm", "ffffffffffffffff")
    assert code == 1 and "not the ones that token names" in err
    code, out, err = cli(TOKEN, "--confirm", token)
    assert code == 0, err
    assert "removed from:" in out and "verified: no copy left" in out
    assert TOKEN not in (fact_ws / NOTE_PATH).read_text(encoding="utf-8")
    code, out, err = cli(TOKEN, "--yes")
    assert code == 1 and "nothing in memory matches" in err


def test_the_command_json_and_exit_codes(cli: Callable[..., tuple[int, str, str]], fact_ws: Path) -> None:
    code, out, _ = cli(f"{NOTE_PATH}#L3", "--yes", "--format", "json")
    data: dict[str, Any] = json.loads(out)
    assert code == 0 and data["applied"] and data["verification"]["verified"] and data["kind"] == "lines"
    assert {s["store"] for s in data["stores"]} >= {"markdown", "index"}
    code, out, _ = cli(TOKEN, "--json")
    assert code == 1 and json.loads(out)["action"] == "confirm"
    for bad in ("memory/nope.md", f"{NOTE_PATH}#L99", "x"):
        code, _, err = cli(bad, "--yes")
        assert code == 2 and "Error:" in err, (bad, err)
    code, _, err = cli("memory/nope.md", "--text", "--yes")  # the same words as a text: found nowhere
    assert code == 1 and "nothing in memory matches" in err


def test_agent_hosts_opt_in_to_the_tool(manager: MemorySearchManager) -> None:
    from mdrecall.agent.tools import MemoryTools

    assert "memory_forget_lines" not in MemoryTools(manager).names  # destructive: never a default
    tools = MemoryTools(manager, tools=("memory_search", "memory_forget_lines"), session_key="main")
    spec = next(s for s in tools.specs() if s.name == "memory_forget_lines")
    assert spec.destructive and not spec.read_only
    first = tools.call("memory_forget_lines", {"target": TOKEN})
    assert first["action"] == "confirm" and TOKEN in (manager.workspace / NOTE_PATH).read_text(encoding="utf-8")
    done = tools.call("memory_forget_lines", {"target": TOKEN, "confirm": first["token"]})
    assert done["action"] == "forgotten" and done["verification"]["verified"]
    assert tools.call("memory_forget_lines", {"target": "xy"})["code"] == "invalid_arguments"
    assert tools.call("memory_forget_lines", {"target": TOKEN, "text": "yes"})["code"] == "invalid_arguments"


def test_a_long_term_entry_on_the_lancedb_backend(fact_ws: Path, tmp_path: Path, counting_provider: Any) -> None:
    pytest.importorskip("lancedb")
    config = {"backend": "lancedb", "provider": "counting", "sync": {"watch": False},
              "lancedb": {"dbPath": str(tmp_path / "ltm")}}  # fmt: skip
    with open_manager(fact_ws, config, use_global_config=False) as ltm:
        stored = ltm.store_memory(f"The vault code is {TOKEN}.", source="tool")
        kept = ltm.store_memory("The user prefers window seats.", source="tool")
        report = forget(ltm, f"ltm:{stored['id']}#L1", yes=True)
        assert report.plan.kind == "entry" and report.verified
        assert ltm.get_entry(stored["id"]) is None and ltm.get_entry(kept["id"]) is not None
        assert not [p for p in files_under(tmp_path / "ltm") if TOKEN.encode() in p.read_bytes()]
        # The workspace's files are not the backend's: a text target finds them and the entries alike.
        plan = plan_forget(ltm, "window seats")
        assert [s.kind for s in plan.selections] == ["ltm"]


def test_the_tool_deletes_nothing_when_a_shown_line_changed(manager: MemorySearchManager) -> None:
    from mdrecall.agent.tools import MemoryTools

    tools = MemoryTools(manager, tools=("memory_forget_lines",), session_key="main")
    first = tools.call("memory_forget_lines", {"target": f"{NOTE_PATH}#L4"})
    note = manager.workspace / NOTE_PATH
    note.write_text(note.read_text(encoding="utf-8").replace("keep it secret", "tell nobody"), encoding="utf-8")
    again = tools.call("memory_forget_lines", {"target": f"{NOTE_PATH}#L4", "confirm": first["token"]})
    assert again["action"] == "changed" and again["token"] != first["token"]
    assert "tell nobody" in note.read_text(encoding="utf-8")
    done = tools.call("memory_forget_lines", {"target": f"{NOTE_PATH}#L4", "confirm": again["token"]})
    assert done["action"] == "forgotten" and TOKEN not in note.read_text(encoding="utf-8")


def test_copies_left_in_an_index_are_found_and_forgotten_though_no_file_says_it(fact_ws: Path, tmp_path: Path) -> None:
    # A forget that stopped half-way, or a note edited by hand and not synced since: the index
    # still holds the text. Forgetting the text finds those rows and removes them.
    config = {"provider": "none", "sync": {"watch": False, "onSearch": False}}
    with open_manager(fact_ws, config, use_global_config=False) as opened:
        opened.sync()
        note = fact_ws / NOTE_PATH
        note.write_text(note.read_text(encoding="utf-8").replace(f"- The vault code is {TOKEN}, keep it secret.\n", ""),
                        encoding="utf-8")  # fmt: skip
        plan = plan_forget(opened, TOKEN)
        assert plan.selections == [] and plan.stale_paths == [NOTE_PATH] and not plan.empty
        assert "index rows of memory/2026-03-02.md" in plan.leftovers[0]
        report = forget(opened, TOKEN, confirm=plan.token)
        assert report.verified, report.to_dict()
        assert not any(TOKEN in s for s in _chunk_texts(opened))
        assert any("Fly Postgres" in s for s in _chunk_texts(opened))  # re-indexed from the file as it is
        with pytest.raises(NothingToForget):
            forget(opened, TOKEN, yes=True)
