"""Candidate retrieval in one round trip: pgvector HNSW (cosine) and Postgres full-text search.

One statement returns both candidate lists; scoring, decay, MMR, the character budget and citations
are the builtin's (``mdrecall.search.pipeline.rank_candidates``, with corpus statistics from
corpus.py). Every returned row is read from
``chunks`` under row-level security, so another agent's private chunk is never a candidate, whatever
the query says; the keyword ranking itself runs in ``keyword_candidates`` (schema.py), which applies
the same rule explicitly so that it can use the GIN index.

Keywords: the query is reduced to the builtin's terms (``text.query_terms``: stop words dropped, CJK
as bigrams) and ORed. Chunks are indexed with CJK characters spaced out (``text.fts_index_text``),
so each CJK character is a lexeme and a CJK bigram is the phrase ``'字' <-> '词'``: Chinese, Japanese
and Korean words of any length match without a segmenter. Latin words are stemmed by the configured
text-search configuration (``english`` by default). Ranking is ``ts_rank_cd`` (cover density).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdrecall.backends.postgres.schema import SCHEMA
from mdrecall.search.keyword import Candidate
from mdrecall.search.scope import Scope
from mdrecall.text import CJK_CHAR, query_terms

S = SCHEMA


#: Most rows matching only common words that one keyword search ranks (schema.keyword_candidates).
MAX_RANKED = 1000


def tsquery_term(term: str) -> str | None:
    """The ``to_tsquery`` input of one query term (a CJK bigram as a phrase); None when nothing is left."""
    clean = term.replace("\\", "").replace("'", "")
    if not clean:
        return None
    if CJK_CHAR.match(clean) and len(clean) > 1:
        return " <-> ".join(f"'{ch}'" for ch in clean)
    return f"'{clean}'"


def tsquery_terms(query: str) -> list[str]:
    """One ``to_tsquery`` input per query term (stop words dropped, CJK bigrams as phrases)."""
    return [t for t in (tsquery_term(term) for term in query_terms(query)) if t is not None]


def tsquery_text(query: str) -> str | None:
    """The whole query as one ``to_tsquery`` input (terms ORed), or None when it has none."""
    terms = tsquery_terms(query)
    return " | ".join(f"({t})" for t in terms) if terms else None


def _scope_sql(scope: Scope) -> tuple[str, tuple[Any, ...]]:
    # The builtin's own scope conditions (sources, whose transcripts), with psycopg's placeholders:
    # its SQL uses only ?, AND, IN, != and substr(), which mean the same in Postgres.
    clause, args = scope.sql("c")
    return clause.replace("?", "%s"), args


def _visible_path(agent_id: str, path: str, me: str) -> str:
    """How a chunk's path is shown to ``me``: its own paths as they are, another agent's as ``@agent/path``."""
    return path if agent_id == me else f"@{agent_id}/{path}"


def retrieve(
    conn: Any,
    *,
    me: str,
    query: str,
    query_vec: np.ndarray[Any, np.dtype[np.float32]] | None,
    limit: int,
    scope: Scope,
    ts_config: str,
    keywords: bool = True,
) -> tuple[list[Candidate], list[Candidate]]:
    """(keyword candidates, vector candidates), each best first, from one statement."""
    terms = tsquery_terms(query) if keywords else []
    clause, scope_args = _scope_sql(scope)
    branches: list[str] = []
    args: list[Any] = []
    if query_vec is not None:
        dims = int(len(query_vec))
        # Literal sizes (not parameters): the partial HNSW index for this size must match the plan.
        branches.append(
            f"""v AS MATERIALIZED (
                  SELECT c.id, (c.embedding::vector({dims})) <=> %s::vector({dims}) AS dist FROM {S}.chunks c
                  WHERE vector_dims(c.embedding) = {dims}{clause}
                  ORDER BY (c.embedding::vector({dims})) <=> %s::vector({dims}) LIMIT %s)"""
        )
        args += [query_vec, *scope_args, query_vec, limit]
    if terms:
        # Ranked by an owner-run function that can use the GIN index (schema.py says why).
        branches.append(
            f"""k AS MATERIALIZED (
                  SELECT f.id, f.rank FROM {S}.keyword_candidates(current_user, %s, %s::regconfig, %s, %s, %s, %s) AS f)"""
        )
        args += [terms, ts_config, limit, list(scope.sources) if scope.sources is not None else None,
                 scope.transcripts_prefix, MAX_RANKED]
    if not branches:
        return [], []
    cols = "c.id, c.agent_id, c.path, c.source, c.start_line, c.end_line, c.text"
    selects = []
    if query_vec is not None:
        selects.append(f"SELECT 'v', {cols}, 1 - v.dist FROM v JOIN {S}.chunks c ON c.id = v.id")
    if terms:
        selects.append(f"SELECT 'k', {cols}, k.rank FROM k JOIN {S}.chunks c ON c.id = k.id")
    statement = "WITH " + ", ".join(branches) + " " + " UNION ALL ".join(selects)
    keyword: list[Candidate] = []
    vector: list[Candidate] = []
    for kind, rowid, agent, path, source, start, end, text, score in conn.execute(statement, args):
        item = Candidate(rowid, _visible_path(agent, path, me), source, start, end, text, float(score))
        (vector if kind == "v" else keyword).append(item)
    keyword.sort(key=lambda c: c.score, reverse=True)
    vector.sort(key=lambda c: c.score, reverse=True)  # relaxed-order HNSW scans may return near-sorted rows
    return keyword, vector


__all__ = ["MAX_RANKED", "retrieve", "tsquery_term", "tsquery_terms", "tsquery_text"]
