"""What calibrated scoring reads from the store the candidates came from.

A hit's score (search/relevance.py) depends on the query, the hit and statistics of the whole
corpus: the number of chunks, each query term's document frequency, the text as the keyword index
holds it, the stored vectors of candidates that only keyword search found, and the mean of all
vectors (the query's ``topical`` statistic). Each engine answers these from its own store:

* :class:`IndexCorpus`, the builtin SQLite index (FTS5 vocabulary, the stored chunk vectors);
* the Postgres backend's ``PgCorpus`` (``backends/postgres/corpus.py``);
* :class:`CandidateCorpus`, for an engine that can only hand over its candidate lists: the
  statistics are estimated from the candidates themselves (less well calibrated; documented in
  docs/retrieval.md).

Why this module is long: :class:`IndexCorpus` is one object on purpose. Its statistics, tokens,
keyword profiles, stored texts and vectors are all cached per version of the index's chunks and
must be dropped together when the chunks change; split up, each part would need its own copy of
that rule.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from mdrecall.index.chunking import decode_numbers
from mdrecall.search.keyword import Candidate
from mdrecall.search.lru import IdleLru
from mdrecall.search.markup import KEYWORD as MARKUP_KEYWORD
from mdrecall.search.markup import ChunkRow, Mark, collect
from mdrecall.search.relevance import FallbackTokens, LineMasks, TextProfile, text_profile
from mdrecall.store.db import IndexDB
from mdrecall.text import fts_index_text

if TYPE_CHECKING:
    import numpy as np

    Vector = np.ndarray[Any, np.dtype[np.float32]]


class Corpus(Protocol):
    """Corpus statistics and stored data one search's scoring needs (see the module docstring)."""

    def tokens(self, text: str) -> list[str]:
        """Stems of ``text`` as the keyword index tokenises it."""
        ...

    def chunk_count(self) -> int:
        """Chunks the search could find (the N of inverse document frequency)."""
        ...

    def doc_freqs(self, terms: Sequence[str], forms: Sequence[tuple[str, ...]], cjk: Sequence[bool]) -> list[int]:
        """Per query term, the chunks holding it (see relevance.TermStatistics)."""
        ...

    def indexed_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """The text each chunk is keyword-indexed from (heading trail + body) where known."""
        ...

    def cosines(self, query_vec: Vector, ids: Sequence[int]) -> dict[int, float]:
        """Cosine of the query with each chunk's stored vector (chunks without one left out)."""
        ...

    def mean_cosine(self, query_vec: Vector) -> float | None:
        """The query's mean cosine to every stored vector (None: no vectors)."""
        ...

    def whole_message(self, path: str, message: int) -> list[str] | None:
        """The rendered lines of transcript message ``message`` of ``path`` (None: unknown)."""
        ...

    def line_numbers(self, ids: Sequence[int]) -> dict[int, list[int]]:
        """The source line of each text line of those chunks whose lines are not simply
        ``start_line..end_line`` and whose store knows them (transcripts); the rest are left out."""
        ...


def normalised(vec: Vector) -> Vector:
    import numpy as np  # here, not at import: keyword-only searches never load numpy

    q = np.asarray(vec, dtype=np.float32)
    return q / (float(np.linalg.norm(q)) or 1.0)


