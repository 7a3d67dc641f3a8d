"""Which lines of a snippet the query's words appear on: what ``mdrecall search`` (and the web page)
mark, so a reader sees at once why a chunk came back.

The same terms keyword search uses (:func:`mdrecall.text.query_terms`: content words, CJK bigrams),
matched on word stems, so "databases" marks a line saying "database". A hit found by its meaning
alone (vector search) may have no marked line; that is information too.
"""

from __future__ import annotations

from mdrecall.text import CJK_CHAR, query_terms, term_stems, word_tokens


def matched_terms(query: str, text: str) -> list[str]:
    """The query's search terms that occur in ``text``, in query order."""
    terms = query_terms(query)
    if not terms:
        return []
    stems = term_stems(terms)
    words = {w for w in word_tokens(text) if not CJK_CHAR.match(w)}
    word_stems = set(term_stems(sorted(words)))
    found = []
    for term, stem in zip(terms, stems):
        if CJK_CHAR.match(term):
            if term in text:
                found.append(term)
        elif stem in word_stems or any(w.startswith(stem) for w in words if len(stem) >= 4):
            found.append(term)
    return found


def matching_lines(query: str, snippet: str) -> list[int]:
    """0-based indexes of the snippet lines holding at least one of the query's terms."""
    return [i for i, line in enumerate(snippet.split("\n")) if line.strip() and matched_terms(query, line)]
