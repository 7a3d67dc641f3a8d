"""Narrow citations and pack the character budget so one long hit cannot crowd out short ones."""

from __future__ import annotations

from mdrecall.search.budget import Hit, message_map, narrow, pack


def _hit(rowid: int, path: str, start: int, lines: list[str], weights: list[float], source: str = "memory") -> Hit:
    end = start + len(lines) - 1
    return Hit(rowid, path, source, start, end, "\n".join(lines), score=0.5, line_weights=weights)


def test_a_long_markdown_hit_is_cut_to_its_best_line_and_neighbours() -> None:
    lines = [f"- line {i}: " + "filler words " * 8 for i in range(10)]
    hit = narrow(_hit(1, "memory/a.md", 5, lines, [0, 0, 0, 0, 0, 0, 3.0, 0, 0, 0]), 1, 200, None)
    assert (hit.start_line, hit.end_line) == (10, 12)
    assert hit.text == "\n".join(lines[5:8])
    assert hit.cost == len(hit.text) + 1


def test_short_hits_and_hits_without_a_matching_line_stay_whole() -> None:
    short = narrow(_hit(1, "memory/a.md", 1, ["a", "b", "c"], [0, 1, 0]), 1, 200, None)
    assert (short.start_line, short.end_line) == (1, 3)
    lines = ["x" * 100] * 5
    vector_only = narrow(_hit(2, "memory/b.md", 1, lines, [0] * 5), 1, 200, None)
    assert (vector_only.start_line, vector_only.end_line) == (1, 5)


def test_a_hit_that_does_not_fit_is_skipped_and_shorter_ones_still_get_in() -> None:
    long = _hit(1, "memory/long.md", 1, ["L" * 3000], [1.0])
    longer = _hit(2, "memory/long2.md", 1, ["M" * 2500], [1.0])
    shorts = [_hit(10 + i, f"memory/s{i}.md", 1, [f"short answer {i}"], [1.0]) for i in range(3)]
    out = pack([long, longer, *shorts], 10, 4000, 1, 400, None)
    assert [h.rowid for h in out][:4] == [1, 10, 11, 12]
    assert sum(h.cost for h in out) <= 4000


def test_overlapping_hits_of_one_file_cite_each_line_once() -> None:
    a = _hit(1, "memory/a.md", 1, ["one", "two", "three"], [1, 1, 1])
    b = _hit(2, "memory/a.md", 3, ["three", "four"], [1, 1])
    out = pack([a, b], 10, 4000, 5, 10_000, None)
    assert [(h.start_line, h.end_line) for h in out] == [(1, 3), (4, 4)]


def test_transcript_lines_map_to_their_messages() -> None:
    long_segment = "Assistant: " + "w" * 790
    text = "\n".join(["User: hi there", long_segment, "Assistant: the rest of that reply", "User: thanks"])
    assert message_map(text, 7, 9) == [7, 8, 8, 9]
    assert message_map(text, 7, 12) is None  # does not account for the cited messages: not trusted