class _Centroid:
    """The mean of every stored unit vector, recomputed when ``key`` changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: object = None
        self._value: Vector | None = None

    def mean_cosine(self, key: object, compute: Callable[[], Vector | None], query_vec: Vector) -> float | None:
        with self._lock:
            if key != self._key:
                self._value = compute()
                self._key = key
            centroid = self._value
        if centroid is None or centroid.shape[0] != query_vec.shape[0]:
            return None
        import numpy as np

        return float(np.dot(centroid, normalised(query_vec)))


class PorterTokens:
    """FTS5's porter tokenizer (what the builtin index uses) on a private in-memory connection: the
    same stems for an engine whose own index tokenises elsewhere (the Postgres backend)."""

    _lock = threading.Lock()
    _conn: Any = None
    _tok: Any = None
    _failed = False

    def tokens(self, text: str) -> list[str]:
        with PorterTokens._lock:
            if PorterTokens._tok is None and not PorterTokens._failed:
                try:
                    PorterTokens._conn = conn = apsw.Connection(":memory:")
                    PorterTokens._tok = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
                except apsw.Error:
                    PorterTokens._failed = True
            tok = PorterTokens._tok
            if tok is None:
                return FallbackTokens().tokens(text)
            return list(tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False,
                            include_colocated=False))  # fmt: skip


#: Lines whose tokens one corpus keeps, least recently used dropped first, and none unused for
#: search.lru.IDLE_S (an edited chunk's old lines are never asked for again): ~2 MB of lines.
TOKEN_CACHE_TEXTS = 20_000
#: Chunks whose indexed text and vector one corpus keeps per version of the chunks (then it starts
#: again): ~3 KB each.
STORED_CACHE_CHUNKS = 8192
#: Chunk texts whose keyword profile one corpus keeps, least recently used dropped first, and none
#: unused for search.lru.IDLE_S (~3 KB each: a workspace of a few thousand chunks keeps all its
#: candidates).
PROFILE_CACHE_TEXTS = 4096


class _Stored:
    """What scoring read from the index at one version of its chunks (``IndexDB.chunks_version``,
    a new token on every write of chunks): the chunk count, query terms' document frequencies,
    chunks' indexed texts and vectors. All of them are functions of the chunks alone, so they hold
    until the token changes; each search reads the token first, then anything it lacks."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.count: int | None = None
        self.dfs: dict[tuple[tuple[str, ...], bool], int] = {}
        self.texts: dict[int, str] = {}
        #: rowid -> (float32 vector, its norm or 1.0); None: the chunk has no usable vector.
        self.vectors: dict[int, tuple[Any, float] | None] = {}
        #: rowid -> the source line of each text line (transcripts); None: none stored.
        self.numbers: dict[int, tuple[int, ...] | None] = {}


