"""Narrow citations and pack the character budget so one long hit cannot crowd out short ones."""

from __future__ import annotations

from mdrecall.search.budget import Hit, cited_cost, message_map, narrowed, pack
from mdrecall.search.filelines import FileLineLengths


def _hit(rowid: int, path: str, start: int, lines: list[str], weights: list[float], source: str = "memory") -> Hit:
    end = start + len(lines) - 1
    return Hit(rowid, path, source, start, end, "\n".join(lines), score=0.5, line_weights=weights)


def test_a_long_markdown_hit_is_cut_to_its_best_line_and_neighbours() -> None:
    lines = [f"- line {i}: " + "filler words " * 8 for i in range(10)]
    hit = narrowed(_hit(1, "memory/a.md", 5, lines, [0, 0, 0, 0, 0, 0, 3.0, 0, 0, 0]), 1)
    assert hit is not None and (hit.start_line, hit.end_line) == (10, 12)
    assert hit.text == "\n".join(lines[5:8])
    # Packed into a budget the whole chunk does not fit: the narrowed part goes in.
    out = pack([_hit(1, "memory/a.md", 5, lines, [0, 0, 0, 0, 0, 0, 3.0, 0, 0, 0])], 10, 400, 1, 10_000, None)
    assert [(h.start_line, h.end_line) for h in out] == [(10, 12)]


def test_hits_that_fit_stay_whole_and_unmatched_ones_cannot_be_narrowed() -> None:
    out = pack([_hit(1, "memory/a.md", 1, ["a", "b", "c"], [0, 1, 0])], 10, 4000, 1, 2000, None)
    assert [(h.start_line, h.end_line) for h in out] == [(1, 3)]
    assert narrowed(_hit(2, "memory/b.md", 1, ["x" * 100] * 5, [0] * 5), 1) is None  # found by vectors alone


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
    # b keeps only line 4, which continues a: one region of the file, one result.
    assert [(h.start_line, h.end_line) for h in out] == [(1, 4)]
    assert out[0].text == "one\ntwo\nthree\nfour" and out[0].rowid == 1


def test_touching_hits_are_one_result_and_free_a_slot() -> None:
    a = _hit(1, "memory/a.md", 1, ["one", "two"], [1, 1])
    b = _hit(2, "memory/b.md", 1, ["elsewhere"], [1])
    c = _hit(3, "memory/a.md", 3, ["three"], [1])
    d = _hit(4, "memory/c.md", 1, ["more"], [1])
    out = pack([a, b, c, d], 3, 4000, 5, 10_000, None)
    assert [(h.path, h.start_line, h.end_line) for h in out] == [("memory/a.md", 1, 3), ("memory/b.md", 1, 1), ("memory/c.md", 1, 1)]
    apart = _hit(5, "memory/a.md", 5, ["five"], [1])  # a line between: two regions
    assert len(pack([a, apart], 3, 4000, 5, 10_000, None)) == 2


def test_transcript_lines_map_to_their_messages() -> None:
    long_segment = "Assistant: " + "w" * 790
    text = "\n".join(["User: hi there", long_segment, "Assistant: the rest of that reply", "User: thanks"])
    assert message_map(text, 7, 9) == [7, 8, 8, 9]
    assert message_map(text, 7, 12) is None  # does not account for the cited messages: not trusted


def test_cost_counts_the_whole_cited_lines_from_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "long.md").write_text("short\n" + "y" * 3000 + "\n", encoding="utf-8")
    (tmp_path / "s.jsonl").write_text('{"role": "user", "content": "' + "z" * 2500 + '"}\n', encoding="utf-8")
    lengths = FileLineLengths(tmp_path)
    piece = _hit(1, "memory/long.md", 2, ["y" * 700], [1.0])  # one piece of a split line
    assert cited_cost(piece, lengths, None) == 3001
    message = Hit(2, "s.jsonl", "sessions", 1, 1, "User: " + "z" * 790, line_weights=[1.0])
    assert cited_cost(message, lengths, None) == 2501
    assert lengths("../outside.md", "memory") is None


def test_a_long_neighbour_is_dropped_before_the_matching_line() -> None:
    # The chunk ends a 3,000-character assistant reply and holds the short user line that matched:
    # citing the reply as context would spend most of the budget on what did not match.
    reply = "- assistant: " + "advice " * 430
    answer = "- user: it took me two weeks to find the house"
    hit = _hit(1, "memory/a.md", 7, [reply, answer], [0.5, 3.0])
    shorts = [_hit(10 + i, f"memory/s{i}.md", 1, [f"- user: short answer {i} " + "x" * 400], [1.0]) for i in range(3)]
    out = pack([hit, *shorts], 10, 4000, 2, 2000, None)
    assert [(h.path, h.start_line, h.end_line) for h in out][:1] == [("memory/a.md", 8, 8)]
    assert out[0].text == answer
    assert [h.rowid for h in out] == [1, 10, 11, 12]
    # Short neighbours stay as context: only as much context is dropped as keeps within the limit.
    lines = [reply, "- user: before", answer, "- user: after", "- user: later"]
    kept = pack([_hit(2, "memory/b.md", 3, lines, [0.5, 0, 3.0, 0, 0])], 10, 4000, 2, 2000, None)
    assert [(h.start_line, h.end_line) for h in kept] == [(4, 6)]


def test_an_expensive_hit_is_taken_only_when_worth_what_it_displaces() -> None:
    # A 3,000-character reply ranked second by a hair would leave room for one of the three short
    # turns behind it; together they are likelier to hold the answer (scores are calibrated).
    first = _hit(1, "memory/first.md", 1, ["- user: the best match"], [1.0])
    first.score = 0.6
    reply = _hit(2, "memory/reply.md", 1, ["- assistant: " + "advice " * 430], [1.0])
    reply.score = 0.52
    shorts = [_hit(10 + i, f"memory/s{i}.md", 1, [f"- user: short answer {i} " + "x" * 600], [1.0]) for i in range(3)]
    for s in shorts:
        s.score = 0.5
    out = pack([first, reply, *shorts], 10, 4000, 2, 4000, None)
    assert [h.rowid for h in out][:4] == [1, 10, 11, 12]
    assert sum(h.cost for h in out) <= 4000 and [h.rowid for h in out][4:] in ([], [2])  # at most a cut of it, last
    # A hit that is clearly the answer keeps its place, whatever it costs.
    reply.score = 0.95
    kept = pack([first, reply, *shorts], 10, 4000, 2, 4000, None)
    assert [h.rowid for h in kept][:2] == [1, 2] and kept[1].text == reply.text
    # The best match always leads, however much it costs.
    reply.score = 0.52
    leading = pack([reply, *shorts], 10, 4000, 2, 4000, None)
    assert leading[0].rowid == 2 and leading[0].text == reply.text
