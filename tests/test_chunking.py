"""Chunking: exact 1-based line ranges, overlap, long lines, CJK budgets, and fitting the model."""

from __future__ import annotations

import random
import string

import pytest

from mdrecall.index.chunking import Chunk, chunk_id, chunk_markdown, fit_to_model
from mdrecall.text import estimate_tokens


def _doc(n: int) -> tuple[str, list[str]]:
    lines = [f"line {i} talks about topic {i % 7} and the weather in city {i % 5}." if i % 9 else "" for i in range(1, n + 1)]
    return "\n".join(lines) + "\n", lines


def _assert_exact(chunks: list[Chunk], lines: list[str]) -> None:
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line]), (c.start_line, c.end_line)


def test_line_ranges_are_exact_and_cover_everything() -> None:
    content, lines = _doc(120)
    chunks = chunk_markdown(content, tokens=60, overlap=0)
    assert len(chunks) > 5
    _assert_exact(chunks, lines)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.start_line == prev.end_line + 1  # no overlap, no gap
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(lines)
    assert all(estimate_tokens(c.text) + c.text.count("\n") + 1 <= 60 for c in chunks)


def test_overlap_repeats_trailing_lines() -> None:
    content, lines = _doc(120)
    chunks = chunk_markdown(content, tokens=60, overlap=20)
    _assert_exact(chunks, lines)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert prev.start_line < nxt.start_line <= prev.end_line  # overlaps, but always moves forward
    covered = set()
    for c in chunks:
        covered.update(range(c.start_line, c.end_line + 1))
    assert covered == set(range(1, len(lines) + 1))


def test_crlf_and_odd_separators_keep_editor_line_numbers() -> None:
    content = "first\r\nsecond\x0bstill second\r\nthird\rfourth\n"
    chunks = chunk_markdown(content, tokens=400, overlap=0)
    assert len(chunks) == 1
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 4)
    assert chunks[0].text.split("\n")[1] == "second\x0bstill second"


def test_blank_only_content_has_no_chunks() -> None:
    assert chunk_markdown("\n\n   \n", tokens=100, overlap=10) == []
    assert chunk_markdown("", tokens=100, overlap=10) == []


def test_long_line_is_split_and_keeps_its_number() -> None:
    long_line = " ".join(f"word{i}" for i in range(1500))
    content = "title\n\n" + long_line + "\nafter\n"
    chunks = chunk_markdown(content, tokens=100, overlap=0)
    pieces = [c for c in chunks if c.start_line == c.end_line == 3]
    assert len(pieces) >= 10
    tail = [c for c in chunks if c.start_line == 3 and c.end_line == 4]  # the last piece shares a chunk with line 4
    rebuilt = "".join(p.text for p in pieces) + "".join(c.text.rsplit("\n", 1)[0] for c in tail)
    assert rebuilt == long_line
    assert all(estimate_tokens(p.text) <= 100 for p in pieces)
    assert chunks[-1].end_line == 4


def test_cjk_is_not_undercounted() -> None:
    rng = random.Random(3)
    line = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(2800))  # Han characters on one line
    chunks = chunk_markdown(line + "\n", tokens=200, overlap=0)
    assert "".join(c.text for c in chunks) == line
    # One Han character is one word piece: a 200-token chunk holds at most ~200 of them, not 800.
    assert max(len(c.text) for c in chunks) <= 200
    assert len(chunks) >= 14


def test_hash_and_id_are_stable_and_path_scoped() -> None:
    a = chunk_markdown("same text\n", 50, 0)[0]
    b = chunk_markdown("same text\n", 50, 0)[0]
    assert a.hash == b.hash
    assert chunk_id("memory", "memory/a.md", a) == chunk_id("memory", "memory/a.md", b)
    assert chunk_id("memory", "memory/a.md", a) != chunk_id("memory", "memory/b.md", a)
    assert a.hash != chunk_markdown("other text\n", 50, 0)[0].hash


def _gibberish(rng: random.Random, words: int) -> str:
    # Random alphanumerics break into many word pieces: the estimate under-counts them badly.
    return " ".join("".join(rng.choices(string.ascii_lowercase + string.digits, k=9)) for _ in range(words))


