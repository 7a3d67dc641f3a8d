"""What scoring keeps between searches changes nothing it computes (search/relevance.py,
search/restatement.py, search/corpus.py): each cached path is compared with the computation it
replaced (kept here as the reference), and the index caches follow every write of the chunks."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mdrecall.search import relevance as rel
from mdrecall.search import restatement
from mdrecall.search.corpus import IndexCorpus, PorterTokens, index_corpus
from mdrecall.search.relevance import K1, B, KeywordEvidence, QueryStats, Tokens, query_stats
from mdrecall.search.restatement import _LINE_PREFIX, _NOISE, _SENTENCE, _SPEAKER, Statement, _question, _read, statement
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions
from mdrecall.text import fts_index_text

# -- the computations as they were before their caches (the reference) ----------------------------


def reference_evidence(stats: QueryStats, text: str, ref_length: float, tokenizer: Tokens) -> KeywordEvidence:
    if stats.empty or stats.total_idf <= 0:
        return KeywordEvidence(known=0.0)
    lines = text.split("\n")
    line_tokens = [tokenizer.tokens(line) for line in lines]
    counts: dict[str, int] = {}
    length = 0
    for toks in line_tokens:
        length += len(toks)
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
    has_cjk = any(stats.cjk)
    flat = text.replace(" ", "") if has_cjk else ""
    norm = K1 * (1 - B + B * length / max(1.0, ref_length))
    matched: list[int] = []
    sat_sum = 0.0
    for i, (form, is_cjk) in enumerate(zip(stats.forms, stats.cjk, strict=True)):
        tf = flat.count(form[0]) if is_cjk else min(counts.get(s, 0) for s in form)
        if tf <= 0:
            continue
        matched.append(i)
        sat_sum += stats.idf[i] * tf * (K1 + 1) / (tf + norm)
    matched_idf = sum(stats.idf[i] for i in matched)
    per_line: list[tuple[int, ...]] = []
    for line, toks in zip(lines, line_tokens, strict=True):
        present = set(toks)
        flat_line = line.replace(" ", "") if has_cjk else ""
        per_line.append(tuple(
            i for i in matched
            if (stats.forms[i][0] in flat_line if stats.cjk[i] else all(s in present for s in stats.forms[i]))
        ))
    return KeywordEvidence(coverage=matched_idf / stats.total_idf, bm25=sat_sum / ((K1 + 1) * stats.total_idf),
                           mass=matched_idf / stats.max_idf, matched=tuple(matched), line_terms=per_line,
                           known=stats.known)  # fmt: skip


def reference_statement(text: str, stats: QueryStats, tokens: Callable[[str], list[str]]) -> Statement | None:
    found = _SPEAKER.match(text)
    speaker = found.group(1).strip().lower() if found else None
    body = _NOISE.sub(" ", text[found.end():] if found else text)
    best: Statement | None = None
    best_weight = 0.0
    for sentence in _SENTENCE.split(body):
        sentence = _LINE_PREFIX.sub("", sentence).strip()
        if not sentence or sentence.startswith("#") or _question(sentence):
            continue
        own = set(tokens(sentence))
        if not own & {s for form, cjk in zip(stats.forms, stats.cjk) if not cjk for s in form}:
            continue  # a sentence must hold a word of the question itself
        stems = own | set(tokens(speaker)) if speaker else own  # the speaker is part of what a chat line states
        terms = frozenset(i for i, form in enumerate(stats.forms)
                          if not stats.cjk[i] and form and all(s in stems for s in form))  # fmt: skip
        weight = sum(stats.idf[i] for i in terms)
        if weight > best_weight:
            best, best_weight = _read(sentence, terms, tokens, speaker), weight
    return best


# -- generated texts and questions -----------------------------------------------------------------

WORDS = ("Caroline Melanie adoption agency support group painting pottery camping trip beach sunrise "
         "dogs cats guitar concert e-mail follow-up Heroku Postgres database moved switched v0.4 sprint "
         "running runs runner ran 2023-05-08 3:30 seventeen 17 25 no longer anymore").split()  # fmt: skip
CJK = ["王磊喜欢绿茶", "会议改到周四", "北京办公室", "東京の会議"]


def _texts(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        lines = []
        for _ in range(rng.randint(1, 9)):
            kind = rng.random()
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))
            if kind < 0.1:
                lines.append("")
            elif kind < 0.2:
                lines.append(f"- {rng.choice(CJK)} {words}")
            elif kind < 0.4:
                lines.append(f"- [D{rng.randint(1, 9)}:{rng.randint(1, 30)}] {rng.choice(['Caroline', 'Melanie'])}: {words}. {words}?")
            else:
                lines.append(f"- {words}. {words}!")
        out.append("\n".join(lines))
    return out


def _questions(rng: random.Random, count: int) -> list[str]:
    extra = ["when did Caroline go to the support group?", "e-mail follow-up", "王磊 绿茶", "runs running ran",
             "what is the capital of Mongolia", "", "?!"]
    return extra + [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(count)]


class _Corpus:
    """Term statistics of a list of texts, with PorterTokens (no profile cache of its own)."""

    def __init__(self, texts: list[str]) -> None:
        self._tok = PorterTokens()
        self._sets = [set(self._tok.tokens(t)) for t in texts]
        self._texts = texts

    def tokens(self, text: str) -> list[str]:
        return self._tok.tokens(text)

    def chunk_count(self) -> int:
        return len(self._texts)

    def doc_freqs(self, terms: object, forms: list[tuple[str, ...]], cjk: list[bool]) -> list[int]:
        return [sum(f[0] in t.replace(" ", "") for t in self._texts) if c else sum(all(s in toks for s in f) for toks in self._sets)
                for f, c in zip(forms, cjk, strict=True)]  # fmt: skip


@pytest.fixture(scope="module")
def generated() -> tuple[list[str], list[QueryStats], _Corpus]:
    rng = random.Random(27)
    texts = _texts(rng, 120)
    corpus = _Corpus(texts)
    return texts, [query_stats(q, corpus) for q in _questions(rng, 60)], corpus


def test_evidence_from_profiles_equals_the_reference(generated: tuple[list[str], list[QueryStats], _Corpus], tmp_path: Path) -> None:
    texts, all_stats, corpus = generated
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    cached = IndexCorpus(db)  # keeps profiles: asked twice, the second answer comes from the cache
    compared = 0
    for stats in all_stats:
        for text in texts:
            want = reference_evidence(stats, text, 400, corpus)
            assert rel.evidence(stats, text, 400, corpus) == want
            assert rel.evidence(stats, text, 400, cached) == want
            assert rel.evidence(stats, text, 400, cached) == want
            compared += bool(want.matched)
    assert compared > 500  # most pairs share a term: the matching paths ran, not only the empty one
    db.close()


def test_statements_from_the_sentence_cache_equal_the_reference(generated: tuple[list[str], list[QueryStats], _Corpus]) -> None:
    texts, all_stats, corpus = generated
    found = 0
    for stats in all_stats:
        for text in texts:
            for line in text.split("\n"):
                want = reference_statement(line, stats, corpus.tokens)
                assert statement(line, stats, corpus.tokens) == want
                assert statement(line, stats, corpus.tokens) == want  # from the cache
                found += want is not None
    assert found > 500


def reference_replaced_value(older: Statement, newer: Statement, tokens: Callable[[str], list[str]]) -> str | None:
    for m in restatement._REPLACED.finditer(newer.text):
        word = m.group(1)
        stems = tokens(word.lower())
        if word.lower() not in restatement.ENGLISH_STOP_WORDS and stems and all(s in older.words for s in stems):
            return word
    return None


def test_replaced_values_from_the_kept_matches_equal_the_reference(generated: tuple[list[str], list[QueryStats], _Corpus],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The newer statement's "moved from X" words are matched once per sentence and kept: every
    pair's verdict is the one the per-pair match gave, the first time and from the cache."""
    texts, all_stats, corpus = generated
    rng = random.Random(5)
    lines = [line for text in texts for line in text.split("\n")]
    lines += [f"- we {rng.choice(['moved', 'switched', 'migrated'])} the {rng.choice(WORDS)} from {rng.choice(WORDS)} to "
              f"{rng.choice(WORDS)} instead of {rng.choice(WORDS)}; {rng.choice(WORDS)} replaced the {rng.choice(WORDS)}"
              for _ in range(150)]  # fmt: skip
    pairs = []
    for stats in all_stats[:20]:
        read = [st for line in lines if (st := statement(line, stats, corpus.tokens)) is not None]
        pairs += [(stats, rng.choice(read), rng.choice(read)) for _ in range(300)] if read else []
    restatement._REPLACING.clear()
    verdicts = [(restatement.compare(older, newer, corpus.tokens, stats), restatement._replaced_value(older, newer, corpus.tokens))
                for stats, older, newer in pairs]  # fmt: skip
    monkeypatch.setattr(restatement, "_replaced_value", reference_replaced_value)
    want = [(restatement.compare(older, newer, corpus.tokens, stats), reference_replaced_value(older, newer, corpus.tokens))
            for stats, older, newer in pairs]  # fmt: skip
    replaced = sum(w[1] is not None for w in want)
    assert verdicts == want
    assert replaced > 50 and sum(v[0][0] == "changed" for v in want) > 20


