"""sources/appends.py: a file read again is parsed from where it grew, and from the top after any
other change."""

from __future__ import annotations

import hashlib
import random

from mdrecall.sources.appends import Kept, resume


def _fresh(raw: bytes) -> Kept:
    complete = raw.rfind(b"\n") + 1
    return Kept(complete, raw.count(b"\n", 0, complete), hashlib.sha256(raw[:complete]).digest())


def test_an_append_resumes_after_the_complete_lines_and_anything_else_starts_over() -> None:
    first = resume(b'{"a": 1}\n{"b": 2}\n{"c": 3', None)
    assert (first.start, first.first_line) == (0, 1) and first.kept == _fresh(b'{"a": 1}\n{"b": 2}\n{"c": 3')
    grown = b'{"a": 1}\n{"b": 2}\n{"c": 3}\n{"d": 4}\n'
    again = resume(grown, first.kept)
    assert (again.start, again.first_line) == (18, 3)  # the unfinished third line is parsed again
    assert again.kept == _fresh(grown)
    assert resume(b'{"a": 9}\n{"b": 2}\n{"c": 3}\n', again.kept).start == 0  # rewritten before the end
    assert resume(b'{"a": 1}\n', again.kept).start == 0  # truncated
    assert resume(grown, again.kept).start == len(grown)  # unchanged: nothing to parse


def test_random_growth_always_covers_what_a_fresh_read_would() -> None:
    rng = random.Random(3)
    raw, previous, kept = b"", b"", None
    resumed = 0
    for _ in range(400):
        action = rng.random()
        if action < 0.7:
            raw += bytes(rng.choice(b"ab\n\r\xc3\xa9") for _ in range(rng.randint(0, 30)))
        elif action < 0.85 and raw:
            at = rng.randrange(len(raw))
            raw = raw[:at] + b"x" + raw[at + 1 :]
        else:
            raw = raw[: rng.randint(0, len(raw))]
        at = resume(raw, kept)
        assert at.kept == _fresh(raw)
        complete = raw.rfind(b"\n") + 1
        same = kept is not None and kept.size <= complete and raw[: kept.size] == previous[: kept.size]
        assert at.start == (kept.size if same and kept is not None else 0)
        assert at.first_line == raw[: at.start].count(b"\n") + 1
        resumed += at.start > 0
        raw, previous, kept = raw, raw, at.kept
    assert resumed > 150