def test_every_chunk_fits_the_real_model(local_provider) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(7)
    lines = [_gibberish(rng, 12) for _ in range(60)]
    lines.append(_gibberish(rng, 400))  # one giant line
    lines.append("猫" * 600)  # CJK beyond the window on one line
    content = "\n".join(lines) + "\n"
    limit = local_provider.max_input_tokens
    assert limit == 256
    chunks = chunk_markdown(content, tokens=400, overlap=40)
    assert max(local_provider.count_tokens_many([c.text for c in chunks])) > limit  # the estimate alone is not enough
    fitted = fit_to_model(chunks, local_provider.count_tokens_many, limit)
    counts = local_provider.count_tokens_many([c.text for c in fitted])
    assert max(counts) <= limit
    # Nothing lost: every source line is still covered, with exact ranges for multi-line chunks.
    covered = set()
    for c in fitted:
        covered.update(range(c.start_line, c.end_line + 1))
        if c.start_line != c.end_line:
            assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
    assert covered == set(range(1, len(lines) + 1))
    giant = "".join(c.text for c in fitted if c.start_line == c.end_line == 61)
    assert lines[60] in giant or giant.replace("\n", "") == lines[60]


@pytest.mark.parametrize("tokens,overlap", [(32, 0), (64, 16), (200, 40), (500, 100)])
def test_budgets_respected_for_several_settings(tokens: int, overlap: int) -> None:
    content, lines = _doc(300)
    chunks = chunk_markdown(content, tokens=tokens, overlap=overlap)
    _assert_exact(chunks, lines)
    for c in chunks:
        assert sum(estimate_tokens(line) + 1 for line in c.text.split("\n")) <= tokens


def test_transcript_chunks_know_the_source_line_of_each_text_line() -> None:
    from mdrecall.index.chunking import chunk_lines, decode_numbers, encode_numbers

    lines = ["User: short question", "Assistant: " + "word " * 300, "User: and a statement"]
    chunks = chunk_lines(lines, 60, 10, [4, 5, 6])
    for chunk in chunks:
        numbers = chunk.line_numbers()
        assert len(numbers) == chunk.text.count("\n") + 1
        assert numbers[0] == chunk.start_line and numbers[-1] == chunk.end_line
        assert decode_numbers(encode_numbers(numbers)) == numbers
    # A chunk made only of pieces of the long reply cites that reply alone.
    assert any(c.start_line == c.end_line == 5 for c in chunks)
    assert encode_numbers([6, 7, 7, 7, 8]) == "6,7*3,8" and decode_numbers("6,x") is None


def _random_line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.08:
        return ""  # blank lines: a whitespace-only buffer makes no chunk
    if kind < 0.12:
        return "word " * rng.randint(40, 160)  # over the budget: split into pieces
    return " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "kestrel", "北京", "x1"]) for _ in range(rng.randint(1, 14)))


@pytest.mark.parametrize("tokens,overlap", [(24, 0), (40, 12), (64, 30), (120, 100)])
def test_resumed_chunking_equals_chunking_every_line(tokens: int, overlap: int) -> None:
    """A file chunked again after appends, edits and truncations gets exactly the chunks of
    chunking all its lines: the resumed packing is an optimisation, never a different answer."""
    from mdrecall.index.chunking import ResumableChunker, chunk_lines

    rng = random.Random(tokens * 1000 + overlap)
    chunker = ResumableChunker()
    resumed = 0
    for trial in range(12):
        lines: list[str] = []
        numbers: list[int] = []
        for _step in range(25):
            action = rng.random()
            if action < 0.7 or not lines:  # an append, the usual change
                for _ in range(rng.randint(1, 8)):
                    lines.append(_random_line(rng))
                    # transcripts: a message's wrapped segments share their source line
                    numbers.append(numbers[-1] + (0 if numbers and rng.random() < 0.2 else 1) if numbers else 1)
            elif action < 0.85:  # the last line rewritten (a partial write completed)
                lines[-1] = _random_line(rng)
            elif action < 0.89:  # an edit somewhere earlier
                lines[rng.randrange(len(lines))] = _random_line(rng)
            elif action < 0.93:  # a record that renders nothing inserted earlier: same lines, moved
                at = rng.randrange(len(lines))
                numbers[at:] = [n + 1 for n in numbers[at:]]
            else:  # truncated
                del lines[rng.randrange(len(lines)) :]
                del numbers[len(lines) :]
            expected = chunk_lines(lines, tokens, overlap, numbers)
            got = chunker.chunk(f"t{trial}", list(lines), list(numbers), tokens, overlap)
            assert [(c.start_line, c.end_line, c.text, c.numbers) for c in got] == \
                [(c.start_line, c.end_line, c.text, c.numbers) for c in expected]  # fmt: skip
            resumed += len(expected) > 2
    assert resumed > 100  # most steps had earlier chunks to keep


