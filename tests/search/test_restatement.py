"""Statements compared sentence by sentence (search/restatement.py): our own sentences."""

from __future__ import annotations

from typing import Any

import pytest

from mdrecall.search.corpus import PorterTokens
from mdrecall.search.relevance import FallbackTokens, QueryStats, query_stats
from mdrecall.search.restatement import _DATE, _IDENT, _NUMBER, _NUMBER_WORDS, _WORD, _read, compare, statement
from mdrecall.text import ENGLISH_STOP_WORDS

TOKENS = PorterTokens()


class _Flat:
    """Every term equally rare: what the sentences say decides, not a corpus."""

    def tokens(self, text: str) -> list[str]:
        return TOKENS.tokens(text)

    def chunk_count(self) -> int:
        return 100

    def doc_freqs(self, terms: object, forms: object, cjk: list[bool]) -> list[int]:
        return [5] * len(cjk)


def _stats(query: str) -> QueryStats:
    return query_stats(query, _Flat())


@pytest.mark.parametrize(
    ("query", "older", "newer", "verdict", "why"),
    [
        ("where is the database hosted", "- Database is hosted on Heroku Postgres.",
         "- We moved the database from Heroku to Fly Postgres.", "changed", "replaced 'Heroku'"),
        ("how does Bob commute", "- Bob commutes to the office by train.",
         "- Bob no longer commutes to the office by train; he cycles.", "changed", "no longer commutes"),
        ("my highest score in Ticket to Ride", "I've been crushing it in Ticket to Ride lately - my highest score so far is 124 points.",
         "I just got my highest score in Ticket to Ride - 132 points!", "changed", "124 → 132"),
        ("using my Fitbit Charge 3", "I've been using my Fitbit Charge 3 for 6 months now, any tips for lazy Sundays?",
         "I realized I've been using my Fitbit Charge 3 for 9 months now.", "changed", "6 → 9"),  # "3" names the model
        ("where do I keep my old sneakers", "I've been keeping my old sneakers under my bed.",
         "I keep my old sneakers in a shoe rack in the closet now.", "possibly", None),
        ("when is the v0.4 release", "- v0.4 release date stays Thursday 2026-11-12.",
         "- Release checklist for v0.4 drafted: migrations, feature flags, changelog.", "different", None),
        ("how many dogs", "- Caroline has 2 dogs.", "- Melanie has 3 dogs.", "different", None),
        ("sprint velocity", "- Sprint 12 velocity was 30 points.", "- Sprint 13 velocity was 25 points.", "different", None),
        ("how many cats", "- [D1:2] Caroline: I have 2 cats.", "- [D5:9] Melanie: I have 3 cats.", "different", None),
        ("Caroline moved 4 years ago", "It made me reflect on how far I've come since I started transitioning three years ago.",
         "A friend made it for my 18th birthday ten years ago.", "different", None),  # only the generic words are shared
    ],
)
def test_compare(query: str, older: str, newer: str, verdict: str, why: str | None) -> None:
    stats = _stats(query)
    a, b = statement(older, stats, TOKENS.tokens), statement(newer, stats, TOKENS.tokens)
    assert a is not None and b is not None
    got, reason = compare(a, b, TOKENS.tokens, stats)
    assert got == verdict, (got, reason)
    assert (why is None and reason is None) or (why is not None and reason is not None and why in reason)


def test_headings_and_questions_state_nothing() -> None:
    stats = _stats("plans for the weekend")
    assert statement("## Weekend plans", stats, TOKENS.tokens) is None
    assert statement("Do you have any plans for the weekend?", stats, TOKENS.tokens) is None
    found = statement("Do you have plans? I have plans for the weekend: hiking.", stats, TOKENS.tokens)
    assert found is not None and found.text.startswith("I have plans")


