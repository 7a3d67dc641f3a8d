"""Keyword retrieval with FTS5 BM25, built so natural-language questions match.

The query is reduced to content terms (stop words dropped, CJK as bigram phrases) and the terms are
ORed, so BM25 ranks chunks by how many rare query words they hold instead of requiring all of them
(the reference ANDs every word, which returns nothing for most questions).
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from mdrecall.search.scope import Scope, ScopeLike, as_scope
from mdrecall.store.db import IndexDB
from mdrecall.text import fts_match_expression, query_terms


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


def keyword_search(db: IndexDB, query: str, limit: int, scope: ScopeLike, tokenizer: str = "unicode61") -> list[Candidate]:
    terms = query_terms(query)
    if not terms:
        return []
    where = as_scope(scope)
    if tokenizer == "trigram":
        return _trigram_search(db, terms, limit, where)
    expression = fts_match_expression(terms)
    if expression is None:
        return []
    clause, args = where.sql()
    # FTS5's optimised ORDER BY rank LIMIT in the inner query: only the top rows are ranked. A filter
    # (sources, other sessions' transcripts) applies to four times as many; when it leaves too few
    # while more matches exist, rank every match under the filter, so hidden rows can never crowd
    # visible ones out of the candidates.
    inner = limit * 4 if where.restricted else limit
    fast = (
        f"SELECT {_COLUMNS}, f.rank, f.n FROM "
        "(SELECT rowid, rank, count(*) OVER () AS n FROM "
        "(SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?)) AS f "
        f"JOIN chunks c ON c.rowid = f.rowid WHERE 1=1{clause} ORDER BY f.rank LIMIT ?"
    )
    try:
        rows = db.conn.execute(fast, (expression, inner, *args, limit)).fetchall()
        if where.restricted and len(rows) < limit and (not rows or rows[0][7] >= inner):
            full = (
                f"SELECT {_COLUMNS}, f.rank FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid "
                f"WHERE chunks_fts MATCH ?{clause} ORDER BY f.rank LIMIT ?"
            )
            rows = db.conn.execute(full, (expression, *args, limit)).fetchall()
    except apsw.SQLError:
        return []
    return [Candidate(r[0], r[1], r[2], r[3], r[4], r[5], -float(r[6])) for r in rows]


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
    rows = db.conn.execute(f"SELECT {_COLUMNS} FROM chunks c WHERE 1=1{clause}", args).fetchall()
    lowered = [r[5].lower() for r in rows]
    n = max(1, len(rows))
    idf = {}
    for term in terms:
        df = sum(1 for text in lowered if term in text)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scored = []
    for r, text in zip(rows, lowered):
        score = sum(idf[t] * min(text.count(t), 3) / (min(text.count(t), 3) + 0.5) for t in terms if t in text)
        if score > 0:
            scored.append(Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score))
    scored.sort(key=lambda c: c.score, reverse=True)
    return scored[:limit]