def test_sentence_cache_is_per_tokenizer() -> None:
    """Two tokenizers stem one text differently: each gets its own reading."""
    text = "- Bob runs to the office."

    class Plain:
        def tokens(self, text: str) -> list[str]:
            return re.findall(r"\w+", text.lower())

    stats = query_stats("runs", _Corpus([text]))
    porter, plain = PorterTokens(), Plain()
    assert statement(text, stats, porter.tokens) is not None  # "runs" stems to "run" both sides
    plain_stats = QueryStats(["runs"], [("runs",)], [False], [1.0], 1.0, 1.0)
    assert statement(text, plain_stats, plain.tokens) is not None
    # the same text for Porter again, with a form Porter's stems do not hold: nothing, not a stale hit
    assert statement(text, plain_stats, porter.tokens) is None


# -- the index caches follow writes ----------------------------------------------------------------


def _put(db: IndexDB, path: str, lines: list[str], vectors: list[list[float]] | None = None) -> None:
    rows = []
    for n, text in enumerate(lines):
        vec = np.asarray(vectors[n], dtype=np.float32).tobytes() if vectors else None
        rows.append(ChunkRow(f"{path}:{n}", path, "memory", n + 1, n + 1, f"h-{text}", text, vec, fts_index_text(text), f"e-{text}"))
    db.replace_file(FileRow(path, "memory", f"h{len(lines)}", 0, 0), rows, "test")


