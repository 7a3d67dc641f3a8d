"""Attack catalogue for memory reads: every case must be refused with a clear, specific error.

Each attack runs twice: against ``manager.read_file`` (PathError with a code) and through the
``memory_get`` tool (an error dict, empty text, nothing of the target leaked).
"""

from __future__ import annotations

import json
import os

import pytest

from mdrecall import open_manager
from mdrecall.agent.tools import MemoryTools
from mdrecall.errors import PathError

SECRET = "TOPSECRET-do-not-leak"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("attacks")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"{SECRET}\n")
    (outside / "notes.txt").write_text(f"{SECRET}\n")
    home = base / "home"
    home.mkdir()
    (home / "secret.md").write_text(f"{SECRET}\n")

    ws = base / "ws"
    (ws / "memory" / "sub").mkdir(parents=True)
    (ws / "memory" / "dir.md").mkdir()
    (ws / "memory" / ".dreams").mkdir()
    (ws / "notes").mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n- evergreen fact\n")
    (ws / "memory" / "a.md").write_text("alpha\nbeta\ngamma\n")
    (ws / "memory" / "sub" / "b.md").write_text("nested note\n")
    (ws / "memory" / "x.md.txt").write_text(f"{SECRET}\n")
    (ws / "memory" / "x.MD").write_text(f"{SECRET}\n")
    (ws / "memory" / "data.txt").write_text(f"{SECRET}\n")
    (ws / "memory" / ".dreams" / "short-term-recall.json").write_text(f'{{"s": "{SECRET}"}}')
    (ws / "MEMORY.md.bak").write_text(f"{SECRET}\n")
    (ws / "private.md").write_text(f"{SECRET}\n")
    (ws / ".env").write_text(f"KEY={SECRET}\n")
    (ws / "notes" / "ok.md").write_text("extra path note\n")
    sessions = ws / ".openclaw" / "sessions" / "main" / "transcripts"
    sessions.mkdir(parents=True)
    (sessions / "s.jsonl").write_text(json.dumps({"type": "message", "message": {"role": "user", "content": SECRET}}) + "\n")

    # Links pointing out of the allowed roots.
    os.symlink(outside / "secret.md", ws / "memory" / "leak.md")
    os.symlink(outside, ws / "memory" / "linked")
    os.symlink(ws / "memory" / "leak.md", ws / "memory" / "hop.md")  # chain: hop -> leak -> outside
    os.symlink(ws / "private.md", ws / "memory" / "private-alias.md")  # inside the workspace, not memory
    os.symlink(ws / "memory" / "data.txt", ws / "memory" / "evil.md")  # .md name, .txt target
    os.symlink("/dev/zero", ws / "memory" / "zero.md")
    os.symlink(outside / "secret.md", ws / "notes" / "leak.md")  # inside an extra path
    os.mkfifo(ws / "memory" / "pipe.md")
    # Hard links: indistinguishable from their target, so every path check passes them.
    os.link(outside / "secret.md", ws / "memory" / "hardlink.md")
    os.link(outside / "notes.txt", ws / "notes" / "hardlink.md")
    os.link(ws / "private.md", ws / "memory" / "private-hard.md")  # inside the workspace, not memory
    # A link that stays inside memory/ is fine, and so is a hard link whose every name is a memory file.
    os.symlink(ws / "memory" / "a.md", ws / "memory" / "alias.md")
    (ws / "memory" / "twin.md").write_text("twin note\n")
    os.link(ws / "memory" / "twin.md", ws / "memory" / "sub" / "twin-link.md")

    manager = open_manager(
        ws,
        {"provider": "none", "extraPaths": ["notes"], "store": {"path": str(base / "index.sqlite")}},
        use_global_config=False,
    )
    yield {"ws": ws, "outside": outside, "home": home, "manager": manager, "tools": MemoryTools(manager)}
    manager.close()