def test_resumed_chunking_fits_the_model_as_fit_to_model_does(local_provider) -> None:  # type: ignore[no-untyped-def]
    """Kept fitting results are reused only for the same model and limit, and give what fitting
    every chunk gives."""
    from mdrecall.index.chunking import ResumableChunker, chunk_lines

    rng = random.Random(11)
    chunker = ResumableChunker()
    counted: list[int] = []

    def count(texts):  # type: ignore[no-untyped-def]
        counted.append(len(texts))
        return local_provider.count_tokens_many(texts)

    lines: list[str] = []
    for step in range(8):
        lines += [_gibberish(rng, rng.randint(2, 12 if step % 3 else 90)) for _ in range(10)]
        limit = 64 if step < 6 else 48  # a smaller limit: nothing kept may be reused
        prefit = chunk_lines(lines, 60, 20)
        expected = fit_to_model(prefit, local_provider.count_tokens_many, limit)
        counted.clear()
        got = chunker.chunk("f", list(lines), None, 60, 20, (count, limit, "minilm"))
        assert [(c.start_line, c.end_line, c.text) for c in got] == [(c.start_line, c.end_line, c.text) for c in expected]
        assert max(local_provider.count_tokens_many([c.text for c in got])) <= limit
        assert len(expected) > len(prefit)  # some chunks were split to fit
        if step in (0, 6):  # nothing kept, or kept for another limit: every chunk counted
            assert counted[0] == len(prefit)
        else:  # only the chunks that changed were counted again
            assert counted[0] < len(prefit) // 2, (counted[0], len(prefit))


def _split_by_slices(line: str, budget: int) -> list[str]:
    """How a long line was split before: each candidate prefix estimated by scanning it."""
    pieces: list[str] = []
    rest = line
    while rest and estimate_tokens(rest) > budget:
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if estimate_tokens(rest[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def _mixed_line(rng: random.Random, length: int) -> str:
    # Words, runs without spaces, punctuation, CJK (and the kana middle dot, both CJK and punctuation),
    # underscores and digits (word characters), and other whitespace.
    parts = ["word", "longerword", "x", "1234", "snake_case", "、", "・", "中文字", "日本語の", "한국어", "!?", "--",
             " ", " ", " ", "  ", "\t", "é", "naïve", "a" * 40]  # fmt: skip
    return "".join(rng.choice(parts) for _ in range(length))


def test_long_lines_split_as_scanning_each_prefix_splits_them() -> None:
    from mdrecall.index.chunking import _split_long_line

    rng = random.Random(11)
    for _ in range(200):
        # The old search scans each probed prefix: keep lines short where the budget makes many pieces.
        budget = rng.choice([1, 2, 7, 30, 120])
        line = _mixed_line(rng, rng.randint(1, 40 if budget < 7 else 300))
        pieces = _split_long_line(line, budget)
        assert [p for p, _ in pieces] == _split_by_slices(line, budget), (line, budget)
        assert [c for _, c in pieces] == [estimate_tokens(p) for p, _ in pieces]


def test_slice_costs_are_the_estimate_of_each_slice() -> None:
    from mdrecall.text import SliceCosts

    rng = random.Random(5)
    for _ in range(200):
        text = _mixed_line(rng, rng.randint(0, 60))
        costs = SliceCosts(text)
        for _ in range(20):
            a = rng.randint(0, len(text))
            b = rng.randint(a, len(text))
            assert costs.estimate(a, b) == estimate_tokens(text[a:b]), (text, a, b)