def test_index_corpus_caches_follow_every_write(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    db.ensure_vec_table(3)
    _put(db, "memory/a.md", ["Caroline went camping", "Melanie paints"], [[1, 0, 0], [0, 1, 0]])
    corpus = index_corpus(db, "unicode61")
    stats = query_stats("camping", corpus)
    assert corpus.chunk_count() == 2 and stats.idf and corpus.doc_freqs(["camping"], [("camp",)], [False]) == [1]
    rowids = [int(r[0]) for r in db.conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]
    q = np.asarray([1, 0, 0], dtype=np.float32)
    assert corpus.cosines(q, rowids) == pytest.approx({rowids[0]: 1.0, rowids[1]: 0.0})
    texts = corpus.indexed_texts(rowids)
    assert texts == corpus.indexed_texts(rowids)  # a second read, from the cache
    # a write: the file now says something else, with other vectors, and a second file
    _put(db, "memory/a.md", ["Caroline went camping again", "and camping once more"], [[0, 0, 1], [0, 1, 0]])
    _put(db, "memory/b.md", ["camping gear list"])
    new_rowids = [int(r[0]) for r in db.conn.execute("SELECT rowid FROM chunks WHERE path = 'memory/a.md' ORDER BY rowid")]
    assert corpus.chunk_count() == 3
    assert corpus.doc_freqs(["camping"], [("camp",)], [False]) == [3]
    assert sorted(corpus.indexed_texts(new_rowids).values()) == ["Caroline went camping again", "and camping once more"]
    assert corpus.cosines(q, new_rowids) == pytest.approx({new_rowids[0]: 0.0, new_rowids[1]: 0.0})
    # a reused rowid (the old chunks were deleted) is not answered from before the write
    assert all(corpus.indexed_texts([r]).get(r) != "Caroline went camping" for r in rowids)
    db.remove_file("memory/b.md")
    assert corpus.chunk_count() == 2 and corpus.doc_freqs(["camping"], [("camp",)], [False]) == [2]
    db.close()


def test_a_small_index_skips_counting_postings_with_the_same_terms(tmp_path: Path) -> None:
    """keyword.candidate_terms with the chunk count: the same answer as counting the postings."""
    from mdrecall.search.keyword import CANDIDATE_POSTINGS, candidate_terms

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    _put(db, "memory/a.md", [f"note {n} about camping and painting" for n in range(300)])
    terms = ["camping", "painting", "note", "about"]
    assert 300 * len(terms) <= CANDIDATE_POSTINGS
    assert candidate_terms(db, terms, 300) is None and candidate_terms(db, terms) is None
    # past the budget the count decides nothing: the postings are counted as before
    import mdrecall.search.keyword as keyword

    old, keyword.CANDIDATE_POSTINGS = keyword.CANDIDATE_POSTINGS, 500
    try:
        assert candidate_terms(db, terms, 300) == candidate_terms(db, terms) is not None
    finally:
        keyword.CANDIDATE_POSTINGS = old
    db.close()


def test_line_numbers_follow_writes_and_are_the_callers_own(tmp_path: Path) -> None:
    from mdrecall.index.chunking import encode_numbers

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())

    def put(numbers: list[int]) -> int:
        row = ChunkRow("s:1", "sessions/s.jsonl", "sessions", numbers[0], numbers[-1], "h", "a\nb\nc", None, "a b c",
                       line_numbers=encode_numbers(numbers))  # fmt: skip
        db.replace_file(FileRow("sessions/s.jsonl", "sessions", str(numbers), 0, 0), [row], "test")
        return int(db.conn.execute("SELECT rowid FROM chunks").fetchone()[0])

    corpus = index_corpus(db, "unicode61")
    rowid = put([3, 4, 4])
    first = corpus.line_numbers([rowid])
    assert first == {rowid: [3, 4, 4]}
    first[rowid].append(99)  # a caller changing its list changes nothing kept
    assert corpus.line_numbers([rowid]) == {rowid: [3, 4, 4]}
    rowid = put([7, 7, 8])
    assert corpus.line_numbers([rowid]) == {rowid: [7, 7, 8]}
    db.close()


