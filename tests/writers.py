"""Another program writing a Markdown file while mdrecall rewrites it (for the lost-edit tests)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

_APPENDER = textwrap.dedent(
    """
    import os, sys, time
    path, stop, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    n = 0
    while not os.path.exists(stop):
        with open(path, "a", encoding="utf-8") as handle:  # like `echo line >> MEMORY.md`
            handle.write(f"- {tag} {n}\\n")
        n += 1
        time.sleep(0.005)  # an aggressive writer (up to 200 appends a second), not a flood
    print(n)
    """
)


class Appender:
    """A separate process appending ``- <tag> <n>`` lines to ``path`` until stopped."""

    def __init__(self, path: Path, tag: str = "appended") -> None:
        self.path, self.tag = path, tag
        self.stop_file = path.with_name(f".stop-{tag}")
        self.count = 0
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(path), str(self.stop_file), tag], stdout=subprocess.PIPE, text=True
        )

    def wait_started(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while f"- {self.tag} " not in (self.path.read_text(encoding="utf-8") if self.path.exists() else ""):
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise AssertionError("the appender did not start")
            time.sleep(0.001)

    def stop(self) -> int:
        self.stop_file.touch()
        out, _ = self._proc.communicate(timeout=30)
        self.stop_file.unlink()
        self.count = int(out.strip())
        return self.count

    def lost(self, text: str) -> list[int]:
        """Appended line numbers missing from ``text``."""
        lines = set(text.split("\n"))
        return [n for n in range(self.count) if f"- {self.tag} {n}" not in lines]

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc.poll() is None:
            self.stop()
