"""The C heap's free pages go back to the system (mdrecall.heap), and the MCP server does it after
requests, at most once per interval (issue 28: its resident memory grew by what glibc kept)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mdrecall.heap import HeapTrimmer, release_free_memory

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# Holes between blocks still in use: 150 MiB of 4 KiB blocks, every 32nd kept. free() can give
# back only the top of a heap, so the holes stay resident until trimmed.
_FRAGMENT = textwrap.dedent(
    """
    import sys
    from mdrecall.heap import release_free_memory

    def anon() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) // 1024
        raise SystemExit("no RssAnon")

    blocks = [bytearray(4096) for _ in range(150 * 256)]
    kept = blocks[::32]
    del blocks
    before = anon()
    released = release_free_memory()
    print(before, anon(), released, len(kept))
    """
)


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_release_gives_back_the_holes_free_keeps() -> None:
    out = subprocess.run([sys.executable, "-c", _FRAGMENT], capture_output=True, text=True, check=True).stdout.split()
    before, after, released = int(out[0]), int(out[1]), out[2]
    assert before - after > 100, f"RssAnon {before} -> {after} MiB"  # ~145 MiB of holes
    assert released == "True"


def test_the_trimmer_trims_at_most_once_per_interval() -> None:
    now = [0.0]
    calls: list[float] = []

    def release() -> bool:
        calls.append(now[0])
        return True

    trimmer = HeapTrimmer(60.0, clock=lambda: now[0], release=release)
    for step in range(0, 300, 5):  # a request every 5 s for 5 minutes
        now[0] = float(step)
        if trimmer.due():
            trimmer.trim()
    assert calls == [60.0, 120.0, 180.0, 240.0]
    assert trimmer.trims == 4
    trimmer.trim()  # asked again at once: not due, nothing done
    assert trimmer.trims == 4


def test_release_never_fails() -> None:
    assert release_free_memory() in (True, False)


def test_the_mcp_server_trims_after_requests(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from mdrecall.agent.plugin import create_memory_capability
    from mdrecall.mcp.server import build_server, served_tools

    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("# MEMORY\n- The planner moves to v0.5.\n")
    config = {"provider": "none", "store": {"path": str(tmp_path / "index.sqlite")}, "sync": {"watch": False}}
    capability = create_memory_capability(tmp_path, config, tools=served_tools("builtin"))
    released: list[str] = []

    def counter(name: str) -> Callable[[], bool]:
        def release() -> bool:
            released.append(name)
            return True

        return release

    every_call = HeapTrimmer(0.0, release=counter("every call"))
    never = HeapTrimmer(3600.0, release=counter("hourly"))

    async def scenario() -> None:
        for trimmer in (every_call, never):
            async with Client(build_server(capability, trimmer=trimmer)) as client:
                for _ in range(3):
                    result = await client.call_tool("memory_search", {"query": "planner"})
                    assert not result.is_error
                await client.get_prompt("relevant_memories", {"query": "planner"})

    try:
        anyio.run(scenario)
    finally:
        capability.close()
    assert released == ["every call"] * 4  # three tool calls and a prompt; none within the hour


# A block above the threshold is mapped on its own once map_large_blocks() ran: glibc's own rule
# had raised the threshold to 16 MiB after a 16 MiB block was freed, so the next 4 MiB came from
# the heap and stayed there as a hole.
_MAPPED = textwrap.dedent(
    """
    import ctypes
    from mdrecall.heap import map_large_blocks, release_free_memory

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = Info

    def mapped_after_4mib() -> int:
        before = libc.mallinfo2().hblkhd
        block = libc.malloc(4 << 20)
        grown = libc.mallinfo2().hblkhd - before
        libc.free(block)
        return grown >> 20

    libc.free(libc.malloc(16 << 20))  # raises glibc's threshold to 16 MiB
    first = mapped_after_4mib()
    release_free_memory()  # the heap's free top would serve the next block whatever the threshold
    print(first, map_large_blocks(), mapped_after_4mib())
    """
)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_large_blocks_are_mapped_on_their_own() -> None:
    out = subprocess.run([sys.executable, "-c", _MAPPED], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "True", "4"], out
