"""Word-level text handling shared by chunking, keyword search and MMR.

CJK handling: FTS5's ``unicode61`` tokenizer treats a run of Han characters as one token, so a query
for a one- or two-character word inside a sentence never matches. mdrecall indexes every CJK, kana and
Hangul character as its own token (by spacing them out in the FTS copy of the text) and queries CJK
words as phrases of adjacent characters (bigrams), which finds words of any length.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable

# Han (incl. extensions and compatibility), kana, Hangul syllables and jamo, CJK punctuation excluded.
_CJK_RANGES = (
    "\u2e80-\u2fdf"  # radicals
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u312f"  # bopomofo
    "\u3131-\u318f"  # hangul compatibility jamo
    "\u31f0-\u31ff"  # katakana extensions
    "\u3400-\u4dbf"  # ext A
    "\u4e00-\u9fff"  # unified
    "\ua960-\ua97f"
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0002fa1f"
)
_PUNCT = re.compile(r"[^\w\s]")
#: ``_token()`` and ``_word()`` on text where no character is CJK (``_no_cjk``): the same words.
_ASCII_WORD = re.compile(r"\w+")


def _on_first_use(pattern: str) -> Callable[[], re.Pattern[str]]:
    """``pattern``, compiled when first asked for. A CJK character class costs ~20 M instructions
    to compile (the compiler marks each of its ~50,000 code points), and ASCII text, every English
    query and most notes, needs none of them."""
    return functools.cache(lambda: re.compile(pattern))


#: Every CJK range starts at U+2E80 or above: text with no character there holds no CJK, and its words
#: are the ``\w+`` runs, as on ASCII text. This class compiles in ~0.8 ms; the CJK classes cost ~9 ms
#: together, and typographic punctuation (’ — “) or an accented name makes a text non-ASCII.
_FIRST_CJK = "\u2e80"
_from_first_cjk = _on_first_use(f"[^\\x00-{chr(ord(_FIRST_CJK) - 1)}]")


def _no_cjk(text: str) -> bool:
    """True when ``text`` cannot hold a CJK character (no character at or above U+2E80)."""
    return text.isascii() or _from_first_cjk().search(text) is None


_cjk_char = _on_first_use(f"[{_CJK_RANGES}]")
_token = _on_first_use(f"[{_CJK_RANGES}]+|[^\\W{_CJK_RANGES}]+")
#: Spaces out text that holds CJK (fts_index_text).
_cjk_run = _on_first_use(f"[{_CJK_RANGES}]+")
#: Words: letters/digits/underscore outside CJK ranges (token estimates, CJK shares).
_word = _on_first_use(f"[^\\W{_CJK_RANGES}]+")


def _words(text: str) -> re.Pattern[str]:
    """The pattern of ``text``'s non-CJK words: ``\\w+`` when it holds no CJK (the same runs)."""
    return _ASCII_WORD if _no_cjk(text) else _word()


class _CjkChar:
    """One CJK character, as a pattern's ``match``, ``search`` and ``findall``: text with no
    character at or above U+2E80 is answered without the pattern (it can hold none), other text
    compiles it on first use."""

    __slots__ = ()

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return None if text[pos : pos + 1] < _FIRST_CJK else _cjk_char().match(text, pos)

    def search(self, text: str) -> re.Match[str] | None:
        return None if _no_cjk(text) else _cjk_char().search(text)

    def findall(self, text: str) -> list[str]:
        return [] if _no_cjk(text) else _cjk_char().findall(text)


CJK_CHAR = _CjkChar()


def _tokens(text: str) -> list[str]:
    """Non-CJK words and CJK runs, in order."""
    return _ASCII_WORD.findall(text) if _no_cjk(text) else _token().findall(text)


ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can cannot could did didn't do does doesn't doing don't down during each
    few for from further had has have having he her here hers herself him himself his how i if in into
    is isn't it its itself just let me more most my myself no nor not now of off on once only or other
    ought our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves s t d ll m
    re ve also did does ever get got go going gone like one us
    """.split()
)
# Question scaffolding in CJK queries; as bigrams these match everywhere and say nothing.
CJK_STOP_BIGRAMS = frozenset(
    """
    什么 为什 么时 时候 哪个 哪些 哪里 哪一 一个 多少 怎么 如何 是否 是什 是哪 的是 了什 是多 有哪 有什 在哪 么样
    什麼 為什 哪裡 怎麼 多少 甚麼
    """.split()
)
CJK_STOP_CHARS = frozenset("的了是在和与及或也都就而吗呢吧啊么")


def collapse_whitespace(text: str) -> str:
    r"""``text`` with each run of whitespace made one space, and none at either end: what
    ``re.sub(r"\s+", " ", text).strip()`` gives (``\s`` and ``str.split`` know the same 29 characters:
    tests/test_text.py), ~4x faster; a regex replaced every space of a transcript one by one, a third
    of rendering it."""
    return " ".join(text.split())


def is_cjk(ch: str) -> bool:
    return CJK_CHAR.match(ch) is not None


def count_cjk(text: str) -> int:
    return len(CJK_CHAR.findall(text))


def fts_index_text(text: str) -> str:
    """The copy of ``text`` stored in FTS5: CJK characters spaced out so each is one token."""
    if not CJK_CHAR.search(text):
        return text
    return _cjk_run().sub(lambda m: " " + " ".join(m.group(0)) + " ", text)


def word_tokens(text: str) -> list[str]:
    """Lower-cased non-CJK words plus CJK runs, in order."""
    return [t.lower() for t in _tokens(text)]


def _stem(word: str) -> str:
    """A light English suffix stripper used for overlap checks (FTS5 uses its own Porter stemmer)."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def similarity_tokens(text: str) -> set[str]:
    """Token set for Jaccard similarity (MMR): words, CJK unigrams and adjacent CJK bigrams."""
    tokens: set[str] = set()
    for tok in _tokens(text.lower()):
        if CJK_CHAR.match(tok):
            tokens.update(tok)
            tokens.update(tok[i : i + 2] for i in range(len(tok) - 1))
        else:
            tokens.add(tok)
    return tokens