# (attack id, path, expected code). ``{outside}``/``{ws}`` are filled in from the fixture.
ATTACKS: list[tuple[str, str, str]] = [
    # traversal
    ("dotdot", "../outside/secret.md", "outside_workspace"),
    ("dotdot-through-memory", "memory/../../outside/secret.md", "outside_workspace"),
    ("dotdot-deep", "memory/sub/../../../outside/secret.md", "outside_workspace"),
    ("dotdot-into-workspace", "memory/../private.md", "not_memory_path"),
    ("dotdot-dotfile", "memory/../.env", "not_memory_path"),
    ("percent-encoded-dotdot", "memory/%2e%2e/%2e%2e/outside/secret.md", "not_found"),
    # absolute paths
    ("absolute-etc-passwd", "/etc/passwd", "outside_workspace"),
    ("absolute-outside-md", "{outside}/secret.md", "outside_workspace"),
    ("absolute-workspace-private", "{ws}/private.md", "not_memory_path"),
    ("home-tilde", "~/secret.md", "outside_workspace"),
    ("file-url", "file:///etc/passwd", "not_memory_path"),
    # symlinks
    ("symlink-file-out", "memory/leak.md", "outside_workspace"),
    ("symlink-dir-out", "memory/linked/secret.md", "outside_workspace"),
    ("symlink-dir-out-nonmd", "memory/linked/notes.txt", "not_memory_path"),
    ("symlink-chain-out", "memory/hop.md", "outside_workspace"),
    ("symlink-to-workspace-file", "memory/private-alias.md", "outside_workspace"),
    ("symlink-md-name-txt-target", "memory/evil.md", "not_memory_path"),
    ("symlink-to-device", "memory/zero.md", "outside_workspace"),
    ("symlink-in-extra-path", "notes/leak.md", "outside_workspace"),
    # hard links
    ("hardlink-out", "memory/hardlink.md", "outside_workspace"),
    ("hardlink-out-in-extra-path", "notes/hardlink.md", "outside_workspace"),
    ("hardlink-to-workspace-file", "memory/private-hard.md", "outside_workspace"),
    # .md look-alikes and non-files
    ("md-dot-txt", "memory/x.md.txt", "not_memory_path"),
    ("uppercase-ext", "memory/x.MD", "not_memory_path"),
    ("memory-md-bak", "MEMORY.md.bak", "not_memory_path"),
    ("memory-md-trailing-slash", "MEMORY.md/", "invalid_path"),
    ("memory-md-trailing-dot", "MEMORY.md.", "not_memory_path"),
    ("lowercase-memory-md", "memory.md", "not_memory_path"),
    ("zero-width-suffix", "memory/a.md\u200b", "not_memory_path"),
    ("encoded-nul-suffix", "memory/a.md%00.txt", "not_memory_path"),
    ("directory-named-md", "memory/dir.md", "not_memory_path"),
    ("memory-dir-itself", "memory", "not_memory_path"),
    ("workspace-root", ".", "not_memory_path"),
    ("fifo-named-md", "memory/pipe.md", "not_memory_path"),
    ("dreams-state", "memory/.dreams/short-term-recall.json", "not_memory_path"),
    ("session-transcript", ".openclaw/sessions/main/transcripts/s.jsonl", "not_memory_path"),
    ("dotenv", ".env", "not_memory_path"),
    # NUL bytes
    ("nul-truncation", "memory/a.md\x00.txt", "invalid_path"),
    ("nul-trailing", "MEMORY.md\x00", "invalid_path"),
    ("nul-traversal", "memory/\x00/../../outside/secret.md", "invalid_path"),
    # Windows separators and drive/UNC forms
    ("backslash-traversal", "..\\outside\\secret.md", "invalid_path"),
    ("backslash-mixed", "memory\\..\\..\\outside/secret.md", "invalid_path"),
    ("backslash-plain", "memory\\a.md", "invalid_path"),
    ("windows-drive", "C:\\Windows\\win.ini", "invalid_path"),
    ("unc-share", "\\\\server\\share\\secret.md", "invalid_path"),
    ("drive-forward-slash", "C:/Windows/system.md", "not_memory_path"),
    # very long paths
    ("long-path", "memory/" + "a" * 5000 + ".md", "invalid_path"),
    ("long-traversal", "memory/" + "../" * 2000 + "etc/passwd", "invalid_path"),
    ("long-component", "memory/" + "n" * 300 + ".md", "invalid_path"),
    # empty
    ("empty", "", "invalid_path"),
    ("blank", "   ", "invalid_path"),
]


