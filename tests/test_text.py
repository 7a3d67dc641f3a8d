"""Word handling: query terms for natural-language questions, CJK tokens, token estimates."""

from __future__ import annotations

from mdrecall.text import (
    estimate_tokens,
    fts_index_text,
    fts_match_expression,
    query_terms,
    similarity_tokens,
    word_tokens,
)


def test_question_keeps_content_words_only() -> None:
    assert query_terms("What database did we pick for the recipes?") == ["database", "pick", "recipes"]


def test_all_stop_words_still_search_something() -> None:
    assert query_terms("who is it?") != []


def test_punctuation_and_duplicates() -> None:
    assert query_terms("Postgres, postgres... POSTGRES!!") == ["postgres"]
    assert query_terms("?!.,;") == []


def test_cjk_query_terms_are_bigrams_without_question_scaffolding() -> None:
    assert query_terms("猫") == ["猫"]
    assert query_terms("咖啡") == ["咖啡"]
    terms = query_terms("王磊喜欢什么？")
    assert "什么" not in terms
    assert {"王磊", "磊喜", "喜欢"} <= set(terms)


def test_mixed_script_query() -> None:
    terms = query_terms("Mira 的猫叫什么")
    assert terms[0] == "mira" and "猫叫" in terms and "什么" not in terms


def test_fts_index_text_spaces_out_cjk() -> None:
    assert fts_index_text("hello world") == "hello world"
    spaced = fts_index_text("王磊喜欢绿茶")
    assert spaced.split() == ["王", "磊", "喜", "欢", "绿", "茶"]


def test_match_expression_ors_terms_and_quotes_phrases() -> None:
    expr = fts_match_expression(['data"base', "咖啡", "pick"])
    assert expr == '"database" OR "咖 啡" OR "pick"'
    assert fts_match_expression([]) is None


def test_similarity_tokens_cjk_unigrams_and_bigrams() -> None:
    tokens = similarity_tokens("Go 咖啡馆")
    assert {"go", "咖", "啡", "馆", "咖啡", "啡馆"} == tokens


def test_word_tokens_lowercases() -> None:
    assert word_tokens("Hello, World 你好") == ["hello", "world", "你好"]


def test_estimate_does_not_undercount_cjk() -> None:
    text = "王磊喜欢绿茶不喝咖啡" * 10  # 100 Han characters: BERT tokenizers read one piece each
    assert estimate_tokens(text) >= 100
    assert estimate_tokens("one two three") >= 3
    assert estimate_tokens("") == 0


def test_ascii_text_is_answered_without_the_cjk_patterns_and_alike() -> None:
    """CJK_CHAR and the word tokens answer ASCII text without compiling their CJK character class
    (a cold search's cost): the same answers as the compiled patterns, ASCII or not."""
    import re

    from mdrecall import text

    texts = ["", "plain words, v0.4 and snake_case_1", "Café crêpes in München", "東京の会議は火曜日です",
             "mixed 中文 words and 한국어", "’curly’ quotes — dashes", "x", "中"]  # fmt: skip
    cjk = re.compile(f"[{text._CJK_RANGES}]")
    token = re.compile(f"[{text._CJK_RANGES}]+|[^\\W{text._CJK_RANGES}]+")
    for t in texts:
        assert text._tokens(t) == token.findall(t), t
        assert text.CJK_CHAR.findall(t) == cjk.findall(t), t
        assert bool(text.CJK_CHAR.search(t)) == bool(cjk.search(t)), t
        for pos in range(len(t) + 1):
            found, want = text.CJK_CHAR.match(t, pos), cjk.match(t, pos)
            assert (found and found.group(0)) == (want and want.group(0)), (t, pos)
    text._cjk_char.cache_clear()
    text._token.cache_clear()
    assert query_terms("What database did we pick?") == ["database", "pick"]
    assert word_tokens("Deploys go out on Tuesdays") == ["deploys", "go", "out", "on", "tuesdays"]
    assert text._cjk_char.cache_info().currsize == 0 and text._token.cache_info().currsize == 0