def test_what_an_attachment_shows_is_not_a_stated_value() -> None:
    """Chat exports describe a shared photo in brackets: the people in two photos are not a count
    that changed, while a count the speaker states still is one."""
    stats = _stats("how many children does Melanie have")
    older = statement("- Melanie: Took the kids to the museum! [shares a photo of two children playing in a water play area]", stats, TOKENS.tokens)
    newer = statement("- Melanie: The kids loved the beach. [shares a photo of three children playing on the beach with a kite]", stats, TOKENS.tokens)
    assert all(found is None or not found.numbers for found in (older, newer))
    stats = _stats("how many children")
    stated = statement("- We have 2 children. [shares a photo of the family]", stats, TOKENS.tokens)
    grown = statement("- We have 3 children now! [shares a photo of three children]", stats, TOKENS.tokens)
    assert stated is not None and grown is not None
    assert compare(stated, grown, TOKENS.tokens, stats) == ("changed", "value changed (2 → 3)")


def test_a_links_text_is_read() -> None:
    stats = _stats("where is the database hosted")
    found = statement("- The database is hosted on [Fly Postgres](https://example.com/db) in 3 regions.", stats, TOKENS.tokens)
    assert found is not None and "3" in found.numbers
    assert "fly" in found.words


def test_a_question_naming_the_speaker_finds_the_name_in_the_speaker() -> None:
    """The speaker's name is part of a chat line's statement: a two-word question about them
    compares their own lines, and still never another person's."""
    stats = _stats("how many dogs does Caroline have")
    older = statement("- [D1:3] Caroline: I have 2 dogs.", stats, TOKENS.tokens)
    newer = statement("- [D9:4] Caroline: We adopted a puppy, so I have 3 dogs now.", stats, TOKENS.tokens)
    other = statement("- [D9:5] Melanie: We have 3 dogs too.", stats, TOKENS.tokens)
    assert older is not None and newer is not None and other is not None
    assert compare(older, newer, TOKENS.tokens, stats) == ("changed", "value changed (2 → 3)")
    assert compare(older, other, TOKENS.tokens, stats)[0] == "different"
    assert statement("- Caroline: Thanks, see you soon!", stats, TOKENS.tokens) is None  # only the name: states nothing asked



@pytest.mark.parametrize("tokens", [TOKENS.tokens, FallbackTokens().tokens], ids=["fts5-porter", "fallback"])
def test_a_statement_is_stemmed_in_one_call_as_word_by_word(tokens: Any) -> None:
    """``_read`` stems a sentence's content words in one tokenizer call: the same words and lead
    as a call per word (a space always separates tokens), for the index's tokenizer and the fallback;
    and it looks for dates and identifiers only in a sentence with a digit: the same ones."""
    sentences = [
        "We moved the e-mail relay from node.js to Go, instead of C++ services.",
        "Caroline's 3 dogs — Max, Bella and Luna — love the beach since 2023-05-08.",
        "I've been running 5k routes every morning at 6:30 with my Fitbit Charge 3.",
        "Das Café in München serves crêpes; 東京の会議は火曜日です and v0.4 ships.",
        "the a of and",  # stop words only: no words, no lead
        "Sprint 12 moved to March 3, then v0.5 shipped at 14:30 on 2026-11-12 (7/22 was the old date).",
        "Nothing here has a digit: not one date or version.",
    ]
    for sentence in sentences:
        got = _read(sentence, frozenset(), tokens, None)
        words: set[str] = set()
        lead = None
        dates = frozenset(m.group(0).lower() for m in _DATE.finditer(sentence))
        no_dates = _DATE.sub(" ", sentence)
        idents = {("v", m.group(0)[1:]) if m.group(1) is None else (m.group(1).lower(), m.group(2))
                  for m in _IDENT.finditer(no_dates)}  # fmt: skip
        rest = _IDENT.sub(" ", no_dates).replace("’", "'").replace("'", " ")
        for raw in _WORD.findall(rest):
            low = raw.lower()
            if (_NUMBER.match(low) or low in _NUMBER_WORDS or low in ENGLISH_STOP_WORDS or len(low) < 2
                    or not low[0].isalpha()):  # fmt: skip
                continue
            stems = tokens(low)  # one call a word: how it was read before
            if lead is None and stems:
                lead = stems[0]
            words.update(stems)
        assert (got.words, got.lead, got.dates, got.idents) == (frozenset(words), lead, dates, frozenset(idents)), sentence
