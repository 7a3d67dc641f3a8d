"""Which lines of a snippet the query's words appear on: what ``mdrecall search`` (and the web page)
mark, so a reader sees at once why a chunk came back.

The same terms keyword search uses (:func:`mdrecall.text.query_terms`: content words, CJK bigrams),
matched on word stems, so "databases" marks a line saying "database". A hit found by its meaning
alone (vector search) may have no marked line; that is information too.
"""

from __future__ import annotations

from mdrecall.text import CJK_CHAR, query_terms, term_stems, word_tokens


class _Terms:
    """A query's search terms and their stems, worked out once for all the lines of a result."""

    __slots__ = ("_order", "cjk", "plain")

    def __init__(self, query: str) -> None:
        terms = query_terms(query)
        stems = term_stems(terms)
        #: (term, stem, whether a word may also match by starting with the stem), in query order.
        self.plain = [(t, s, len(s) >= 4) for t, s in zip(terms, stems) if not CJK_CHAR.match(t)]
        self.cjk = {t for t in terms if CJK_CHAR.match(t)}
        self._order = terms

    def found(self, text: str) -> list[str]:
        if not self._order:
            return []
        # A word matching a term starts with the term's stem (a stem only loses a suffix), so a
        # text holding none of the stems matches nothing: most lines, found without tokenising.
        low = text.lower()
        if not any(stem in low for _, stem, _ in self.plain) and not any(t in text for t in self.cjk):
            return []
        words = {w for w in word_tokens(text) if not CJK_CHAR.match(w)}
        word_stems = set(term_stems(list(words)))
        hits = {t for t, stem, prefix in self.plain
                if stem in word_stems or (prefix and any(w.startswith(stem) for w in words))}  # fmt: skip
        hits.update(t for t in self.cjk if t in text)
        return [t for t in self._order if t in hits]


def matched_terms(query: str, text: str) -> list[str]:
    """The query's search terms that occur in ``text``, in query order."""
    return _Terms(query).found(text)


def matching_lines(query: str, snippet: str) -> list[int]:
    """0-based indexes of the snippet lines holding at least one of the query's terms."""
    terms = _Terms(query)
    return [i for i, line in enumerate(snippet.split("\n")) if line.strip() and terms.found(line)]