class IndexCorpus:
    """The builtin SQLite index: FTS5's own tokenizer and vocabulary, vectors from ``chunks``.

    One per connection (:func:`index_corpus`): the tokenizer and the temporary fts5vocab table are
    made once. ``matrix``: the in-memory KNN's vectors when it holds them (its mean costs ~2 ms at
    10k chunks, reading every blob much more).
    """

    def __init__(self, db: IndexDB, tokenizer: str = "unicode61") -> None:
        self.db = db
        self.kind = tokenizer
        self.conn = db.conn
        self._tok: Any = None
        self._vocab = False
        self._fallback = PorterTokens()
        self._centroid = _Centroid()
        self.matrix: Vector | None = None
        self._marked: tuple[object, list[ChunkRow]] | None = None
        self._marks: tuple[list[ChunkRow], list[Mark]] | None = None
        self._token_cache: IdleLru[str, tuple[str, ...]] = IdleLru(TOKEN_CACHE_TEXTS)
        self._profiles: IdleLru[str, TextProfile] = IdleLru(PROFILE_CACHE_TEXTS)
        self._stored: _Stored | None = None
        self._stored_lock = threading.Lock()
        if tokenizer == "unicode61" and db.caps.fts_available:
            try:
                self._tok = db.conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
            except apsw.Error:
                self._tok = None

    def tokens(self, text: str) -> list[str]:
        # Scoring tokenises every line of every candidate on every search (~360 calls a search at
        # 235 chunks, 8 % of its CPU); the same lines come back search after search.
        found = self._token_cache.get(text)
        if found is None:
            if self._tok is None:
                found = tuple(self._fallback.tokens(text))
            else:
                found = tuple(
                    self._tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False,
                              include_colocated=False)  # fmt: skip
                )
            self._token_cache.put(text, found)
        return list(found)

    def _whole_profile(self, text: str) -> TextProfile | None:
        """``text_profile(text, self)`` from one tokenizer call over the whole text (a newline always
        separates tokens, so each line gets the tokens it has alone), the counts made in C and each
        stem's lines left to when evidence asks for them (:class:`LineMasks`); None without the FTS5
        tokenizer. At 1M chunks every search profiles ~120 texts it never saw, and a call and a
        line-cache round trip per line were the largest part of scoring; then a Python step per
        token."""
        if self._tok is None:
            return None
        raw = text.encode("utf-8")
        found = self._tok(raw, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=True, include_colocated=False)
        tokens = [token for _start, _end, token in found]
        newlines: list[int] = []
        at = raw.find(b"\n")
        while at != -1:
            newlines.append(at)
            at = raw.find(b"\n", at + 1)
        starts = [start for start, _end, _token in found]
        return TextProfile(tuple(text.split("\n")), Counter(tokens), len(found), LineMasks(tokens, starts, newlines))

    def profile(self, text: str) -> TextProfile:
        """The text's keyword profile (relevance.text_profile), kept: scoring asks for the same
        candidates' texts search after search, and a profile depends on nothing else."""
        found = self._profiles.get(text)
        if found is None:
            whole = self._whole_profile(text)
            found = whole if whole is not None else text_profile(text, self)
            self._profiles.put(text, found)
        return found

    def _current(self) -> _Stored | None:
        """The cache of the chunks' current version (None: an index without version tokens, whose
        changes cannot be told: nothing is kept)."""
        token = self.db.chunks_version()
        if token is None:
            return None
        with self._stored_lock:
            if self._stored is None or self._stored.token != token:
                self._stored = _Stored(token)
            return self._stored

    def chunk_count(self) -> int:
        # COUNT(*) reads a whole index b-tree (~10 ms at 1M chunks): once per version of the chunks
        stored = self._current()
        if stored is None:
            return self.db.chunk_count()
        if stored.count is None:
            stored.count = self.db.chunk_count()
        return stored.count

    def _ensure_vocab(self) -> bool:
        if not self._vocab:
            try:
                self.conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.mdrecall_vocab USING fts5vocab(main, chunks_fts, row)"
                )
                self._vocab = True
            except apsw.Error:
                return False
        return True

    def doc_freqs(self, terms: Sequence[str], forms: Sequence[tuple[str, ...]], cjk: Sequence[bool]) -> list[int]:
        stored = self._current()
        out: list[int] = []
        use_vocab = self._tok is not None and self._ensure_vocab()
        for form, is_cjk in zip(forms, cjk, strict=True):
            known = stored.dfs.get((form, is_cjk)) if stored is not None else None
            if known is not None:
                out.append(known)
                continue
            try:
                if use_vocab and not is_cjk and len(form) == 1:
                    row = self.conn.execute("SELECT doc FROM temp.mdrecall_vocab WHERE term = ?", (form[0],)).fetchone()
                else:
                    phrase = " ".join(form[0]) if is_cjk and self.kind == "unicode61" else " ".join(form)
                    row = self.conn.execute(
                        "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", ('"' + phrase.replace('"', "") + '"',)
                    ).fetchone()
            except apsw.Error:  # no keyword index (file scan): the term counts as unseen (not kept)
                out.append(0)
                continue
            count = int(row[0]) if row else 0
            if stored is not None and len(stored.dfs) < STORED_CACHE_CHUNKS:
                stored.dfs[(form, is_cjk)] = count
            out.append(count)
        return out

    def indexed_texts(self, ids: Sequence[int]) -> dict[int, str]:
        stored = self._current()
        if stored is None:
            return self._read_texts(ids)
        out: dict[int, str] = {}
        missing: list[int] = []
        for rowid in ids:
            text = stored.texts.get(rowid)
            if text is None:
                missing.append(rowid)
            else:
                out[rowid] = text
        if missing:
            fetched = self._read_texts(missing)
            if len(stored.texts) + len(fetched) > STORED_CACHE_CHUNKS:
                stored.texts.clear()
            stored.texts.update(fetched)
            out.update(fetched)
        return out

    def _read_texts(self, ids: Sequence[int]) -> dict[int, str]:
        texts = self.db.indexed_texts(ids)
        if self.kind != "unicode61" or self.db.legacy_layout():
            return texts  # schema 1/2 hands back the FTS copy itself
        return {rowid: fts_index_text(text) for rowid, text in texts.items()}

    def cosines(self, query_vec: Vector, ids: Sequence[int]) -> dict[int, float]:
        import numpy as np

        q = normalised(query_vec)
        stored = self._current()
        vectors: dict[int, tuple[Any, float] | None] = {}
        missing: list[int] = []
        for rowid in ids:
            if stored is not None and rowid in stored.vectors:
                vectors[rowid] = stored.vectors[rowid]
            else:
                missing.append(rowid)
        if missing:
            blobs = self.db.chunk_vectors(missing)
            for rowid in missing:
                blob = blobs.get(rowid)
                if blob is None:
                    vectors[rowid] = None
                    continue
                vec = np.frombuffer(blob, dtype=np.float32)
                vectors[rowid] = (vec, float(np.linalg.norm(vec)) or 1.0)
            if stored is not None:
                if len(stored.vectors) + len(missing) > STORED_CACHE_CHUNKS:
                    stored.vectors.clear()
                stored.vectors.update((rowid, vectors[rowid]) for rowid in missing)
        out: dict[int, float] = {}
        for rowid, found in vectors.items():
            if found is not None and found[0].shape[0] == q.shape[0]:
                out[rowid] = float(np.dot(found[0], q)) / found[1]
        return out

    def mean_cosine(self, query_vec: Vector) -> float | None:
        matrix = self.matrix
        key = (self.db.chunks_version(), self.chunk_count(), None if matrix is None else matrix.shape)
        return self._centroid.mean_cosine(key, lambda: self._compute_centroid(matrix), query_vec)

    def _compute_centroid(self, matrix: Vector | None) -> Vector | None:
        import numpy as np

        if matrix is not None and matrix.ndim == 2 and matrix.shape[0]:
            return np.asarray(matrix.mean(axis=0), dtype=np.float32)
        layout, refs = self.db.vector_refs()
        dtype = np.float16 if layout.encoding == "float16" and not layout.legacy else np.float32
        total: Any = None
        size = 0  # bytes per vector: the first one's (another size is another model's, skipped)
        count = 0
        # A batch at a time as one matrix: per vector, the first search of a process past the
        # in-memory budget spent 17 s of CPU on 1M of them.
        for start in range(0, len(refs), 4096):
            blobs = [blob for blob in self.db.vector_blobs(layout, refs[start : start + 4096]) if blob]
            if not blobs:
                continue
            if not size:
                size = len(blobs[0])
                total = np.zeros(size // np.dtype(dtype).itemsize, dtype=np.float64)
            kept = [blob for blob in blobs if len(blob) == size]
            batch = np.frombuffer(b"".join(kept), dtype=dtype).reshape(len(kept), -1).astype(np.float64)
            norms = np.linalg.norm(batch, axis=1)
            norms[norms == 0] = 1.0
            total += (batch / norms[:, None]).sum(axis=0)
            count += len(kept)
        return None if total is None or not count else np.asarray(total / count, dtype=np.float32)

    def marked_chunks(self) -> list[ChunkRow]:
        """Every Markdown chunk holding the word of supersession markup (search/markup.py), found
        through the keyword index and kept until the index changes."""
        key = (self.db.chunks_version(), self.chunk_count())
        if self._marked is not None and self._marked[0] == key:
            return self._marked[1]
        cols = "c.rowid, c.path, c.source, c.start_line, c.end_line, c.text"
        where = "c.source = 'memory'"
        if self.db.caps.fts_available:
            phrase = f'"{MARKUP_KEYWORD}"'
            sql = (f"SELECT {cols} FROM chunks c WHERE {where} AND c.rowid IN "
                   "(SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?)")  # fmt: skip
            args: tuple[object, ...] = (phrase,)
        else:  # no keyword index (file scan): read the chunks themselves
            sql, args = f"SELECT {cols} FROM chunks c WHERE {where} AND instr(lower(c.text), ?) > 0", (MARKUP_KEYWORD,)
        try:
            fetched: list[Any] = self.conn.execute(sql, args).fetchall()
            found = [(int(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), str(r[5])) for r in fetched]
        except apsw.Error:
            found = []
        self._marked = (key, found)
        return found

    def marks(self) -> list[Mark]:
        """The marks of :meth:`marked_chunks`, parsed once per list of them (a search at 1M chunks
        parsed the ~1,450 chunks holding the word on every search)."""
        rows = self.marked_chunks()
        kept = self._marks
        if kept is not None and kept[0] is rows:
            return kept[1]
        found = collect(rows)
        self._marks = (rows, found)
        return found

    def whole_message(self, path: str, message: int) -> list[str] | None:
        from mdrecall.search.budget import message_lines

        rows: list[Any] = self.conn.execute(
            "SELECT rowid, start_line, end_line, text FROM chunks WHERE path = ? AND source = 'sessions' "
            "AND start_line <= ? AND end_line >= ? ORDER BY start_line, rowid",
            (path, message, message),
        ).fetchall()
        numbers = self.line_numbers([int(r[0]) for r in rows])
        return message_lines([(int(r[1]), int(r[2]), str(r[3]), numbers.get(int(r[0]))) for r in rows], message)

    def line_numbers(self, ids: Sequence[int]) -> dict[int, list[int]]:
        stored = self._current()
        known = stored.numbers if stored is not None else {}
        missing = [rowid for rowid in ids if rowid not in known]
        found: dict[int, tuple[int, ...] | None] = {}
        if missing:
            read = self.db.chunk_line_numbers(missing)
            for rowid in missing:
                decoded = decode_numbers(read[rowid]) if rowid in read else None
                found[rowid] = tuple(decoded) if decoded is not None else None
            if stored is not None:
                if len(known) + len(found) > STORED_CACHE_CHUNKS:
                    known.clear()
                known.update(found)
        out: dict[int, list[int]] = {}
        for rowid in ids:
            numbers = found[rowid] if rowid in found else known.get(rowid)
            if numbers is not None:
                out[rowid] = list(numbers)  # a list of its own: a hit may change its map
        return out


_CORPORA: weakref.WeakKeyDictionary[IndexDB, IndexCorpus] = weakref.WeakKeyDictionary()
_CORPORA_LOCK = threading.Lock()


def _corpus_of(db: IndexDB, tokenizer: str) -> IndexCorpus:
    with _CORPORA_LOCK:
        found = _CORPORA.get(db)
        if found is None or found.kind != tokenizer or found.conn is not db.conn:
            found = _CORPORA[db] = IndexCorpus(db, tokenizer)
    return found


def index_corpus(db: IndexDB, tokenizer: str, matrix: Vector | None = None) -> IndexCorpus:
    """The :class:`IndexCorpus` of this connection (made once), with the KNN matrix if one is loaded."""
    found = _corpus_of(db, tokenizer)
    found.matrix = matrix
    return found


def indexed_chunks(db: IndexDB, tokenizer: str) -> int:
    """The index's chunk count, kept by this connection's corpus until the chunks change."""
    return _corpus_of(db, tokenizer).chunk_count()


class CandidateCorpus:
    """Statistics estimated from the candidate lists alone, for an engine that offers nothing else.

    N is the number of distinct candidates and a term's document frequency the candidates holding
    it, both far smaller than the real corpus's, so rare and common terms are told apart less well
    than with real statistics; vectors are only those the vector candidates carried (their scores).
    Scores keep the same scale, but off-topic queries are caught less reliably.
    """

    def __init__(self, keyword: Iterable[Candidate], vector: Iterable[Candidate]) -> None:
        self._tok = PorterTokens()
        self._texts: dict[int, str] = {}
        for c in [*keyword, *vector]:
            self._texts.setdefault(c.rowid, c.text)
        self._tokens = {rowid: set(self.tokens(text)) for rowid, text in self._texts.items()}

    def tokens(self, text: str) -> list[str]:
        return self._tok.tokens(text)

    def chunk_count(self) -> int:
        return len(self._texts)

    def doc_freqs(self, terms: Sequence[str], forms: Sequence[tuple[str, ...]], cjk: Sequence[bool]) -> list[int]:
        out = []
        for form, is_cjk in zip(forms, cjk, strict=True):
            if is_cjk:
                out.append(sum(form[0] in text.replace(" ", "") for text in self._texts.values()))
            else:
                out.append(sum(all(s in toks for s in form) for toks in self._tokens.values()))
        return out

    def indexed_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return {}

    def cosines(self, query_vec: Vector, ids: Sequence[int]) -> dict[int, float]:
        return {}

    def mean_cosine(self, query_vec: Vector) -> float | None:
        return None

    def whole_message(self, path: str, message: int) -> list[str] | None:
        return None

    def line_numbers(self, ids: Sequence[int]) -> dict[int, list[int]]:
        return {}