def test_text_without_cjk_is_answered_without_the_cjk_patterns_and_alike() -> None:
    """Typographic punctuation (’ — “), accents and symbols below U+2E80 make a text non-ASCII but
    hold no CJK: it is answered without compiling a CJK class (~9 ms of a cold search), with the same
    results as the compiled patterns give, on random texts of every kind."""
    import random
    import re

    from mdrecall import text

    starts = [rng[0] for rng in re.findall(r"(.)-(.)", text._CJK_RANGES)]
    assert starts and min(starts) == text._FIRST_CJK  # what the shortcut relies on
    cjk = re.compile(f"[{text._CJK_RANGES}]")
    token = re.compile(f"[{text._CJK_RANGES}]+|[^\\W{text._CJK_RANGES}]+")
    word = re.compile(f"[^\\W{text._CJK_RANGES}]+")
    punct = re.compile(r"[^\w\s]")

    def estimate(t: str) -> int:
        return len(cjk.findall(t)) + int(len(word.findall(t)) * 1.3 + 0.999) + len(punct.findall(t))

    for name in ("_cjk_char", "_token", "_cjk_run", "_word"):
        getattr(text, name).cache_clear()
    for t in ["’curly’ quotes — dashes", "Café crêpes in München, naïve résumé", "Σ ≥ 3 · ⅓ → ∞ № 5", "\u2e7f edge"]:
        assert text._tokens(t) == token.findall(t) and text.word_tokens(t) == [w.lower() for w in token.findall(t)]
        assert text.CJK_CHAR.findall(t) == [] and text.CJK_CHAR.search(t) is None
        assert text.fts_index_text(t) == t and text.cjk_share(t) == 0.0
        assert text.estimate_tokens(t) == estimate(t)
        assert text.SliceCosts(t).estimate(0, len(t)) == estimate(t)
    assert all(getattr(text, name).cache_info().currsize == 0 for name in ("_cjk_char", "_token", "_cjk_run", "_word"))

    rng = random.Random(7)
    alphabet = ["a", "Z", "_", "7", " ", ".", "é", "ß", "’", "—", "\u2e7f", "\u2e80", "中", "の", "한", "ｦ",
                "\U00020000", "\U0002fa1f", "😀", "，", "・"]  # fmt: skip
    for _ in range(3000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert text._tokens(t) == token.findall(t), repr(t)
        assert text.CJK_CHAR.findall(t) == cjk.findall(t), repr(t)
        assert bool(text.CJK_CHAR.search(t)) == bool(cjk.search(t)), repr(t)
        assert text.estimate_tokens(t) == estimate(t), repr(t)
        assert text.cjk_share(t) == (lambda c, o: c / (c + o) if c + o else 0.0)(
            len(cjk.findall(t)), sum(len(w) for w in word.findall(t))), repr(t)  # fmt: skip
        costs = text.SliceCosts(t)
        a, b = sorted((rng.randint(0, len(t)), rng.randint(0, len(t))))
        assert costs.estimate(a, b) == (estimate(t[a:b]) if b > a else 0), (repr(t), a, b)
        pos = rng.randint(0, len(t))
        found, want = text.CJK_CHAR.match(t, pos), cjk.match(t, pos)
        assert (found and found.group(0)) == (want and want.group(0)), (repr(t), pos)


def test_collapse_whitespace_is_the_regex_it_replaces() -> None:
    import random
    import re
    import sys

    from mdrecall.text import collapse_whitespace

    pattern = re.compile(r"\s+")
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if pattern.fullmatch(chr(c))]
    assert len(spaces) == 29 and all(ch.isspace() for ch in spaces)  # the count the docstring gives
    rng = random.Random(3)
    alphabet = [*spaces, "a", "b", "é", "中", "\x00", "\u200b"]  # a zero-width space is not whitespace
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert collapse_whitespace(text) == pattern.sub(" ", text).strip(), repr(text)