def _fill(path: str, env) -> str:
    return path.replace("{outside}", str(env["outside"])).replace("{ws}", str(env["ws"]))


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("attack", "path", "code"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_read_file_refuses(env, monkeypatch, attack: str, path: str, code: str) -> None:
    monkeypatch.setenv("HOME", str(env["home"]))
    with pytest.raises(PathError) as info:
        env["manager"].read_file(_fill(path, env))
    assert info.value.code == code, str(info.value)
    assert str(info.value)  # a message a person can act on
    assert SECRET not in str(info.value)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("attack", "path", "code"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_memory_get_refuses(env, monkeypatch, attack: str, path: str, code: str) -> None:
    monkeypatch.setenv("HOME", str(env["home"]))
    result = env["tools"].memory_get({"path": _fill(path, env)})
    assert result["text"] == ""
    assert result["code"] == code, result
    assert result["error"] and result["hint"]
    assert SECRET not in json.dumps(result)


@pytest.mark.parametrize(
    ("path", "expected_path", "first_line"),
    [
        ("MEMORY.md", "MEMORY.md", "# Memory"),
        ("./memory/a.md", "memory/a.md", "alpha"),
        ("memory/sub/b.md", "memory/sub/b.md", "nested note"),
        ("memory/sub/../a.md", "memory/a.md", "alpha"),
        ("memory/alias.md", "memory/alias.md", "alpha"),  # a link that stays inside memory/
        ("memory/sub/twin-link.md", "memory/sub/twin-link.md", "twin note"),  # hard link, all names inside
        ("notes/ok.md", "notes/ok.md", "extra path note"),
        ("{ws}/memory/a.md", "memory/a.md", "alpha"),  # absolute, but inside: normalised to relative
    ],
)
def test_legitimate_reads_still_work(env, path: str, expected_path: str, first_line: str) -> None:
    result = env["tools"].memory_get({"path": _fill(path, env)})
    assert "error" not in result, result
    assert result["path"] == expected_path
    assert result["text"].split("\n")[0] == first_line


def test_missing_memory_file_is_not_found_with_a_hint(env) -> None:
    result = env["tools"].memory_get({"path": "memory/2099-01-01.md"})
    assert result["code"] == "not_found"
    assert "memory_search" in result["hint"]


def test_transcript_hint_points_to_search(env) -> None:
    result = env["tools"].memory_get({"path": ".openclaw/sessions/main/transcripts/s.jsonl"})
    assert "corpus='sessions'" in result["hint"]


def test_the_three_refusals_are_distinct(env) -> None:
    codes = {
        env["tools"].memory_get({"path": p})["code"]
        for p in ("private.md", "../outside/secret.md", "memory/nope.md")
    }
    assert codes == {"not_memory_path", "outside_workspace", "not_found"}


def test_hard_links_to_outside_files_are_never_indexed(env) -> None:
    """The index reads files the way memory_get does: a search can never show the linked file."""
    manager = env["manager"]
    manager.sync()
    assert SECRET not in json.dumps([r.to_dict() for r in manager.search("TOPSECRET do not leak", min_score=0).results])
    skipped = {s.path: s.reason for s in manager.status().skipped}
    assert "hard link" in skipped["memory/hardlink.md"] and "hard link" in skipped["notes/hardlink.md"]
    assert "memory/sub/twin-link.md" not in skipped and manager.search("twin note", min_score=0).results


_SWAPPER = """
import ctypes, os, sys
target, outside, stop = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
other = target + ".other"
os.symlink(outside, other)  # a link to outside the roots, ready beside the real file or directory
n = 0
while not os.path.exists(stop):
    # Atomically exchange the two names (renameat2 RENAME_EXCHANGE): the checked name is the real
    # note (or directory) one moment and the link to outside the next.
    if libc.renameat2(-100, other.encode(), -100, target.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    n += 1
print(n)
"""


@pytest.mark.parametrize("swap", ["file", "directory"])
def test_a_swap_for_a_link_between_check_and_read_never_leaks(tmp_path, swap: str) -> None:
    """Another process swaps the name between a note and a link to outside, as fast as it can, while
    memory_get reads it 3000 times: the outside file must never come back."""
    import subprocess
    import sys

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.md").write_text(f"{SECRET}\n")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    if swap == "file":
        target, link_to, path = ws / "memory" / "note.md", outside / "note.md", "memory/note.md"
        target.write_text("an ordinary note\n")
    else:  # the directory on the way is swapped, the file name stays the same
        (ws / "memory" / "sub").mkdir()
        (ws / "memory" / "sub" / "note.md").write_text("an ordinary note\n")
        target, link_to, path = ws / "memory" / "sub", outside, "memory/sub/note.md"
    stop = tmp_path / "stop"
    manager = open_manager(ws, {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}, "sync": {"watch": False}},
                           use_global_config=False)
    tools = MemoryTools(manager)
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(target), str(link_to), str(stop)],
                            stdout=subprocess.PIPE, text=True)
    served = refused = leaked = 0
    try:
        for _ in range(3000):
            result = tools.memory_get({"path": path})
            if SECRET in json.dumps(result):
                leaked += 1
            elif result.get("error"):
                refused += 1
            else:
                served += 1
    finally:
        stop.touch()
        swaps = int(proc.communicate(timeout=30)[0])
        manager.close()
    assert leaked == 0, f"{leaked} of 3000 reads returned the outside file"
    assert swaps > 100 and served > 0 and refused > 0, (swaps, served, refused)

