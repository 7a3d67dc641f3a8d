"""Keyword retrieval with FTS5 BM25, built so natural-language questions match.

The query is reduced to content terms (stop words dropped, CJK as bigram phrases) and the terms are
ORed, so BM25 ranks chunks by how many rare query words they hold instead of requiring all of them
(the reference ANDs every word, which returns nothing for most questions).

Cost. ORing a question's words matches a large share of the chunks on conversational notes (the
median LoCoMo question: 27 % of 100k generated notes), and FTS5 computes BM25 for every match before
it sorts: ~0.65 µs a chunk, 18 ms a query at 100k chunks. So a query whose terms occur in more than
``CANDIDATE_POSTINGS`` chunk–term pairs ranks only the chunks that hold its rarest terms (up to that
many pairs, counted in the index's vocabulary), each scored with the full BM25 over all its terms;
the common terms then only re-score. Below the budget (every dev-set workspace for most queries)
the ranking is exactly the full one; at 100k it keeps 99.4 % of the full top 10 (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from mdrecall.search.scope import Scope, ScopeLike, as_scope
from mdrecall.store.db import IndexDB
from mdrecall.store.sql import Row, rows
from mdrecall.text import CJK_CHAR, fts_match_expression, query_terms


@dataclass(slots=True)
class Candidate:
    rowid: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    score: float  # raw, larger is better


_COLUMNS = "c.rowid, c.path, c.source, c.start_line, c.end_line, c.text"

#: Chunk–term pairs ("postings") one query ranks at most (see the module docstring).
CANDIDATE_POSTINGS = 8000


def candidate_terms(db: IndexDB, terms: list[str], chunks: int | None = None) -> list[str] | None:
    """The terms whose chunks are ranked, or None to rank every match: phrases (CJK bigrams, words
    the tokenizer splits), then single words rarest first while their chunks fit the budget.
    ``chunks``: the index's chunk count, when the caller knows it (no term is in more chunks than
    that, so a small index needs no counting)."""
    if chunks is not None and chunks * len(terms) <= CANDIDATE_POSTINGS:
        return None
    frequencies = db.fts_term_chunks([t for t in terms if not CJK_CHAR.match(t)])
    if not frequencies or sum(frequencies.values()) <= CANDIDATE_POSTINGS:
        return None
    chosen = [t for t in terms if t not in frequencies]
    used = 0
    for term in sorted(frequencies, key=lambda t: frequencies[t]):
        if chosen and used + frequencies[term] > CANDIDATE_POSTINGS:
            break
        chosen.append(term)
        used += frequencies[term]
    return chosen if len(chosen) < len(terms) else None


def keyword_search(
    db: IndexDB, query: str, limit: int, scope: ScopeLike, tokenizer: str = "unicode61", chunks: int | None = None
) -> list[Candidate]:
    """The ``limit`` best keyword matches of ``query``; ``chunks``: see :func:`candidate_terms`."""
    terms = query_terms(query)
    if not terms:
        return []
    where = as_scope(scope)
    if tokenizer == "trigram":
        return _trigram_search(db, terms, limit, where)
    expression = fts_match_expression(terms)
    if expression is None:
        return []
    try:
        rare = candidate_terms(db, terms, chunks)
        rows = _ranked(db, expression, rare, limit, where)
        if rare is not None and len(rows) < limit:
            # The rare terms' chunks ran out (or the filter hid them): rank every match after all.
            rows = _ranked(db, expression, None, limit, where)
    except apsw.SQLError:  # a query FTS5 cannot parse; corruption must reach the manager's recovery
        return []
    return [Candidate(r[0], r[1], r[2], r[3], r[4], r[5], -float(r[6])) for r in rows]


def _ranked(db: IndexDB, expression: str, rare: list[str] | None, limit: int, where: Scope) -> list[Row]:
    """(rowid, path, source, start line, end line, text, rank) of the best matches of ``expression``,
    best first; with ``rare``, only among the chunks that hold one of those terms."""
    clause, args = where.sql()
    if rare is None:
        # FTS5's optimised ORDER BY rank LIMIT: only the top rows are kept while ranking.
        ranked, order = "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?", "rank"
        match_args: tuple[str, ...] = (expression,)
    else:
        # The full BM25 (every term), for the chunks that hold a rare term only. bm25(), not the
        # rank column: ORDER BY rank would make FTS5 rank every match before the filter applies.
        ranked = (
            "SELECT rowid, bm25(chunks_fts) AS score FROM chunks_fts WHERE chunks_fts MATCH ? "
            "AND +rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?)"
        )
        rare_expression = fts_match_expression(rare)
        if rare_expression is None:  # no rare term survives as FTS syntax: rank every match
            return _ranked(db, expression, None, limit, where)
        match_args, order = (expression, rare_expression), "score"
    # A filter (sources, other sessions' transcripts) applies to four times as many; when it leaves
    # too few while more matches exist, rank every match under the filter, so hidden rows can never
    # crowd visible ones out of the candidates.
    inner = limit * 4 if where.restricted else limit
    fast = (
        f"SELECT {_COLUMNS}, f.{order}, f.n FROM "
        f"(SELECT rowid, {order}, count(*) OVER () AS n FROM ({ranked} ORDER BY {order} LIMIT ?)) AS f "
        f"JOIN chunks c ON c.rowid = f.rowid WHERE 1=1{clause} ORDER BY f.{order} LIMIT ?"
    )
    found = rows(db.conn, fast, (*match_args, inner, *args, limit))
    if where.restricted and len(found) < limit and (not found or found[0][7] >= inner):
        full = (
            f"SELECT {_COLUMNS}, f.{order} FROM ({ranked}) f JOIN chunks c ON c.rowid = f.rowid "
            f"WHERE 1=1{clause} ORDER BY f.{order} LIMIT ?"
        )
        found = rows(db.conn, full, (*match_args, *args, limit))
    return found


def _trigram_search(db: IndexDB, terms: list[str], limit: int, scope: Scope) -> list[Candidate]:
    long_terms = [t for t in terms if len(t) >= 3]
    short_terms = [t for t in terms if len(t) < 3]
    clause, args = scope.sql()
    found: dict[int, Candidate] = {}
    if long_terms:
        expression = " OR ".join('"' + t.replace('"', "") + '"' for t in long_terms)
        sql = (
            f"SELECT {_COLUMNS}, f.rank FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid "
            f"WHERE chunks_fts MATCH ?{clause} ORDER BY f.rank LIMIT ?"
        )
        try:
            for r in db.conn.execute(sql, (expression, *args, limit)):
                found[r[0]] = Candidate(r[0], r[1], r[2], r[3], r[4], r[5], -float(r[6]))
        except apsw.SQLError:
            pass
    if short_terms:
        # Trigrams cannot index one- and two-character words: count substring hits instead.
        likes = " OR ".join("c.text LIKE ? ESCAPE '\\'" for _ in short_terms)
        patterns = tuple("%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for t in short_terms)
        sql = f"SELECT {_COLUMNS} FROM chunks c WHERE ({likes}){clause} LIMIT ?"
        for r in db.conn.execute(sql, (*patterns, *args, limit * 4)):
            hits = sum(1 for t in short_terms if t in r[5])
            score = float(hits)
            prev = found.get(r[0])
            if prev is None:
                found[r[0]] = Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score)
            else:
                prev.score += score
    return sorted(found.values(), key=lambda c: c.score, reverse=True)[:limit]


def scan_search(db: IndexDB, query: str, limit: int, scope: ScopeLike) -> list[Candidate]:
    """Last resort when FTS5 is unavailable: score every stored chunk by term overlap in Python."""
    import math

    from mdrecall.text import term_stems

    terms = term_stems(query_terms(query))
    if not terms:
        return []
    clause, args = as_scope(scope).sql()
    stored = rows(db.conn, f"SELECT {_COLUMNS} FROM chunks c WHERE 1=1{clause}", args)
    lowered = [r[5].lower() for r in stored]
    n = max(1, len(stored))
    idf = {}
    for term in terms:
        df = sum(1 for text in lowered if term in text)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scored = []
    for r, text in zip(stored, lowered):
        score = sum(idf[t] * min(text.count(t), 3) / (min(text.count(t), 3) + 0.5) for t in terms if t in text)
        if score > 0:
            scored.append(Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score))
    scored.sort(key=lambda c: c.score, reverse=True)
    return scored[:limit]