def test_file_times_keep_only_what_was_found_inside_the_workspace(tmp_path: Path) -> None:
    """``FileTimes.mtime`` skips resolving a path it found inside the workspace with the same mtime
    and size; anything else is checked again (a file changed, or swapped for a link outside)."""
    import os
    from datetime import UTC, datetime

    from mdrecall.search.dating import FileTimes

    ws, outside = tmp_path / "ws", tmp_path / "outside.md"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "a.md"
    note.write_text("# a\n", encoding="utf-8")
    outside.write_text("# secret\n", encoding="utf-8")
    (ws / "memory" / "b.md").symlink_to(outside)
    times = FileTimes(ws)
    first = times.mtime("memory/a.md")
    assert first == datetime.fromtimestamp(note.stat().st_mtime, UTC) == times.mtime("memory/a.md")
    os.utime(note, (1_700_000_000, 1_700_000_000))
    assert times.mtime("memory/a.md") == datetime.fromtimestamp(1_700_000_000, UTC)
    assert times.mtime("memory/b.md") is None and times.mtime("memory/b.md") is None
    note.unlink()
    note.symlink_to(outside)
    assert times.mtime("memory/a.md") is None
    assert times.mtime("@agent/memory/a.md") is None


def test_the_marks_kept_follow_every_write_of_the_chunks(tmp_path: Path) -> None:
    """``IndexCorpus.marks`` parses the chunks holding markup once per version of the chunks: a note
    written after is seen by the next search, a removed one is gone."""
    from mdrecall.search.markup import collect

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    corpus = index_corpus(db, "unicode61")

    def put(path: str, text: str) -> None:
        row = ChunkRow(f"{path}:1", path, "memory", 1, 1, "h", text, None, fts_index_text(text))
        db.replace_file(FileRow(path, "memory", text, 0, 0), [row], "test")

    put("memory/b.md", "the team moved to Postgres <!-- supersedes: memory/a.md#L1 -->")
    first = corpus.marks()
    assert [m.target for m in first] == ["memory/a.md"] and corpus.marks() is first
    put("memory/c.md", "and then to SQLite <!-- supersedes: memory/b.md#L1 -->")
    assert sorted(m.target for m in corpus.marks()) == ["memory/a.md", "memory/b.md"]
    assert corpus.marks() == collect(corpus.marked_chunks())
    put("memory/b.md", "no markup any more")
    assert [m.target for m in corpus.marks()] == ["memory/b.md"]
    db.close()
