"""Which words of a line match a query, marked up safely.

Memory text is untrusted: a line is split into plain and matching pieces first and every piece is
escaped on its own, so the only markup in the result is the ``<mark>`` this module adds. Matching
mirrors keyword search loosely: the query's terms (:func:`mdrecall.text.query_terms`, stop words
dropped), compared case-insensitively, a word also matching when it shares the term's stem
("meetings" for "meeting"); CJK terms match as substrings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markupsafe import Markup, escape

from mdrecall.text import CJK_CHAR, query_terms, term_stems

_TOKEN = re.compile(r"\w+", re.UNICODE)
_MIN_STEM = 3


@dataclass(frozen=True)
class Matcher:
    words: frozenset[str]
    order: tuple[str, ...]
    stems: tuple[str, ...]
    cjk: tuple[str, ...]

    @classmethod
    def for_query(cls, query: str) -> Matcher:
        terms = query_terms(query or "")
        cjk = tuple(t for t in terms if CJK_CHAR.match(t))
        plain = [t for t in terms if not CJK_CHAR.match(t)]
        stems = tuple(s for s in term_stems(plain) if len(s) >= _MIN_STEM)
        return cls(frozenset(plain), tuple(plain), stems, cjk)

    def __bool__(self) -> bool:
        return bool(self.words or self.cjk)

    def _word_matches(self, word: str) -> bool:
        low = word.lower()
        return low in self.words or any(low.startswith(stem) for stem in self.stems)

    def spans(self, line: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for m in _TOKEN.finditer(line):
            if not CJK_CHAR.search(m.group(0)) and self._word_matches(m.group(0)):
                found.append(m.span())
        for term in self.cjk:
            start = line.find(term)
            while start >= 0:
                found.append((start, start + len(term)))
                start = line.find(term, start + len(term))
        found.sort()
        merged: list[tuple[int, int]] = []
        for lo, hi in found:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        return merged

    def matched_terms(self, text: str) -> list[str]:
        """The query terms found in ``text`` (for "matched: ..." explanations), in query order."""
        low = text.lower()
        words = {w.lower() for w in _TOKEN.findall(text)}
        out = []
        for term in self.order:
            stem = term_stems([term])[0]
            if term in words or (len(stem) >= _MIN_STEM and any(w.startswith(stem) for w in words)):
                out.append(term)
        out.extend(t for t in self.cjk if t in low)
        return out

    def mark(self, line: str) -> Markup:
        """``line`` escaped, with matching words in ``<mark>``."""
        out = []
        at = 0
        for lo, hi in self.spans(line):
            out.append(escape(line[at:lo]))
            out.append(Markup("<mark>") + escape(line[lo:hi]) + Markup("</mark>"))
            at = hi
        out.append(escape(line[at:]))
        return Markup("").join(out)