def cjk_share(text: str) -> float:
    """The share of CJK characters among the letters and digits of ``text`` (0 when it has none)."""
    cjk = len(CJK_CHAR.findall(text))
    other = sum(len(w) for w in _words(text).findall(text))
    return cjk / (cjk + other) if cjk + other else 0.0


def query_terms(query: str) -> list[str]:
    """Search terms of a natural-language query: content words and CJK bigrams (or lone characters).

    Stop words are dropped unless nothing else is left, so "who is it?" still searches something.
    """
    words: list[str] = []
    stop: list[str] = []
    for tok in _tokens(query):
        if CJK_CHAR.match(tok):
            if len(tok) == 1:
                (stop if tok in CJK_STOP_CHARS else words).append(tok)
                continue
            for i in range(len(tok) - 1):
                gram = tok[i : i + 2]
                if gram in CJK_STOP_BIGRAMS or all(c in CJK_STOP_CHARS for c in gram):
                    stop.append(gram)
                else:
                    words.append(gram)
        else:
            low = tok.lower()
            if low in ENGLISH_STOP_WORDS or (len(low) == 1 and not low.isdigit()):
                stop.append(low)
            else:
                words.append(low)
    chosen = words or stop
    seen: set[str] = set()
    unique = []
    for term in chosen:
        if term not in seen:
            seen.add(term)
            unique.append(term)
    return unique


def fts_match_expression(terms: list[str]) -> str | None:
    """An FTS5 MATCH string that ORs the terms (ranked by BM25), CJK terms as character phrases."""
    parts = []
    for term in terms:
        clean = term.replace('"', "")
        if not clean:
            continue
        if CJK_CHAR.match(clean):
            parts.append('"' + " ".join(clean) + '"')
        else:
            parts.append('"' + clean + '"')
    return " OR ".join(parts) if parts else None


def term_stems(terms: list[str]) -> list[str]:
    return [_stem(t) if not CJK_CHAR.match(t) else t for t in terms]


def estimate_tokens(text: str) -> int:
    """Conservative word-piece estimate for chunk budgeting.

    Every CJK character counts as one token (BERT-style tokenizers split them one by one; the seed's
    four-characters-per-token rule under-counts CJK fourfold). Latin words count 1.3 (word pieces),
    punctuation one each.
    """
    no_cjk = _no_cjk(text)  # once: it is asked per line while indexing
    cjk = 0 if no_cjk else len(_cjk_char().findall(text))
    words = len((_ASCII_WORD if no_cjk else _word()).findall(text))
    punct = len(_PUNCT.findall(text))
    return cjk + int(words * 1.3 + 0.999) + punct


class SliceCosts:
    """:func:`estimate_tokens` of any slice of one text, from one scan of the whole.

    Each count the estimate makes is of matches that a slice keeps whole or cut short: a word is a run
    of word characters (a run the slice cuts is still one word of it), a CJK character or a
    punctuation mark one character. So ``text[a:b]`` holds the runs that start before ``b`` and end
    after ``a``, and the characters between: two binary searches each, instead of a scan of the slice
    (splitting a long line into pieces asked for the cost of ~13 slices of it per piece: most of the
    time of indexing a transcript)."""

    __slots__ = ("_run_starts", "_run_ends", "_singles")

    def __init__(self, text: str) -> None:
        no_cjk = _no_cjk(text)
        runs = [m.span() for m in (_ASCII_WORD if no_cjk else _word()).finditer(text)]
        self._run_starts = [start for start, _ in runs]
        self._run_ends = [end for _, end in runs]
        cjk = [] if no_cjk else [m.start() for m in _cjk_char().finditer(text)]
        # Sorted with repeats: a character that is both CJK and punctuation counts twice, as it does there.
        self._singles = sorted([m.start() for m in _PUNCT.finditer(text)] + cjk)

    def estimate(self, start: int, end: int) -> int:
        """``estimate_tokens(text[start:end])`` for ``0 <= start <= end <= len(text)``."""
        if end <= start:
            return 0  # (a run around an empty slice would count)
        words = bisect_left(self._run_starts, end) - bisect_right(self._run_ends, start)
        singles = bisect_left(self._singles, end) - bisect_left(self._singles, start)
        return singles + int(words * 1.3 + 0.999)
