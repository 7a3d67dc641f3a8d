"""Corpus statistics for calibrated scores, from the team store (search/corpus.py's ``Corpus``).

The builtin's ranking (``rank_candidates``) scores every candidate from the query, the hit and
statistics of the corpus the agent searches. Here that corpus is every chunk the agent can see (its
own and the team's shared ones, as the builtin counts its whole index):

* size and document frequencies: ``mdrecall.term_statistics`` (schema migration 2), which counts
  with the GIN index under the same visibility rule; a query term's frequency is what Postgres's
  text search matches (``to_tsquery`` of the configured configuration), a term it drops as a stop
  word counts as held by every chunk; counts stop at :data:`DF_CAP` (a term that common weighs little
  anyway). The size and the mean vector are kept for :data:`TTL_S` seconds, and dropped after this
  agent's own sync;
* the evidence of each chunk is computed from its stored ``text`` with FTS5's porter stems, as the
  builtin does (the heading trail is only in the ``fts`` vector, so it is not counted here);
* vectors: the cosines of keyword-only candidates from their stored embeddings (pgvector), and the
  query's mean cosine to the memory from the mean of up to :data:`CENTROID_SAMPLE` stored vectors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mdrecall.backends.postgres.schema import SCHEMA
from mdrecall.backends.postgres.search import tsquery_term
from mdrecall.search.budget import message_lines
from mdrecall.search.corpus import PorterTokens, normalised

if TYPE_CHECKING:
    from mdrecall.search.corpus import Vector

S = SCHEMA
#: A term held by more chunks than this counts as held by this many.
DF_CAP = 50_000
#: Vectors averaged for the memory's mean vector (storage order: exact below this size).
CENTROID_SAMPLE = 5_000
#: Seconds the corpus size and mean vector are reused.
TTL_S = 60.0


class PgStats:
    """Per manager: the corpus size and mean vector, reused for :data:`TTL_S` seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total: tuple[float, int] | None = None
        self.centroid: dict[int, tuple[float, Vector | None]] = {}

    def clear(self) -> None:
        with self.lock:
            self.total = None
            self.centroid.clear()


class PgCorpus:
    """One search's view of the store's statistics, over ``conn`` (a connection acting as the agent)."""

    def __init__(self, conn: Any, stats: PgStats, ts_config: str) -> None:
        self.conn = conn
        self.stats = stats
        self.ts_config = ts_config
        self._tokens = PorterTokens()
        self._total: int | None = None

    def tokens(self, text: str) -> list[str]:
        return self._tokens.tokens(text)

    def _cached_total(self) -> int | None:
        with self.stats.lock:
            found = self.stats.total
        if found is not None and time.monotonic() - found[0] < TTL_S:
            return found[1]
        return None

    def _statistics(self, terms: Sequence[str]) -> tuple[int, list[int]]:
        known = self._cached_total()
        row = self.conn.execute(
            f"SELECT total, doc_freqs FROM {S}.term_statistics(current_user, %s, %s::regconfig, %s, %s)",
            (list(terms), self.ts_config, DF_CAP, known is None),
        ).fetchone()
        if row is None:
            return 0, [0] * len(terms)
        total = known if known is not None else int(row[0] or 0)
        if known is None:
            with self.stats.lock:
                self.stats.total = (time.monotonic(), total)
        return total, [int(v) for v in (row[1] or [])]

    def chunk_count(self) -> int:
        if self._total is None:
            self._total = self._cached_total()
            if self._total is None:
                self._total = self._statistics([])[0]
        return self._total

    def doc_freqs(self, terms: Sequence[str], forms: Sequence[tuple[str, ...]], cjk: Sequence[bool]) -> list[int]:
        queries = [tsquery_term(t) for t in terms]
        asked = [q for q in queries if q is not None]
        total, counts = self._statistics(asked) if asked else (self.chunk_count(), [])
        self._total = total
        by_query = iter(counts)
        out = []
        for q in queries:
            df = next(by_query, 0) if q is not None else 0
            # -1: a stop word of the text-search configuration, i.e. a word in about every chunk.
            out.append(total if df < 0 else df)
        return out

    def indexed_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return {}  # the stored text is the candidates' own

    def cosines(self, query_vec: Vector, ids: Sequence[int]) -> dict[int, float]:
        dims = int(query_vec.shape[0])
        rows = self.conn.execute(
            f"SELECT id, 1 - (embedding::vector({dims}) <=> %s::vector({dims})) FROM {S}.chunks "
            f"WHERE id = ANY(%s) AND embedding IS NOT NULL AND vector_dims(embedding) = {dims}",
            (normalised(query_vec), list(ids)),
        ).fetchall()
        return {int(r[0]): float(r[1]) for r in rows}

    def mean_cosine(self, query_vec: Vector) -> float | None:
        dims = int(query_vec.shape[0])
        with self.stats.lock:
            found = self.stats.centroid.get(dims)
        if found is None or time.monotonic() - found[0] >= TTL_S:
            row = self.conn.execute(
                f"SELECT avg(e) FROM (SELECT embedding::vector({dims}) AS e FROM {S}.chunks "
                f"WHERE embedding IS NOT NULL AND vector_dims(embedding) = {dims} LIMIT {CENTROID_SAMPLE}) AS sample"
            ).fetchone()
            centroid = None if row is None or row[0] is None else np.asarray(_to_list(row[0]), dtype=np.float32)
            found = (time.monotonic(), centroid)
            with self.stats.lock:
                self.stats.centroid[dims] = found
        centroid = found[1]
        if centroid is None:
            return None
        return float(np.dot(centroid, normalised(query_vec)))

    def whole_message(self, path: str, message: int) -> list[str] | None:
        rows = self.conn.execute(
            f"SELECT start_line, end_line, text FROM {S}.chunks WHERE agent_id = {S}.current_agent() AND path = %s "
            "AND source = 'sessions' AND start_line <= %s AND end_line >= %s ORDER BY start_line, id",
            (path, message, message),
        ).fetchall()
        return message_lines([(int(r[0]), int(r[1]), str(r[2]), None) for r in rows], message)

    def line_numbers(self, ids: Sequence[int]) -> dict[int, list[int]]:
        # Postgres chunks do not store per-line numbers: transcript lines are mapped from the text.
        return {}


def _to_list(value: Any) -> list[float]:
    to_list = getattr(value, "to_list", None) or getattr(value, "tolist", None)
    if callable(to_list):
        return [float(v) for v in to_list()]
    if isinstance(value, str):  # the vector's text form, when the type is not registered
        return [float(v) for v in value.strip("[]").split(",") if v]
    return [float(v) for v in value]


__all__ = ["CENTROID_SAMPLE", "DF_CAP", "TTL_S", "PgCorpus", "PgStats"]
